"""FP4 E2M1 element codec with two block-scaled containers: NVFP4 (NVIDIA ModelOpt) and MXFP4 (OCP MX).

E2M1 code (4 bits) ``s ee m``, bias 1, no inf/NaN::

  code  0    1    2    3    4    5    6    7        (+8: same magnitude, negative; 8 is -0)
  value 0   0.5  1.0  1.5  2.0  3.0  4.0  6.0

Encoding rounds to nearest, ties to even *code* (0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2,
3.5->4, 5->4), the same rule as ModelOpt's ``_cast_fp4`` and CUDA's ``__nv_cvt_float_to_fp4``;
magnitudes beyond 6 (and +-inf) saturate to +-6. The sign is kept (-0.0 -> code 8). NaN cannot be
encoded: the quantizers raise ValueError on non-finite input.

Packing: two codes per byte, **low nibble first** -- element ``2i`` in bits 0-3 of byte ``i``, element
``2i+1`` in bits 4-7. This is the convention of ModelOpt's exported NVFP4 weights and of vLLM's
reference unpacker (``break_fp4_bytes`` in vLLM's nvfp4 utils stacks ``(low, high)`` per byte), and of
the OCP-MX checkpoints (gpt-oss ``*_blocks``/HF ``convert_moe_packed_tensors``: low nibble -> even).

NVFP4 (ModelOpt ``quant_algo: NVFP4``), for a weight ``[..., K]`` with ``K % 16 == 0``:

* ``weight``         uint8 ``[..., K/2]``  packed E2M1 codes;
* ``weight_scale``   E4M3FN ``[..., K/16]`` per-16-element block scale (uint8 codes or float8_e4m3fn);
* ``weight_scale_2`` float32 scalar, the global (per-tensor) scale, a *multiplier*:
  ``x = e2m1(code) * (e4m3(weight_scale) * weight_scale_2)``.
  (compressed-tensors NVFP4 stores the reciprocal as ``weight_global_scale`` and divides; pass
  ``1 / weight_global_scale``.)

  Quantizer (ModelOpt's): ``weight_scale_2 = amax / (6 * 448)`` (1 if amax is 0);
  ``s = block_amax / (6 * weight_scale_2)``, set to 1 where 0, encoded to E4M3FN (RNE, saturating);
  codes = ``e2m1(x / (e4m3(s) * weight_scale_2))``. A block whose scale underflows E4M3 to 0 is
  stored as zeros.

MXFP4 (OCP Microscaling spec v1.0, MXFP4 = E2M1 elements, E8M0 shared scale, k = 32):

* ``blocks`` uint8 ``[..., K/2]`` packed E2M1 codes; ``scales`` uint8 ``[..., K/32]`` E8M0.
* E8M0: ``2**(e - 127)`` for e in 0..254 (e = 0 is 2**-127), e = 255 is NaN (the whole block decodes
  to NaN). ``x = e2m1(code) * 2**(e - 127)``.
* Quantizer (spec section 6.3): shared exponent ``floor(log2(amax)) - 2`` (2 = E2M1's emax), clamped
  to [-127, 127]; an all-zero block gets e = 0. Elements ``x / 2**shared`` are encoded E2M1 with
  saturation (values up to just under 8 can occur and clip to 6).
"""

from __future__ import annotations

import torch

from . import fp8
from ._common import as_float32, where
from ._minifloat import bits_to_float32, decode_codes, encode_magnitude, float32_bits

__all__ = [
    "E2M1_VALUES", "e2m1_decode", "e2m1_encode", "pack_fp4", "unpack_fp4",
    "NVFP4_BLOCK", "nvfp4_quantize", "nvfp4_dequantize",
    "MXFP4_BLOCK", "e8m0_decode", "mxfp4_quantize", "mxfp4_dequantize",
]

NVFP4_BLOCK = 16
MXFP4_BLOCK = 32
E2M1_VALUES = decode_codes(torch.arange(16), 2, 1, 1, "none")  # float32[16], built from the bit layout


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    return E2M1_VALUES[codes.to(torch.int64) & 15]


