"""E2M1 / NVFP4 / MXFP4 codecs vs slow scalar references written from the specs, known answers,
round-trip properties, and a cross-check of MXFP4 against gguf-py's MXFP4 block type."""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gguf
from onecat.quant import fp4, fp8

SETTINGS = settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])
F32 = np.float32


# ---- slow references (scalar Python from the specs) ----------------------------------------------

def e2m1_spec(code: int) -> float:
    """OCP MX spec E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit; e=0 is subnormal (m * 0.5)."""
    s = -1.0 if code & 8 else 1.0
    e, m = (code >> 1) & 3, code & 1
    return s * (m * 0.5 if e == 0 else 2.0 ** (e - 1) * (1 + m / 2))


def e2m1_encode_spec(v: float) -> int:
    """Nearest E2M1 magnitude, ties to the even code, saturating at 6; sign kept."""
    sign = 8 if math.copysign(1.0, v) < 0 else 0
    a = min(abs(v), 6.0)
    best = min(range(8), key=lambda c: (abs(e2m1_spec(c) - a), c & 1))
    return sign | best


def e4m3_spec(code: int) -> float:
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 15, code & 7
    if e == 15 and m == 7:
        return math.nan
    return s * (m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


def e4m3_encode_spec(v: float) -> int:
    """Positive v -> nearest E4M3FN code, ties to even, saturating at 448 (independent of fp8.py)."""
    best = min(range(0x7F), key=lambda c: (abs(e4m3_spec(c) - min(v, 448.0)), c & 1))
    return best


def nvfp4_dequant_slow(packed: np.ndarray, sf: np.ndarray, gs: float) -> np.ndarray:
    rows, half = packed.shape
    out = np.zeros((rows, 2 * half), np.float32)
    for r in range(rows):
        for k in range(2 * half):
            byte = int(packed[r, k // 2])
            code = (byte >> 4) if k % 2 else (byte & 15)
            mult = F32(e4m3_spec(int(sf[r, k // 16]))) * F32(gs)
            out[r, k] = F32(e2m1_spec(code)) * mult
    return out


def nvfp4_quant_slow(x: np.ndarray):
    """ModelOpt's NVFP4 recipe, element by element in float32."""
    rows, k = x.shape
    amax = F32(np.abs(x).max())
    gs = amax / F32(6.0 * 448.0) if amax > 0 else F32(1.0)
    codes = np.zeros((rows, k), np.int64)
    sf = np.zeros((rows, k // 16), np.int64)
    for r in range(rows):
        for b in range(k // 16):
            blk = x[r, 16 * b:16 * b + 16]
            s = F32(np.abs(blk).max()) / (F32(6.0) * gs)
            s = F32(1.0) if s == 0 else s
            sf[r, b] = e4m3_encode_spec(float(s))
            div = F32(e4m3_spec(int(sf[r, b]))) * gs
            for j in range(16):
                codes[r, 16 * b + j] = e2m1_encode_spec(0.0 if div == 0 else float(F32(blk[j]) / div))
    return codes, sf, gs


def mxfp4_quant_slow(x: np.ndarray):
    """OCP MX v1.0 section 6.3: X = 2**(floor(log2(amax)) - emax_elem), emax_elem(E2M1) = 2."""
    rows, k = x.shape
    codes = np.zeros((rows, k), np.int64)
    e = np.zeros((rows, k // 32), np.int64)
    for r in range(rows):
        for b in range(k // 32):
            blk = x[r, 32 * b:32 * b + 32].astype(np.float64)
            amax = float(np.abs(blk).max())
            shared = -127 if amax == 0 else max(-127, min(127, math.frexp(amax)[1] - 1 - 2))
            e[r, b] = shared + 127
            for j in range(32):
                codes[r, 32 * b + j] = e2m1_encode_spec(blk[j] / 2.0**shared)
    return codes, e


def unpack_slow(packed: np.ndarray) -> np.ndarray:
    rows, half = packed.shape
    return np.array([[(int(packed[r, k // 2]) >> (4 * (k % 2))) & 15 for k in range(2 * half)] for r in range(rows)])


# ---- E2M1 ------------------------------------------------------------------------------------------

def test_e2m1_table_known_answer():
    assert fp4.E2M1_VALUES.tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    assert [e2m1_spec(c) for c in range(16)] == fp4.E2M1_VALUES.tolist()
    assert math.copysign(1, fp4.E2M1_VALUES[8].item()) == -1.0


def test_e2m1_encode_ties_and_saturation():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.01, 6.0, 7.0, 1e9, math.inf, -0.0, -0.25, -5.0])
    assert fp4.e2m1_encode(x).tolist() == [0, 2, 2, 4, 4, 6, 6, 7, 7, 7, 7, 7, 8, 8, 14]


@SETTINGS
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=True), min_size=1, max_size=64))
def test_e2m1_encode_vs_spec(vals):
    ours = fp4.e2m1_encode(torch.tensor(vals, dtype=torch.float32)).tolist()
    assert ours == [e2m1_encode_spec(v) for v in vals]


def test_e2m1_encode_all_midpoints_vs_spec():
    mags = sorted(set(abs(v) for v in fp4.E2M1_VALUES.tolist()))
    pts = []
    for a, b in zip(mags, mags[1:]):
        m = (a + b) / 2
        pts += [m, float(np.nextafter(F32(m), F32(0))), float(np.nextafter(F32(m), F32(10)))]
    vals = [s * v for v in pts + mags for s in (1.0, -1.0)]
    assert fp4.e2m1_encode(torch.tensor(vals)).tolist() == [e2m1_encode_spec(v) for v in vals]


def test_pack_low_nibble_first():
    codes = torch.tensor([[1, 2, 3, 4, 15, 0]])
    assert fp4.pack_fp4(codes).tolist() == [[0x21, 0x43, 0x0F]]
    assert torch.equal(fp4.unpack_fp4(fp4.pack_fp4(codes)), codes)


# ---- NVFP4 -----------------------------------------------------------------------------------------

def test_nvfp4_known_answer():
    weight = torch.tensor([[0x21, 0xF7, 0, 0, 0, 0, 0, 0x9A]], dtype=torch.uint8)   # 16 elements
    sf = torch.tensor([[0x40]], dtype=torch.uint8)                                   # E4M3 0x40 = 2.0
    y = fp4.nvfp4_dequantize(weight, sf, torch.tensor(0.5))                           # multiplier 1.0
    assert y.tolist() == [[0.5, 1.0, 6.0, -6.0] + [0.0] * 10 + [-1.0, -0.5]]
    # same bytes given as a float8_e4m3fn tensor: bytes are reinterpreted, not cast
    assert torch.equal(fp4.nvfp4_dequantize(weight, sf.view(torch.float8_e4m3fn), 0.5), y)


def test_nvfp4_dequant_vs_slow_reference():
    g = torch.Generator().manual_seed(3)
    packed = torch.randint(0, 256, (5, 24), dtype=torch.uint8, generator=g)
    sf = torch.randint(0, 0x7F, (5, 3), dtype=torch.uint8, generator=g)              # no NaN scale codes
    ours = fp4.nvfp4_dequantize(packed, sf, 0.37)
    ref = nvfp4_dequant_slow(packed.numpy(), sf.numpy(), 0.37)
    assert np.array_equal(ours.numpy().view(np.uint32), ref.view(np.uint32))


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**32 - 1), st.floats(-30, 30))
def test_nvfp4_quantize_vs_slow_reference(rows, nblk, seed, log_mag):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, 16 * nblk)) * np.exp(rng.uniform(-6, 6, (rows, 16 * nblk)))
         * 2.0**log_mag).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = 0.0
    packed, sf, gs = fp4.nvfp4_quantize(torch.from_numpy(x))
    codes_ref, sf_ref, gs_ref = nvfp4_quant_slow(x)
    assert gs.item() == gs_ref
    assert np.array_equal(sf.numpy(), sf_ref)
    assert np.array_equal(unpack_slow(packed.numpy()), codes_ref)


def nvfp4_err_bound(x, y_mult):
    """|x - q| <= half the E2M1 gap at |x|/m, or the clipping error beyond 6 (m = block multiplier)."""
    a = x.abs() / y_mult
    half_gap = torch.where(a <= 2, 0.25, torch.where(a <= 4, 0.5, 1.0)) * y_mult
    return torch.maximum(half_gap, x.abs() - 6 * y_mult) * (1 + 1e-5) + 1e-30


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.floats(-20, 20))
def test_nvfp4_roundtrip_properties(seed, log_mag):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 64, generator=g) * torch.exp(torch.empty(4, 64).uniform_(-3, 3, generator=g)) * 2.0**log_mag
    packed, sf, gs = fp4.nvfp4_quantize(x)
    y = fp4.nvfp4_dequantize(packed, sf, gs)
    mult = (fp8.decode(sf, "e4m3fn") * gs).repeat_interleave(16, dim=-1)
    assert bool(((y - x).abs() <= nvfp4_err_bound(x, mult)).all())
    # on the grid: re-encoding the dequantized values with the same scales reproduces the codes
    packed2, sf2, gs2 = fp4.nvfp4_quantize(y, global_scale=gs, block_scale=sf)
    assert torch.equal(packed2, packed) and torch.equal(sf2, sf)


# ---- MXFP4 -----------------------------------------------------------------------------------------

def test_e8m0_known_answer():
    v = fp4.e8m0_decode(torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8))
    assert v[:6].tolist() == [2.0**-127, 2.0**-126, 0.5, 1.0, 2.0, 2.0**127]
    assert math.isnan(v[6].item())


def test_mxfp4_known_answer():
    blocks = torch.zeros(1, 16, dtype=torch.uint8)
    blocks[0, 0] = 0x5B                      # element 0 = code 0xB (-1.5), element 1 = code 0x5 (3.0)
    y = fp4.mxfp4_dequantize(blocks, torch.tensor([[128]], dtype=torch.uint8))   # scale 2**1
    assert y[0, :2].tolist() == [-3.0, 6.0] and y[0, 2:].abs().sum() == 0
    assert bool(torch.isnan(fp4.mxfp4_dequantize(blocks, torch.tensor([[255]], dtype=torch.uint8))).all())
    blocks2, scales2 = fp4.mxfp4_quantize(torch.tensor([[6.0, -1.0, 0.25, 0.75] + [0.0] * 28]))
    assert scales2.tolist() == [[127]]       # floor(log2 6) - 2 = 0
    # 6 -> code 7, -1 -> 0xA (low/high nibble of byte 0); 0.25 ties to 0 (even), 0.75 ties to 1.0 (code 2)
    assert blocks2[0, :2].tolist() == [0xA7, 0x20]


def test_mxfp4_dequant_vs_slow_reference():
    g = torch.Generator().manual_seed(11)
    blocks = torch.randint(0, 256, (3, 48), dtype=torch.uint8, generator=g)
    scales = torch.randint(0, 255, (3, 3), dtype=torch.uint8, generator=g)
    ours = fp4.mxfp4_dequantize(blocks, scales)
    codes = unpack_slow(blocks.numpy())
    for r in range(3):
        for k in range(96):
            with np.errstate(over="ignore"):
                want = F32(e2m1_spec(int(codes[r, k])) * 2.0 ** (int(scales[r, k // 32]) - 127))
            assert ours[r, k].numpy().view(np.uint32) == want.view(np.uint32)


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**32 - 1), st.floats(-140, 120))
def test_mxfp4_quantize_vs_slow_reference(rows, nblk, seed, log_mag):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, 32 * nblk)) * np.exp(rng.uniform(-4, 4, (rows, 32 * nblk)))
         * 2.0**log_mag).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = 0.0
    if not np.isfinite(x).all():
        return
    blocks, scales = fp4.mxfp4_quantize(torch.from_numpy(x))
    codes_ref, e_ref = mxfp4_quant_slow(x)
    assert np.array_equal(scales.numpy(), e_ref)
    assert np.array_equal(unpack_slow(blocks.numpy()), codes_ref)


def test_mxfp4_dequant_matches_gguf_py_block_type():
    """gguf-py has MXFP4 as a GGUF block type (1 byte E8M0 + 16 bytes; byte j holds elements j and
    j+16). Re-laid-out, it must decode our blocks to the same floats (scale 255 excluded: ggml has no NaN)."""
    g = torch.Generator().manual_seed(2)
    blocks = torch.randint(0, 256, (64, 16), dtype=torch.uint8, generator=g)
    scales = torch.randint(0, 255, (64, 1), dtype=torch.uint8, generator=g)
    ours = fp4.mxfp4_dequantize(blocks, scales)                               # [64, 32]
    codes = fp4.unpack_fp4(blocks)                                            # element order
    ggml_qs = (codes[:, :16] | (codes[:, 16:] << 4)).to(torch.uint8)
    raw = torch.cat([scales, ggml_qs], dim=1).numpy()
    ref = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.MXFP4).reshape(64, 32)
    # ggml's int8 table decodes code 8 as +0; E2M1 code 8 is -0: equal as values, bits differ only there
    assert np.array_equal(ours.numpy(), ref)
    diff = ours.numpy().view(np.uint32) != ref.view(np.uint32)
    assert np.all(ref[diff] == 0) and np.all(codes.numpy()[diff] == 8)


def mx_err_bound(x, scale):
    a = x.abs() / scale
    half_gap = torch.where(a <= 2, 0.25, torch.where(a <= 4, 0.5, 1.0)) * scale
    return torch.maximum(half_gap, x.abs() - 6 * scale) * (1 + 1e-6) + 1e-38


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.floats(-60, 60))
def test_mxfp4_roundtrip_properties(seed, log_mag):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 96, generator=g) * torch.exp(torch.empty(3, 96).uniform_(-3, 3, generator=g)) * 2.0**log_mag
    blocks, scales = fp4.mxfp4_quantize(x)
    y = fp4.mxfp4_dequantize(blocks, scales)
    sc = fp4.e8m0_decode(scales).repeat_interleave(32, dim=-1)
    assert bool(((y - x).abs() <= mx_err_bound(x, sc)).all())
    # the largest element of each block lands in [4, 8) before saturation -> never more than 2 scale units off
    assert bool(((y - x).abs() <= 2 * sc).all())
    blocks2, scales2 = fp4.mxfp4_quantize(y, scales=scales)
    assert torch.equal(blocks2, blocks)


# ---- bad input ---------------------------------------------------------------------------------------

def test_fp4_errors():
    with pytest.raises(ValueError, match=r"'w' \(nvfp4\): row length 24 is not a multiple of the block size 16"):
        fp4.nvfp4_dequantize(torch.zeros(2, 12, dtype=torch.uint8), torch.zeros(2, 1, dtype=torch.uint8), 1.0, name="w")
    with pytest.raises(ValueError, match=r"nvfp4.*scales have shape \(2, 3\), expected \(2, 2\)"):
        fp4.nvfp4_dequantize(torch.zeros(2, 16, dtype=torch.uint8), torch.zeros(2, 3, dtype=torch.uint8), 1.0)
    with pytest.raises(ValueError, match=r"weight_scale_2 must be a single float32"):
        fp4.nvfp4_dequantize(torch.zeros(2, 8, dtype=torch.uint8), torch.zeros(2, 1, dtype=torch.uint8), torch.ones(2))
    with pytest.raises(ValueError, match=r"'e' \(mxfp4\): row length 48 is not a multiple of the block size 32"):
        fp4.mxfp4_quantize(torch.zeros(2, 48), name="e")
    with pytest.raises(ValueError, match=r"mxfp4.*inf/NaN"):
        fp4.mxfp4_quantize(torch.full((1, 32), math.nan))
    with pytest.raises(ValueError, match=r"mxfp4.*blocks must be uint8"):
        fp4.mxfp4_dequantize(torch.zeros(1, 16, dtype=torch.int32), torch.zeros(1, 1, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"NaN has no E2M1 encoding"):
        fp4.e2m1_encode(torch.tensor([math.nan]))
