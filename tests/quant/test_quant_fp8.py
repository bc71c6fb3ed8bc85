"""FP8 E4M3FN / E5M2 software codec vs torch's float8 dtypes, plus the scaled-tensor layer."""

import math
import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from onecat.quant import fp8

FORMATS = [(fp8.E4M3FN, torch.float8_e4m3fn), (fp8.E5M2, torch.float8_e5m2)]
ALL_CODES = torch.arange(256, dtype=torch.uint8)


def f32_bits(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float32).view(torch.int32)


def spec_value(code: int, e_bits: int, m_bits: int, bias: int, fn: bool) -> float:
    """Slow scalar decode straight from the OCP FP8 definition."""
    s = -1.0 if code >> 7 else 1.0
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    m = code & ((1 << m_bits) - 1)
    top = (1 << e_bits) - 1
    if fn and e == top and m == (1 << m_bits) - 1:
        return math.nan
    if not fn and e == top:
        return s * math.inf if m == 0 else math.nan
    if e == 0:
        return s * m / (1 << m_bits) * 2.0 ** (1 - bias)
    return s * (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)


# ---- decode ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,dtype", FORMATS, ids=["e4m3fn", "e5m2"])
def test_decode_all_256_codes_vs_torch(spec, dtype):
    ref = ALL_CODES.view(dtype).float()
    ours = fp8.decode(ALL_CODES, spec)
    nan = torch.isnan(ref)
    assert torch.equal(torch.isnan(ours), nan)
    assert torch.equal(f32_bits(ours[~nan]), f32_bits(ref[~nan]))       # incl. the sign of -0
    assert torch.equal(fp8.decode(ALL_CODES.view(dtype), spec).view(torch.int32)[~nan],
                       ours.view(torch.int32)[~nan])                        # float8 input = same bytes
    slow = [spec_value(c, spec.exp_bits, spec.man_bits, spec.bias, spec.special == "fn") for c in range(256)]
    for c, v in enumerate(slow):
        got = float(ours[c])
        assert (math.isnan(v) and math.isnan(got)) or (v == got and math.copysign(1, v) == math.copysign(1, got)), c


def test_decode_known_answers():
    e4 = fp8.decode(torch.tensor([0x00, 0x01, 0x07, 0x08, 0x38, 0x7E, 0x80, 0xFE], dtype=torch.uint8), "e4m3fn")
    assert e4.tolist() == [0.0, 2.0**-9, 7 * 2.0**-9, 2.0**-6, 1.0, 448.0, -0.0, -448.0]
    assert math.isnan(fp8.decode(torch.tensor([0x7F], dtype=torch.uint8), "e4m3fn").item())
    e5 = fp8.decode(torch.tensor([0x01, 0x04, 0x3C, 0x7B, 0x7C, 0xFC], dtype=torch.uint8), "e5m2")
    assert e5.tolist() == [2.0**-16, 2.0**-14, 1.0, 57344.0, math.inf, -math.inf]
    assert all(math.isnan(v) for v in fp8.decode(torch.tensor([0x7D, 0x7E, 0xFF], dtype=torch.uint8), "e5m2").tolist())


# ---- encode ----------------------------------------------------------------------------------------

def edge_values(spec) -> torch.Tensor:
    """Every finite code's value, every midpoint between neighbours (exact ties) and the floats
    adjacent to those midpoints, plus the overflow region, inf and NaN."""
    vals = fp8.decode(ALL_CODES, spec)
    pos = torch.sort(vals[torch.isfinite(vals) & (vals >= 0)]).values.double()
    mids = ((pos[1:] + pos[:-1]) / 2).float()
    up = torch.nextafter(mids, torch.tensor(math.inf))
    down = torch.nextafter(mids, torch.tensor(-math.inf))
    mx = spec.max_finite
    over = torch.tensor([mx, mx * 1.03, mx * 1.0625, mx * 1.0625 + 1, mx * 1.07, mx * 1.125, mx * 1.2, mx * 2,
                         1e30, 3.4e38, math.inf, math.nan, 1e-45, 2.0**-126, 2.0**-20])
    both = torch.cat([pos.float(), mids, up, down, over])
    return torch.cat([both, -both])


