"""GGUF codecs vs gguf-py's numpy reference (gguf.quants): bit-exact dequantize and quantize."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

from onecat.quant import ggml

SETTINGS = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.data_too_large])

# Byte offsets of the fp16 scale fields (d, dmin/m) inside one block of each type: these are drawn
# from finite fp16 values; every other byte of a block is arbitrary.
SCALE_OFFSETS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ4_NL": [0], "IQ4_XS": [0], "IQ3_S": [0], "IQ3_XXS": [0],
}
BLOCK_TYPES = list(SCALE_OFFSETS)
QUANT_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]

F16_EXTREMES = [0.0, -0.0, 65504.0, -65504.0, 2.0**-24, -(2.0**-24), 2.0**-14, -(2.0**-14),
                2.0**-14 - 2.0**-24, 1.0, -1.0, 32768.0]
f16_values = st.one_of(st.sampled_from(F16_EXTREMES), st.floats(width=16, allow_nan=False, allow_infinity=False))


def bits_equal(a: torch.Tensor, b: np.ndarray) -> bool:
    a = a.numpy()
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.astype(np.float32).view(np.uint32))


def set_scales(raw: np.ndarray, tname: str, scales: np.ndarray) -> None:
    for i, off in enumerate(SCALE_OFFSETS[tname]):
        raw[:, off:off + 2] = scales[:, i:i + 1].astype(np.float16).view(np.uint8)


@st.composite
def gguf_tensor(draw, tname):
    """(raw uint8 [rows, bytes_per_row], logical shape) with valid fp16 scale fields."""
    t = ggml.GGML_TYPES[tname]
    rows = draw(st.integers(1, 3))
    per_row = draw(st.integers(1, 3))
    nb = rows * per_row
    body = draw(st.binary(min_size=nb * t.type_size, max_size=nb * t.type_size))
    raw = np.frombuffer(body, dtype=np.uint8).reshape(nb, t.type_size).copy()
    scales = np.array([[draw(f16_values) for _ in SCALE_OFFSETS[tname]] for _ in range(nb)], dtype=np.float16)
    set_scales(raw, tname, scales)
    return raw.reshape(rows, per_row * t.type_size), (rows, per_row * t.block_size)


# ---- the type table ------------------------------------------------------------------------------

def test_type_table_matches_gguf_py():
    for name, t in ggml.GGML_TYPES.items():
        assert T[name].value == t.type_id
        assert GGML_QUANT_SIZES[T[name]] == (t.block_size, t.type_size)
        assert ggml.ggml_type(T[name]) is t and ggml.ggml_type(t.type_id) is t and ggml.ggml_type(name.lower()) is t


# ---- dequantize ----------------------------------------------------------------------------------

@pytest.mark.parametrize("tname", BLOCK_TYPES)
def test_dequantize_hypothesis_blocks_bit_exact(tname):
    @SETTINGS
    @given(gguf_tensor(tname))
    def check(case):
        raw, shape = case
        ref = gguf.quants.dequantize(raw, T[tname])
        ours = ggml.dequantize(torch.from_numpy(raw), shape, tname)
        assert bits_equal(ours, ref)

    check()


@pytest.mark.parametrize("tname", BLOCK_TYPES)
def test_dequantize_random_bulk_bit_exact(tname):
    t = ggml.GGML_TYPES[tname]
    rng = np.random.default_rng(sum(map(ord, tname)))
    nb = 2048
    raw = rng.integers(0, 256, size=(nb, t.type_size), dtype=np.uint8)
    # mixture of normal-ish scales and arbitrary finite fp16 bit patterns
    bits = rng.integers(0, 0x7C00, size=(nb, len(SCALE_OFFSETS[tname])), dtype=np.uint16)
    bits |= (rng.integers(0, 2, size=bits.shape, dtype=np.uint16) << 15)
    set_scales(raw, tname, bits.view(np.float16))
    raw = raw.reshape(8, -1)
    ref = gguf.quants.dequantize(raw, T[tname])
    assert bits_equal(ggml.dequantize(torch.from_numpy(raw), ref.shape, tname), ref)


@pytest.mark.parametrize("tname", ["F16", "BF16"])
def test_dequantize_half_types_exhaustive(tname):
    raw = np.arange(65536, dtype=np.uint16).view(np.uint8).reshape(256, 512)
    ref = gguf.quants.dequantize(raw, T[tname])
    assert bits_equal(ggml.dequantize(torch.from_numpy(raw), (256, 256), tname), ref)


def test_dequantize_f32_passthrough():
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, size=(4, 64), dtype=np.uint8)
    ref = gguf.quants.dequantize(raw, T.F32)
    assert bits_equal(ggml.dequantize(torch.from_numpy(raw), (4, 16), "F32"), ref)


def test_smollm2_every_tensor_bit_exact(smollm2_reader):
    seen = set()
    for t in smollm2_reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape))
        ref = gguf.quants.dequantize(t.data, t.tensor_type)
        ours = ggml.dequantize(torch.from_numpy(np.array(t.data)), shape, t.tensor_type.name, name=t.name)
        assert ours.shape == ref.shape == shape, t.name
        assert bits_equal(ours, ref), t.name
        seen.add(t.tensor_type.name)
    assert {"Q4_1", "Q8_0", "F32"} <= seen


# ---- quantize ------------------------------------------------------------------------------------

def gguf_quantize_bytes(x: np.ndarray, tname: str) -> np.ndarray:
    out = gguf.quants.quantize(x, T[tname])
    return out.view(np.uint8).reshape(*x.shape[:-1], -1)


finite_f32 = st.floats(width=32, min_value=-(2.0**100), max_value=2.0**100, allow_nan=False, allow_subnormal=True)
special_f32 = st.sampled_from([0.0, -0.0, 1e-45, -1e-45, 1.1754944e-38, 65504.0, 65520.0, 1e6, -3.5, 0.5])


def same_but_zero_signs(ours: np.ndarray, ref: np.ndarray, tname: str) -> bool:
    """Q4_1 / Q5_1 blocks whose min / max is zero: gguf's d and m (FP16, bytes 0..3) take the sign numpy's SIMD
    min / max reduction happens to give that zero (it depends on the lane a -0.0 sits in: only the last one wins on
    numpy 2.4), ours +0. Both decode alike; True when every difference is such a field."""
    if tname not in ("Q4_1", "Q5_1"):
        return False
    size = GGML_QUANT_SIZES[T[tname]][1]
    o, r = ours.reshape(-1, size), ref.reshape(-1, size)
    dm_o, dm_r = o[:, :4].copy().view(np.float16), r[:, :4].copy().view(np.float16)
    same_bytes = (o[:, :4] == r[:, :4]).reshape(-1, 2, 2).all(-1)
    zeros = (dm_o == 0) & (dm_r == 0)  # +0 and -0 alike
    return np.array_equal(o[:, 4:], r[:, 4:]) and bool(np.all(same_bytes | zeros))


def test_zero_sign_tolerance_is_narrow():
    """The one difference test_quantize_hypothesis_bit_exact forgives (hypothesis found it, s32): an all-zero Q4_1
    block with a -0.0 in its last lane, where gguf writes m = -0.0; any other byte difference still fails."""
    x = np.zeros((1, 32), np.float32)
    x[0, 31] = -0.0
    ours, ref = ggml.quantize(torch.from_numpy(x), "Q4_1").numpy(), gguf_quantize_bytes(x, "Q4_1")
    assert not np.array_equal(ours, ref) and same_but_zero_signs(ours, ref, "Q4_1")  # m: +0 here, -0 in gguf
    bad = ref.copy()
    bad[0, 5] ^= 1  # a quant nibble
    assert not same_but_zero_signs(bad, ref, "Q4_1")
    bad = ref.copy()
    bad[0, 0] = 0x3C  # d = 1.0 against 0
    assert not same_but_zero_signs(bad, ref, "Q4_1") and not same_but_zero_signs(ours, ref, "Q4_0")


@pytest.mark.parametrize("tname", ["Q4_1", "Q5_1", "Q4_0", "Q5_0", "Q8_0"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_subnormal_scale_block_matches_gguf(tname, sign):
    """A block of zeros and one float32 subnormal (hypothesis found it, s35): Q4_1 / Q5_1's d = (max - min) / 15 (31)
    is subnormal too, 1 / d overflows to inf, and (x - min) / d is inf or nan; gguf (and ggml on x86) cast those to
    code 0, where a clamp would give the top code. The bytes equal gguf's, and the block decodes to zeros."""
    x = np.zeros((1, 32), np.float32)
    x[0, 31] = sign * 4.840084895777918e-42
    with np.errstate(all="ignore"):
        ref = gguf_quantize_bytes(x, tname)
    ours = ggml.quantize(torch.from_numpy(x), tname)
    assert np.array_equal(ours.numpy(), ref), (ours.tolist(), ref.tolist())
    assert not ggml.dequantize(ours.reshape(-1), (1, 32), tname).any()