def e2m1_encode(x: torch.Tensor, *, name: str | None = None) -> torch.Tensor:
    """float -> E2M1 codes (uint8 0..15): round to nearest even code, saturate at +-6."""
    x = as_float32(x, "e2m1", name)
    sign, mag, is_nan, is_inf = encode_magnitude(x, 2, 1, 1)
    if bool(is_nan.any()):
        raise ValueError(f"{where('e2m1', name)}: NaN has no E2M1 encoding")
    mag = torch.where((mag > 7) | is_inf, torch.full_like(mag, 7), mag)
    return ((sign << 3) | mag).to(torch.uint8)


def pack_fp4(codes: torch.Tensor, *, name: str | None = None) -> torch.Tensor:
    """[..., K] 4-bit codes -> [..., K/2] uint8, element 2i in the low nibble of byte i."""
    if codes.shape[-1] % 2:
        raise ValueError(f"{where('fp4', name)}: cannot pack an odd number ({codes.shape[-1]}) of FP4 values per row")
    c = codes.to(torch.int64) & 15
    return (c[..., 0::2] | (c[..., 1::2] << 4)).to(torch.uint8)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """[..., K/2] uint8 -> [..., K] int64 codes (inverse of :func:`pack_fp4`)."""
    p = packed.to(torch.int64)
    return torch.stack([p & 15, p >> 4], dim=-1).reshape(*p.shape[:-1], 2 * p.shape[-1])


