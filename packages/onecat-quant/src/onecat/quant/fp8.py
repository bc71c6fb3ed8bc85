"""FP8 E4M3FN and E5M2 (OCP 8-bit floating point spec, the formats of torch.float8_e4m3fn/e5m2),
encoded and decoded in software -- integer bit manipulation, never torch's float8 casts.

Bit layout of a code byte ``s eeee mmm`` (E4M3FN) / ``s eeeee mm`` (E5M2)::

              bias  subnormal (e=0)        normal                 all-ones exponent
  E4M3FN        7   m/8 * 2**-6            (1+m/8) * 2**(e-7)     e=15: normal, except m=7 -> NaN
  E5M2         15   m/4 * 2**-14           (1+m/4) * 2**(e-15)    e=31: m=0 -> inf, m!=0 -> NaN
  max finite        E4M3FN 448 (0x7E),  E5M2 57344 (0x7B);  min subnormal 2**-9 / 2**-16

Decoding is exact (every code is a float32). ``-0`` decodes to -0.0; NaN codes decode to NaN
(E4M3FN: 0x7F/0xFF; E5M2: 0x7D-0x7F / 0xFD-0xFF, payload kept).

Encoding (``encode``) rounds float32 to nearest, ties to even, subnormals included. Special values:

* NaN -> ``0x7F | sign`` (both formats; the code torch also produces).
* E4M3FN (no infinities), ``saturate=True`` (default): finite values whose rounded magnitude exceeds
  448 -- i.e. ``|x| > 464`` (464 itself ties to 448) -- and +-inf become +-448 (``0x7E | sign``).
  ``saturate=False`` (OCP non-saturating mode): they become NaN (``0x7F | sign``).
* E5M2, ``saturate=False`` (default, IEEE behaviour): rounded magnitude above 57344
  (``|x| >= 61440``) and +-inf become +-inf (``0x7C | sign``). ``saturate=True`` (CUDA
  ``__NV_SATFINITE``): they become +-57344 (``0x7B | sign``) instead.

With the defaults, ``encode`` equals torch's ``x.to(torch.float8_e4m3fn / float8_e5m2)`` bit for bit
for every float32 (checked against torch 2.13, whose E4M3FN cast saturates and whose E5M2 cast
overflows to inf).

Scaled tensors (``quantize``/``dequantize``): ``x ~= decode(codes) * scale`` with a float32 scale
that is the *dequantization multiplier* (vLLM/compressed-tensors ``weight_scale``, ModelOpt FP8
``weight_scale``, DeepSeek-V3 ``weight_scale_inv`` -- which, despite its name, is also multiplied).
Granularities:

* ``"tensor"``: one scale, shape ``[]``;
* ``"channel"``: one scale per row (output channel) over the last dim, shape ``[..., rows, 1]``;
* ``"block"``: 2-D tiles of ``block_size=(bn, bk)`` (default 128x128) over the last two dims, shape
  ``[..., ceil(rows/bn), ceil(cols/bk)]``; edge tiles may be partial.

The quantizer picks ``scale = amax / max_finite`` per scale group (1.0 for an all-zero group) and
encodes ``x / scale`` (float32 division) with saturation, so no element overflows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ._common import as_float32, where
from ._minifloat import decode_codes, encode_magnitude

__all__ = ["FP8Format", "E4M3FN", "E5M2", "fp8_format", "decode", "encode", "quantize", "dequantize",
           "decode_table"]


@dataclass(frozen=True)
class FP8Format:
    name: str
    exp_bits: int
    man_bits: int
    bias: int
    max_finite: float
    max_code: int          # largest finite magnitude code
    special: str           # "fn" (NaN only at all-ones) or "ieee" (inf + NaNs)
    default_saturate: bool
    torch_dtype_name: str


E4M3FN = FP8Format("e4m3fn", 4, 3, 7, 448.0, 0x7E, "fn", True, "float8_e4m3fn")
E5M2 = FP8Format("e5m2", 5, 2, 15, 57344.0, 0x7B, "ieee", False, "float8_e5m2")
_FORMATS = {"e4m3fn": E4M3FN, "e4m3": E4M3FN, "float8_e4m3fn": E4M3FN, "e5m2": E5M2, "float8_e5m2": E5M2}


def fp8_format(fmt) -> FP8Format:
    if isinstance(fmt, FP8Format):
        return fmt
    if isinstance(fmt, torch.dtype):
        fmt = str(fmt).removeprefix("torch.")
    if isinstance(fmt, str) and fmt.lower() in _FORMATS:
        return _FORMATS[fmt.lower()]
    raise ValueError(f"unknown FP8 format {fmt!r}; expected one of {sorted(set(_FORMATS))}")


_TABLES: dict[str, torch.Tensor] = {}


def decode_table(fmt) -> torch.Tensor:
    """float32[256]: the value of every code, built by bit manipulation (see module docstring)."""
    f = fp8_format(fmt)
    if f.name not in _TABLES:
        _TABLES[f.name] = decode_codes(torch.arange(256), f.exp_bits, f.man_bits, f.bias, f.special)
    return _TABLES[f.name]


def _codes_u8(codes, f: FP8Format, name: str | None) -> torch.Tensor:
    if not isinstance(codes, torch.Tensor):
        raise ValueError(f"{where('fp8_' + f.name, name)}: expected a torch.Tensor, got {type(codes).__name__}")
    if codes.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.int8):
        if codes.dtype.is_floating_point and str(codes.dtype) != "torch." + f.torch_dtype_name:
            raise ValueError(f"{where('fp8_' + f.name, name)}: got a {codes.dtype} tensor for format {f.name}")
        return codes.view(torch.uint8)
    if codes.dtype != torch.uint8:
        raise ValueError(f"{where('fp8_' + f.name, name)}: FP8 codes must be uint8 or float8, got {codes.dtype}")
    return codes


def decode(codes, fmt="e4m3fn", *, name: str | None = None) -> torch.Tensor:
    """FP8 codes (uint8, or a float8 tensor whose bytes are reinterpreted) -> float32."""
    f = fp8_format(fmt)
    return decode_table(f)[_codes_u8(codes, f, name).to(torch.int64)]


def encode(x, fmt="e4m3fn", *, saturate: bool | None = None, name: str | None = None) -> torch.Tensor:
    """float tensor -> FP8 codes (uint8), round to nearest even; see module docstring for specials."""
    f = fp8_format(fmt)
    sat = f.default_saturate if saturate is None else bool(saturate)
    x = as_float32(x, "fp8_" + f.name, name)
    sign, mag, is_nan, is_inf = encode_magnitude(x, f.exp_bits, f.man_bits, f.bias)
    over = (mag > f.max_code) | is_inf
    if sat:
        over_code = f.max_code
    else:
        over_code = 0x7F if f.special == "fn" else 0x7C
    mag = torch.where(over, torch.full_like(mag, over_code), mag)
    mag = torch.where(is_nan, torch.full_like(mag, 0x7F), mag)
    return ((sign << 7) | mag).to(torch.uint8)


# ---- scaled tensors ----------------------------------------------------------------------------

def _group_amax(x: torch.Tensor, granularity: str, block_size, label: str) -> torch.Tensor:
    a = x.abs()
    if granularity == "tensor":
        return a.amax() if a.numel() else torch.zeros(())
    if granularity == "channel":
        if x.dim() < 1:
            raise ValueError(f"{label}: per-channel scaling needs at least a 1-D tensor")
        return a.amax(dim=-1, keepdim=True)
    if granularity == "block":
        if x.dim() < 2:
            raise ValueError(f"{label}: block scaling needs at least a 2-D tensor, got shape {tuple(x.shape)}")
        bn, bk = _block(block_size, label)
        rows, cols = x.shape[-2:]
        gr, gc = -(-rows // bn), -(-cols // bk)
        a = torch.nn.functional.pad(a, (0, gc * bk - cols, 0, gr * bn - rows))
        a = a.reshape(*x.shape[:-2], gr, bn, gc, bk)
        return a.amax(dim=(-3, -1))
    raise ValueError(f"{label}: unknown granularity {granularity!r}; expected 'tensor', 'channel' or 'block'")


def _block(block_size, label: str) -> tuple[int, int]:
    try:
        bn, bk = (int(v) for v in block_size)
    except (TypeError, ValueError):
        raise ValueError(f"{label}: block_size must be a pair (rows, cols), got {block_size!r}") from None
    if bn <= 0 or bk <= 0:
        raise ValueError(f"{label}: block_size must be positive, got {block_size!r}")
    return bn, bk


def _expand_scale(scale: torch.Tensor, shape: Sequence[int], block_size, label: str) -> torch.Tensor:
    """Broadcast a tensor / channel / block scale to ``shape``."""
    scale = scale.to(torch.float32)
    shape = tuple(shape)
    if block_size is not None:
        if len(shape) < 2:
            raise ValueError(f"{label}: block scales need at least 2-D codes, got shape {shape}")
        bn, bk = _block(block_size, label)
        rows, cols = shape[-2:]
        want = (*shape[:-2], -(-rows // bn), -(-cols // bk))
        if tuple(scale.shape) != want:
            raise ValueError(f"{label}: block scale of shape {tuple(scale.shape)} does not match codes {shape} "
                             f"with block_size {(bn, bk)} (expected {want})")
        full = scale.repeat_interleave(bn, dim=-2).repeat_interleave(bk, dim=-1)
        return full[..., :rows, :cols]
    if scale.numel() == 1:
        return scale.reshape(())
    if len(shape) >= 1 and tuple(scale.shape) in ((*shape[:-1], 1), tuple(shape[:-1])):
        return scale.reshape(*shape[:-1], 1)
    raise ValueError(f"{label}: scale of shape {tuple(scale.shape)} is neither per-tensor, per-channel "
                     f"({(*shape[:-1], 1)}) nor block-wise (pass block_size) for codes of shape {shape}")


def quantize(x, fmt="e4m3fn", *, granularity: str = "tensor", block_size=(128, 128), scale=None,
             name: str | None = None):
    """float tensor -> ``(codes uint8, scale float32)`` with ``x ~= decode(codes) * scale``.

    ``scale`` may be given (any granularity dequantize accepts) to encode onto an existing grid.
    Always saturating, so no code is inf/NaN for finite input.
    """
    f = fp8_format(fmt)
    label = where("fp8_" + f.name, name)
    x = as_float32(x, "fp8_" + f.name, name)
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{label}: cannot pick a scale for a tensor containing inf/NaN")
    if granularity not in ("tensor", "channel", "block"):
        raise ValueError(f"{label}: unknown granularity {granularity!r}; expected 'tensor', 'channel' or 'block'")
    if scale is None:
        amax = _group_amax(x, granularity, block_size, label)
        scale = torch.where(amax > 0, amax / f.max_finite, torch.ones_like(amax))
    else:
        scale = torch.as_tensor(scale, dtype=torch.float32)
    full = _expand_scale(scale, x.shape, block_size if granularity == "block" else None, label)
    return encode(x / full, f, saturate=True), scale


def dequantize(codes, scale, fmt="e4m3fn", *, block_size=None, name: str | None = None) -> torch.Tensor:
    """``decode(codes) * scale`` with scale per-tensor, per-channel, or block-wise (give block_size)."""
    f = fp8_format(fmt)
    label = where("fp8_" + f.name, name)
    codes = _codes_u8(codes, f, name)
    scale = torch.as_tensor(scale)
    return decode(codes, f) * _expand_scale(scale, codes.shape, block_size, label)