@pytest.mark.parametrize("tname", QUANT_TYPES)
def test_quantize_hypothesis_bit_exact(tname):
    bs = ggml.GGML_TYPES[tname].block_size
    bs = 32 if bs == 1 else bs

    @SETTINGS
    @given(st.integers(1, 3).flatmap(lambda nb: st.lists(st.one_of(finite_f32, special_f32),
                                                          min_size=nb * bs, max_size=nb * bs)),
           st.sampled_from([1.0, 1e-6, 1e4]))
    def check(values, mult):
        x = (np.array(values, dtype=np.float32) * np.float32(mult)).reshape(1, -1)
        with np.errstate(all="ignore"):
            ref = gguf_quantize_bytes(x, tname)
        ours = ggml.quantize(torch.from_numpy(x), tname)
        assert ours.dtype == torch.uint8
        assert np.array_equal(ours.numpy(), ref) or same_but_zero_signs(ours.numpy(), ref, tname)

    check()


@pytest.mark.parametrize("tname", QUANT_TYPES)
def test_quantize_random_and_ties_bit_exact(tname):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((64, 256)) * 10.0 ** rng.uniform(-8, 6, size=(64, 1))).astype(np.float32)
    # blocks built on the quantization grid so that many elements sit exactly on rounding ties
    grid = rng.integers(-16, 17, size=(16, 256)).astype(np.float32) * np.float32(0.5)
    x = np.concatenate([x, grid, np.zeros((1, 256), np.float32)])
    with np.errstate(all="ignore"):
        ref = gguf_quantize_bytes(x, tname)
    assert np.array_equal(ggml.quantize(torch.from_numpy(x), tname).numpy(), ref)