@pytest.mark.parametrize("spec,dtype", FORMATS, ids=["e4m3fn", "e5m2"])
def test_encode_matches_torch_cast(spec, dtype):
    g = torch.Generator().manual_seed(1234)
    random_bits = torch.randint(-(2**31), 2**31, (400_000,), dtype=torch.int64, generator=g).to(torch.int32)
    scaled = torch.randn(200_000, generator=g) * 10 ** torch.empty(200_000).uniform_(-12, 6, generator=g)
    x = torch.cat([random_bits.view(torch.float32), scaled, edge_values(spec)])
    ref = x.to(dtype).view(torch.uint8)
    ours = fp8.encode(x, spec)
    bad = ref != ours
    assert not bool(bad.any()), (x[bad][:8], ref[bad][:8], ours[bad][:8])


@pytest.mark.parametrize("spec,dtype", FORMATS, ids=["e4m3fn", "e5m2"])
def test_encode_hypothesis_vs_torch(spec, dtype):
    @settings(deadline=None, max_examples=200)
    @given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=64))
    def check(vals):
        x = torch.tensor(vals, dtype=torch.float32)
        assert torch.equal(fp8.encode(x, spec), x.to(dtype).view(torch.uint8))

    check()


@pytest.mark.parametrize("spec", [fp8.E4M3FN, fp8.E5M2], ids=["e4m3fn", "e5m2"])
def test_encode_decode_roundtrip_every_code(spec):
    vals = fp8.decode(ALL_CODES, spec)
    keep = ~torch.isnan(vals)
    assert torch.equal(fp8.encode(vals[keep], spec), ALL_CODES[keep])


def test_encode_ties_round_to_even():
    # e4m3fn around 1.0: spacing 1/8 -> 1.0625 ties to 1.0 (m=0), 1.1875 ties to 1.25 (m=2)
    x = torch.tensor([1.0625, 1.1875, -1.0625, 2.0**-10, 3 * 2.0**-10, 0.0, -0.0])
    assert fp8.encode(x, "e4m3fn").tolist() == [0x38, 0x3A, 0xB8, 0x00, 0x02, 0x00, 0x80]
    # e5m2 around 1.0: spacing 1/4 -> 1.125 ties to 1.0, 1.375 ties to 1.5
    assert fp8.encode(torch.tensor([1.125, 1.375]), "e5m2").tolist() == [0x3C, 0x3E]


def test_saturation_and_specials_e4m3fn():
    big = torch.tensor([448.0, 464.0, 464.01, 479.0, 480.0, 1e30, math.inf])
    assert fp8.encode(big, "e4m3fn").tolist() == [0x7E] * 7                         # saturate (default)
    assert fp8.encode(-big, "e4m3fn").tolist() == [0xFE] * 7
    assert fp8.encode(big, "e4m3fn", saturate=False).tolist() == [0x7E, 0x7E] + [0x7F] * 5   # -> NaN
    nan_neg = struct.unpack("<f", struct.pack("<I", 0xFFC00000))[0]
    assert fp8.encode(torch.tensor([math.nan, nan_neg]), "e4m3fn").tolist() == [0x7F, 0xFF]
    assert fp8.encode(torch.tensor([math.nan]), "e4m3fn", saturate=False).tolist() == [0x7F]


def test_saturation_and_specials_e5m2():
    big = torch.tensor([57344.0, 61439.0, 61440.0, 1e9, math.inf])
    assert fp8.encode(big, "e5m2").tolist() == [0x7B, 0x7B, 0x7C, 0x7C, 0x7C]           # IEEE: -> inf
    assert fp8.encode(-big, "e5m2").tolist() == [0xFB, 0xFB, 0xFC, 0xFC, 0xFC]
    assert fp8.encode(big, "e5m2", saturate=True).tolist() == [0x7B] * 5               # satfinite
    assert fp8.encode(torch.tensor([math.nan]), "e5m2", saturate=True).tolist() == [0x7F]