def _packed_u8(t, fmt: str, what: str, name: str | None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{where(fmt, name)}: {what} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype == torch.int8:
        t = t.view(torch.uint8)
    if t.dtype != torch.uint8:
        raise ValueError(f"{where(fmt, name)}: {what} must be uint8 (two E2M1 codes per byte), got {t.dtype}")
    if t.dim() == 0:
        raise ValueError(f"{where(fmt, name)}: {what} must have at least one dimension")
    return t


def _check_scales(packed: torch.Tensor, scales: torch.Tensor, block: int, fmt: str, name: str | None):
    k = 2 * packed.shape[-1]
    if k % block:
        raise ValueError(f"{where(fmt, name)}: row length {k} is not a multiple of the block size {block}")
    want = (*packed.shape[:-1], k // block)
    if tuple(scales.shape) != want:
        raise ValueError(f"{where(fmt, name)}: scales have shape {tuple(scales.shape)}, expected {want} "
                         f"for packed data {tuple(packed.shape)} (one scale per {block} elements)")


def _blocks_of(x: torch.Tensor, block: int, fmt: str, name: str | None) -> torch.Tensor:
    if x.dim() == 0 or x.shape[-1] % block:
        raise ValueError(f"{where(fmt, name)}: row length {x.shape[-1] if x.dim() else 0} is not a multiple "
                         f"of the block size {block}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{where(fmt, name)}: cannot quantize a tensor containing inf/NaN")
    return x.reshape(*x.shape[:-1], x.shape[-1] // block, block)


# ---- NVFP4 ---------------------------------------------------------------------------------------

def nvfp4_quantize(x, *, global_scale=None, block_scale=None, name: str | None = None):
    """float ``[..., K]`` -> ``(weight uint8 [..., K/2], weight_scale uint8 E4M3 [..., K/16],
    weight_scale_2 float32 [])``.

    ``global_scale`` / ``block_scale`` may be given to encode onto an existing grid.
    """
    x = as_float32(x, "nvfp4", name)
    xb = _blocks_of(x, NVFP4_BLOCK, "nvfp4", name)
    if global_scale is None:
        amax = x.abs().amax() if x.numel() else torch.zeros(())
        gs = amax / (6.0 * 448.0)
        gs = torch.where(gs > 0, gs, torch.ones_like(gs))
    else:
        gs = torch.as_tensor(global_scale, dtype=torch.float32).reshape(())
    if block_scale is None:
        s = xb.abs().amax(dim=-1) / (6.0 * gs)
        s = torch.where(s == 0, torch.ones_like(s), s)
        sf = fp8.encode(s, fp8.E4M3FN, saturate=True)
    else:
        sf = fp8._codes_u8(block_scale, fp8.E4M3FN, name)
        if tuple(sf.shape) != tuple(xb.shape[:-1]):
            raise ValueError(f"{where('nvfp4', name)}: block_scale shape {tuple(sf.shape)} != {tuple(xb.shape[:-1])}")
    div = (fp8.decode(sf, fp8.E4M3FN) * gs).unsqueeze(-1)
    scaled = torch.where(div == 0, torch.zeros_like(xb), xb / div)
    codes = e2m1_encode(scaled).reshape(x.shape)
    return pack_fp4(codes), sf, gs


def nvfp4_dequantize(weight, weight_scale, weight_scale_2, *, name: str | None = None) -> torch.Tensor:
    """``e2m1(code) * (e4m3(weight_scale) * weight_scale_2)`` -> float32 ``[..., K]``."""
    packed = _packed_u8(weight, "nvfp4", "weight", name)
    sf = fp8._codes_u8(weight_scale, fp8.E4M3FN, name)
    _check_scales(packed, sf, NVFP4_BLOCK, "nvfp4", name)
    gs = torch.as_tensor(weight_scale_2, dtype=torch.float32)
    if gs.numel() != 1:
        raise ValueError(f"{where('nvfp4', name)}: weight_scale_2 must be a single float32, got shape {tuple(gs.shape)}")
    mult = fp8.decode(sf, fp8.E4M3FN) * gs.reshape(())
    vals = e2m1_decode(unpack_fp4(packed))
    vals = vals.reshape(*vals.shape[:-1], -1, NVFP4_BLOCK) * mult.unsqueeze(-1)
    return vals.reshape(*packed.shape[:-1], 2 * packed.shape[-1])


# ---- MXFP4 ---------------------------------------------------------------------------------------

def e8m0_decode(codes: torch.Tensor) -> torch.Tensor:
    """E8M0 (uint8) -> float32: 2**(e-127), e=0 -> 2**-127 (float32 subnormal), e=255 -> NaN."""
    e = codes.to(torch.int64)
    bits = torch.where(e == 0, torch.full_like(e, 0x00400000), e << 23)
    bits = torch.where(e == 255, torch.full_like(e, 0x7FC00000), bits)
    return bits_to_float32(bits)


def mxfp4_quantize(x, *, scales=None, name: str | None = None):
    """float ``[..., K]`` -> ``(blocks uint8 [..., K/2], scales uint8 E8M0 [..., K/32])``."""
    x = as_float32(x, "mxfp4", name)
    xb = _blocks_of(x, MXFP4_BLOCK, "mxfp4", name)
    if scales is None:
        amax = xb.abs().amax(dim=-1)
        # floor(log2(amax)) = exponent field - 127 for a normal amax; a zero/subnormal amax (field 0)
        # falls below the clamp and gets the smallest scale, 2**-127 (code 0)
        efield = (float32_bits(amax) >> 23) & 0xFF
        e = torch.clamp(efield - 127 - 2, -127, 127) + 127
    else:
        e = _packed_u8(scales, "mxfp4", "scales", name).to(torch.int64)
        if tuple(e.shape) != tuple(xb.shape[:-1]):
            raise ValueError(f"{where('mxfp4', name)}: scales shape {tuple(e.shape)} != {tuple(xb.shape[:-1])}")
    codes = e2m1_encode(xb / e8m0_decode(e).unsqueeze(-1)).reshape(x.shape)
    return pack_fp4(codes), e.to(torch.uint8)


def mxfp4_dequantize(blocks, scales, *, name: str | None = None) -> torch.Tensor:
    """``e2m1(code) * 2**(scale - 127)`` -> float32 ``[..., K]``."""
    packed = _packed_u8(blocks, "mxfp4", "blocks", name)
    sc = _packed_u8(scales, "mxfp4", "scales", name)
    _check_scales(packed, sc, MXFP4_BLOCK, "mxfp4", name)
    vals = e2m1_decode(unpack_fp4(packed))
    vals = vals.reshape(*vals.shape[:-1], -1, MXFP4_BLOCK) * e8m0_decode(sc).unsqueeze(-1)
    return vals.reshape(*packed.shape[:-1], 2 * packed.shape[-1])
