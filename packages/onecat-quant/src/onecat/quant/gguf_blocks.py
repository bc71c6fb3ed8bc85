"""GGUF/ggml float types and "legacy" 32-element block types, in vectorized torch.

Every function works on a ``[n_blocks, type_size]`` uint8 tensor (see :mod:`onecat.quant.ggml` for
the public ``dequantize(raw, shape, "Q4_0")`` entry point) and returns ``[n_blocks, block_size]``
float32. All multi-byte fields are little-endian; ``d``/``m`` are IEEE fp16 (decoded in software).

Bit layouts (block of 32 weights x[0..31]; "nibble j" of byte b is ``b & 0xF`` for j < 16 and
``b >> 4`` for the element 16 positions later)::

  F32   4 B/elt: IEEE float32                      block 1
  F16   2 B/elt: IEEE half                         block 1
  BF16  2 B/elt: upper 16 bits of a float32        block 1
  Q4_0  18 B: d:f16 | qs[16]                       x[j] = d * (q[j] - 8),     q 4-bit
  Q4_1  20 B: d:f16 | m:f16 | qs[16]               x[j] = d * q[j] + m,       q 4-bit
  Q5_0  22 B: d:f16 | qh:u32 | qs[16]              x[j] = d * (q[j] - 16),    q 5-bit
  Q5_1  24 B: d:f16 | m:f16 | qh:u32 | qs[16]      x[j] = d * q[j] + m,       q 5-bit
  Q8_0  34 B: d:f16 | qs[32] int8                  x[j] = d * qs[j]

For the 4/5-bit types, ``qs[j]`` holds element j in its low nibble and element j+16 in its high nibble;
for the 5-bit types bit j of ``qh`` is bit 4 of element j.

Quantizers are the ggml reference ones (``quantize_row_*_ref`` in ggml-quants.c, and gguf-py's
numpy port ``gguf.quants``), reproduced operation by operation in float32 so the bytes are identical:

* Q4_0/Q5_0: ``max`` = the element of largest magnitude (first one on ties), ``d = max / -8`` (-16),
  ``q = min(15 (31), trunc(x / d + 8.5 (16.5)))`` using the float32 ``1/d``.
* Q4_1/Q5_1: ``d = (max - min) / 15`` (31), ``q = min(15 (31), trunc((x - min) / d + 0.5))``, ``m = min``.
* Q8_0: ``d = amax / 127``, ``q = round-half-away-from-zero(x / d)``.
* F16: round to nearest even, overflow to inf; BF16: round to nearest even, NaN made quiet.
"""

from __future__ import annotations

import torch

from ._common import (
    f16_at,
    float32_to_bf16_bits,
    float32_to_f16_bits,
    u16_at,
)
from ._minifloat import float32_bits

__all__ = ["DEQUANTIZERS", "QUANTIZERS"]


def _bytes_of(v: torch.Tensor, nbytes: int) -> torch.Tensor:
    """int64 [n, k] -> its little-endian bytes as uint8 [n, k*nbytes]."""
    shifts = torch.arange(0, 8 * nbytes, 8, dtype=torch.int64)
    return ((v.unsqueeze(-1) >> shifts) & 0xFF).reshape(v.shape[0], -1).to(torch.uint8)


def _f16_bytes(x: torch.Tensor) -> torch.Tensor:
    return _bytes_of(float32_to_f16_bits(x), 2)


_U8_0_4 = torch.tensor([0, 4], dtype=torch.uint8)
_U8_BITS = torch.arange(8, dtype=torch.uint8)


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    """[n, 16] bytes -> [n, 32] uint8: low nibbles are elements 0..15, high nibbles 16..31."""
    return torch.cat([qs & 15, qs >> 4], dim=-1)


def _qh_bits(qh: torch.Tensor) -> torch.Tensor:
    """[n, 4] bytes of a little-endian uint32 -> [n, 32] uint8 bits, bit j -> column j."""
    return ((qh.unsqueeze(-1) >> _U8_BITS) & 1).reshape(qh.shape[0], 32)


# ---- floats -----------------------------------------------------------------------------------------

def dequant_f32(blocks: torch.Tensor) -> torch.Tensor:
    return blocks.contiguous().view(torch.float32)          # reinterpretation: exact bits


def dequant_f16(blocks: torch.Tensor) -> torch.Tensor:
    return f16_at(blocks, 0)


def dequant_bf16(blocks: torch.Tensor) -> torch.Tensor:
    return (blocks.contiguous().view(torch.int16).to(torch.int32) << 16).view(torch.float32)


def quant_f32(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.uint8).reshape(x.shape[0], -1)


def quant_f16(x: torch.Tensor) -> torch.Tensor:
    return _f16_bytes(x)


def quant_bf16(x: torch.Tensor) -> torch.Tensor:
    return _bytes_of(float32_to_bf16_bits(x), 2)


# ---- legacy blocks: dequantize --------------------------------------------------------------------

def dequant_q4_0(blocks: torch.Tensor) -> torch.Tensor:
    d = f16_at(blocks, 0)
    q = _nibbles(blocks[:, 2:18]).to(torch.float32) - 8   # small integers: exact in float32
    return d * q


def dequant_q4_1(blocks: torch.Tensor) -> torch.Tensor:
    d = f16_at(blocks, 0)
    m = f16_at(blocks, 2)
    q = _nibbles(blocks[:, 4:20]).to(torch.float32)
    return d * q + m