# ---- scaled tensors ------------------------------------------------------------------------------

def err_bound(x: torch.Tensor, scale: torch.Tensor, spec) -> torch.Tensor:
    """Half an ulp at |x|'s binade (normal range) or of the subnormal step, in x's units."""
    half_rel = 2.0 ** -(spec.man_bits + 1)
    sub_step = 2.0 ** (1 - spec.bias - spec.man_bits)
    return torch.maximum(x.abs() * half_rel, scale * sub_step / 2) * (1 + 1e-6) + 1e-30


@pytest.mark.parametrize("spec", [fp8.E4M3FN, fp8.E5M2], ids=["e4m3fn", "e5m2"])
@pytest.mark.parametrize("granularity,shape", [("tensor", (37, 50)), ("channel", (37, 50)), ("block", (200, 300)),
                                               ("block", (128, 256))])
def test_quantize_dequantize_error_bound(spec, granularity, shape):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(shape, generator=g) * torch.logspace(-3, 3, shape[0]).unsqueeze(1)
    codes, scale = fp8.quantize(x, spec, granularity=granularity, block_size=(128, 128))
    assert codes.dtype == torch.uint8 and codes.shape == x.shape
    want_scale = {"tensor": (), "channel": (shape[0], 1),
                  "block": (math.ceil(shape[0] / 128), math.ceil(shape[1] / 128))}[granularity]
    assert tuple(scale.shape) == want_scale
    blk = (128, 128) if granularity == "block" else None
    y = fp8.dequantize(codes, scale, spec, block_size=blk)
    full = fp8._expand_scale(scale, x.shape, blk, "t")
    assert bool((y - x).abs().le(err_bound(x, full, spec)).all())
    assert not bool(torch.isnan(y).any()) and bool(torch.isfinite(y).all())
    # encoding the dequantized tensor on the same grid gives back the same codes
    codes2, _ = fp8.quantize(y, spec, granularity=granularity, block_size=(128, 128), scale=scale)
    assert torch.equal(codes2, codes)


def test_quantize_amax_maps_to_max_code_and_zero_tensor():
    x = torch.tensor([[1.0, -3.0, 0.5], [0.0, 0.0, 0.0]])
    codes, scale = fp8.quantize(x, "e4m3fn", granularity="channel")
    assert codes[0, 1].item() == 0xFE and scale[1].item() == 1.0 and codes[1].tolist() == [0, 0, 0]
    assert scale[0].item() == pytest.approx(3.0 / 448)


def test_dequantize_known_answer_block_scale():
    codes = torch.full((3, 5), 0x38, dtype=torch.uint8)           # all 1.0
    scale = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])      # 2x2 tiles -> 2 x 3 scales
    y = fp8.dequantize(codes, scale, "e4m3fn", block_size=(2, 2))
    assert y.tolist() == [[1, 1, 2, 2, 3], [1, 1, 2, 2, 3], [4, 4, 5, 5, 6]]


def test_fp8_errors():
    with pytest.raises(ValueError, match="unknown FP8 format 'e3m4'"):
        fp8.decode(ALL_CODES, "e3m4")
    with pytest.raises(ValueError, match=r"'w' \(fp8_e4m3fn\).*block scale of shape \(1, 1\).*expected \(2, 1\)"):
        fp8.dequantize(torch.zeros(200, 100, dtype=torch.uint8), torch.ones(1, 1), block_size=(128, 128), name="w")
    with pytest.raises(ValueError, match=r"neither per-tensor, per-channel"):
        fp8.dequantize(torch.zeros(4, 8, dtype=torch.uint8), torch.ones(3))
    with pytest.raises(ValueError, match=r"inf/NaN"):
        fp8.quantize(torch.tensor([1.0, math.inf]))
    with pytest.raises(ValueError, match=r"unknown granularity 'row'"):
        fp8.quantize(torch.ones(4, 4), granularity="row")
    with pytest.raises(ValueError, match=r"float8_e5m2 tensor for format e4m3fn"):
        fp8.decode(torch.zeros(4, dtype=torch.float8_e5m2), "e4m3fn")