def test_quantize_f16_bf16_nan_inf():
    bits = np.array([0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0xFFC01234, 0x7FA00000, 0x477FF000,
                     0x477FEFFF, 0x33000000, 0x33000001, 0x80000001], dtype=np.uint32)
    x = np.tile(bits.view(np.float32), 3)[:32].reshape(1, 32)
    for tname in ("F16", "BF16"):
        with np.errstate(all="ignore"):
            ref = gguf_quantize_bytes(x, tname)
        assert np.array_equal(ggml.quantize(torch.from_numpy(x), tname).numpy(), ref), tname


def test_quantize_real_weights_bit_exact(smollm2_reader):
    tensors = [t for t in smollm2_reader.tensors if t.name.startswith("blk.0.")]
    assert tensors
    for t in tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type)
        x = x.reshape(-1, x.shape[-1])[:64] * np.float32(1.37)  # first rows, moved off their old grid
        for tname in QUANT_TYPES:
            ref = gguf_quantize_bytes(x, tname)
            assert np.array_equal(ggml.quantize(torch.from_numpy(x), tname).numpy(), ref), (t.name, tname)


def test_quantize_dequantize_roundtrip_shapes():
    x = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(2))
    for tname in ("Q4_0", "Q8_0", "F16"):
        raw = ggml.quantize(x, tname)
        assert raw.shape == (3, 5, ggml.nbytes((64,), tname))
        y = ggml.dequantize(raw, x.shape, tname)
        assert y.shape == x.shape and float((y - x).abs().max()) < 0.5


# ---- bad input -----------------------------------------------------------------------------------

def test_error_wrong_byte_count():
    raw = torch.zeros(18 * 3 + 1, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"blk\.0\.attn_q\.weight.*Q4_0.*needs 54 bytes.*got 55"):
        ggml.dequantize(raw, (1, 96), "Q4_0", name="blk.0.attn_q.weight")


def test_error_row_not_multiple_of_block():
    with pytest.raises(ValueError, match=r"'w'.*Q4_K.*row length 100 is not a multiple of the block size 256"):
        ggml.dequantize(torch.zeros(144, dtype=torch.uint8), (1, 100), "Q4_K", name="w")
    with pytest.raises(ValueError, match=r"Q8_0.*row length 33"):
        ggml.quantize(torch.zeros(2, 33), "Q8_0")


def test_error_unknown_type():
    with pytest.raises(ValueError, match=r"'emb'.*unknown or unsupported GGML type 'Q9_9'"):
        ggml.dequantize(torch.zeros(4, dtype=torch.uint8), (1,), "Q9_9", name="emb")
    with pytest.raises(ValueError, match=r"unknown or unsupported GGML type 999"):
        ggml.dequantize(torch.zeros(4, dtype=torch.uint8), (1,), 999)


def test_error_no_quantizer_for_kquant():
    with pytest.raises(ValueError, match=r"Q4_K.*no reference quantizer"):
        ggml.quantize(torch.zeros(256), "Q4_K")