def dequant_q5_0(blocks: torch.Tensor) -> torch.Tensor:
    d = f16_at(blocks, 0)
    q = _nibbles(blocks[:, 6:22]) | (_qh_bits(blocks[:, 2:6]) << 4)
    return d * (q.to(torch.float32) - 16)


def dequant_q5_1(blocks: torch.Tensor) -> torch.Tensor:
    d = f16_at(blocks, 0)
    m = f16_at(blocks, 2)
    q = _nibbles(blocks[:, 8:24]) | (_qh_bits(blocks[:, 4:8]) << 4)
    return d * q.to(torch.float32) + m


def dequant_q8_0(blocks: torch.Tensor) -> torch.Tensor:
    d = f16_at(blocks, 0)
    q = blocks[:, 2:34].view(torch.int8).to(torch.float32)
    return q * d


# ---- legacy blocks: quantize (bit-exact with ggml's reference / gguf-py) ---------------------------

def _inv(d: torch.Tensor) -> torch.Tensor:
    return torch.where(d == 0, torch.zeros_like(d), 1.0 / d)


def _signed_absmax(x: torch.Tensor) -> torch.Tensor:
    """The element of largest |x| per row (first one on ties), keeping its sign. [n, 1]"""
    return x.gather(-1, x.abs().argmax(dim=-1, keepdim=True))


def _pack_nibbles(q: torch.Tensor) -> torch.Tensor:
    """[n, 32] uint8 codes -> [n, 16] uint8 (element j low nibble, element j+16 high nibble)."""
    return (q[:, :16] & 15) | ((q[:, 16:] & 15) << 4)


_BIT_WEIGHTS = (1 << torch.arange(8, dtype=torch.uint8))


def _pack_qh(q: torch.Tensor) -> torch.Tensor:
    """Bit 4 of each of the 32 codes -> one little-endian uint32 (4 bytes), bit j = element j."""
    bits = ((q >> 4) & 1).reshape(q.shape[0], 4, 8)
    return (bits * _BIT_WEIGHTS).sum(dim=-1, dtype=torch.uint8)


def _trunc_codes(v: torch.Tensor, qmax: int) -> torch.Tensor:
    """trunc, then clamp to [0, qmax] (v >= 0 here), as uint8 -- numpy's astype(uint8).clip(0, qmax). A non-finite v
    (a block whose d is a float32 subnormal: 1 / d overflows to inf, so (x - min) / d is inf, or nan where x - min is
    0) takes code 0, as gguf-py's cast and ggml's (uint8_t) cast give on x86 (cvttss2si: 0x80000000, low byte 0);
    such a block's d and m round to 0 in FP16, so every code decodes to 0 anyway."""
    return torch.clamp(torch.trunc(torch.where(torch.isfinite(v), v, 0.0)), 0, qmax).to(torch.uint8)


def quant_q4_0(x: torch.Tensor) -> torch.Tensor:
    d = _signed_absmax(x) / -8
    q = _trunc_codes(x * _inv(d) + 8.5, 15)
    return torch.cat([_f16_bytes(d), _pack_nibbles(q)], dim=-1)


def quant_q4_1(x: torch.Tensor) -> torch.Tensor:
    mx = x.amax(dim=-1, keepdim=True)
    mn = x.amin(dim=-1, keepdim=True)
    d = (mx - mn) / 15
    q = _trunc_codes((x - mn) * _inv(d) + 0.5, 15)
    return torch.cat([_f16_bytes(d), _f16_bytes(mn), _pack_nibbles(q)], dim=-1)


def quant_q5_0(x: torch.Tensor) -> torch.Tensor:
    d = _signed_absmax(x) / -16
    q = _trunc_codes(x * _inv(d) + 16.5, 31)
    return torch.cat([_f16_bytes(d), _pack_qh(q), _pack_nibbles(q)], dim=-1)


def quant_q5_1(x: torch.Tensor) -> torch.Tensor:
    mx = x.amax(dim=-1, keepdim=True)
    mn = x.amin(dim=-1, keepdim=True)
    d = (mx - mn) / 31
    q = _trunc_codes((x - mn) * _inv(d) + 0.5, 31)
    return torch.cat([_f16_bytes(d), _f16_bytes(mn), _pack_qh(q), _pack_nibbles(q)], dim=-1)


def _round_half_away(v: torch.Tensor) -> torch.Tensor:
    # Same float32 steps as gguf-py's np_roundf (and C roundf): floor(a) + floor(2 * frac(a)).
    a = v.abs()
    fl = torch.floor(a)
    return torch.sign(v) * (fl + torch.floor(2 * (a - fl)))


def quant_q8_0(x: torch.Tensor) -> torch.Tensor:
    d = x.abs().amax(dim=-1, keepdim=True) / 127
    q = _round_half_away(x * _inv(d)).to(torch.int8).view(torch.uint8)
    return torch.cat([_f16_bytes(d), q], dim=-1)


DEQUANTIZERS = {
    "F32": dequant_f32, "F16": dequant_f16, "BF16": dequant_bf16,
    "Q4_0": dequant_q4_0, "Q4_1": dequant_q4_1, "Q5_0": dequant_q5_0, "Q5_1": dequant_q5_1,
    "Q8_0": dequant_q8_0,
}
QUANTIZERS = {
    "F32": quant_f32, "F16": quant_f16, "BF16": quant_bf16,
    "Q4_0": quant_q4_0, "Q4_1": quant_q4_1, "Q5_0": quant_q5_0, "Q5_1": quant_q5_1,
    "Q8_0": quant_q8_0,
}
