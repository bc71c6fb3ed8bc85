"""Software IEEE-style small-float codec shared by the F16, FP8 and FP4 (E2M1) codecs.

Nothing here uses torch's float16/float8 casts: every conversion is integer bit manipulation on the
float32 bit pattern, so the result is the same on every platform and for every NaN payload.

A format is ``(exp_bits E, man_bits M, bias B)``. A magnitude code ``c`` (the code without its sign
bit, ``0 <= c < 2**(E+M)``) splits into exponent field ``e = c >> M`` and mantissa ``m``:

* ``e == 0``: subnormal, value ``m * 2**(1-B-M)``
* ``e  > 0``: normal, value ``(1 + m/2**M) * 2**(e-B)``
* ``e == 2**E-1`` is special depending on ``special``:
  ``"ieee"`` (F16, E5M2): ``m == 0`` is inf, other ``m`` NaN (payload kept in the float32 result);
  ``"fn"`` (E4M3FN): only ``m == 2**M-1`` is NaN, no infinities; ``"none"`` (E2M1): no specials.

Encoding (:func:`encode_magnitude`) rounds to nearest, ties to even, in integer arithmetic: a finite
float32 ``x = m24 * 2**(ex-23)`` (``m24`` the 24-bit significand) is expressed in units of the target
quantum at exponent ``et = max(ex, 1-B)``, i.e. ``q = rne(m24 * 2**(ex-23) / 2**(et-M))``, which is a
right shift of ``m24`` by ``s = 23 - M + (et - ex)`` bits with round-half-even. The code is then
``((et + B - 1) << M) + q``; a carry out of the mantissa (``q == 2**(M+1)``) lands exactly on the next
binade's code, and a result above the largest finite code signals overflow to the caller, which applies
the format's policy (saturate, inf or NaN).
"""

from __future__ import annotations

import torch

__all__ = ["decode_codes", "encode_magnitude", "float32_bits", "bits_to_float32"]


def float32_bits(x: torch.Tensor) -> torch.Tensor:
    """float32 tensor -> its bit patterns as non-negative int64 (0 .. 2**32-1)."""
    return x.to(torch.float32).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def bits_to_float32(bits: torch.Tensor) -> torch.Tensor:
    """int64 bit patterns (0 .. 2**32-1) -> float32 tensor with exactly those bits."""
    bits = torch.where(bits >= 2**31, bits - 2**32, bits)
    return bits.to(torch.int32).view(torch.float32)


def _rne_shift(v: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """round(v / 2**s) with ties to even, for non-negative int64 ``v`` and ``1 <= s <= 62``."""
    one = torch.ones_like(v)
    q = v >> s
    rem = v - (q << s)
    half = one << (s - 1)
    up = (rem > half) | ((rem == half) & ((q & 1) == 1))
    return q + up.to(torch.int64)


def encode_magnitude(x: torch.Tensor, exp_bits: int, man_bits: int, bias: int):
    """Round float32 ``x`` to the (E, M, B) format; returns ``(sign, mag, is_nan, is_inf)``.

    ``sign`` is 0/1 and ``mag`` the rounded magnitude code (int64), which may exceed the largest
    finite code (overflow) -- the caller decides what overflow, inf and NaN become.
    """
    bits = float32_bits(x)
    sign = bits >> 31
    efield = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    is_nan = (efield == 0xFF) & (mant != 0)
    is_inf = (efield == 0xFF) & (mant == 0)
    normal = efield > 0
    m24 = torch.where(normal, mant | 0x800000, mant)
    ex = torch.where(normal, efield - 127, torch.full_like(efield, -126))
    et = torch.clamp(ex, min=1 - bias)
    s = torch.clamp((23 - man_bits) + (et - ex), max=40)
    q = _rne_shift(m24, s)
    mag = ((et + bias - 1) << man_bits) + q
    return sign, mag, is_nan, is_inf


def decode_codes(codes: torch.Tensor, exp_bits: int, man_bits: int, bias: int, special: str) -> torch.Tensor:
    """Decode integer codes (sign bit at position E+M) to float32 by building the float32 bits."""
    if special not in ("ieee", "fn", "none"):
        raise ValueError(f"unknown special-value convention {special!r}")
    c = codes.to(torch.int64)
    width = exp_bits + man_bits
    sign = (c >> width) & 1
    mag = c & ((1 << width) - 1)
    ef = mag >> man_bits
    mf = mag & ((1 << man_bits) - 1)
    normal_bits = ((ef - bias + 127) << 23) | (mf << (23 - man_bits))
    # Subnormal: m * 2**(1-B-M). float(m) is exact; move its exponent down by (B+M-1) binades.
    fm_bits = float32_bits(mf.to(torch.float32))
    sub_bits = torch.where(mf == 0, torch.zeros_like(fm_bits), fm_bits - ((bias + man_bits - 1) << 23))
    out = torch.where(ef == 0, sub_bits, normal_bits)
    top = (1 << exp_bits) - 1
    if special == "ieee":
        out = torch.where(ef == top, 0x7F800000 | (mf << (23 - man_bits)), out)
    elif special == "fn":
        out = torch.where((ef == top) & (mf == (1 << man_bits) - 1), torch.full_like(out, 0x7FC00000), out)
    return bits_to_float32(out | (sign << 31))
