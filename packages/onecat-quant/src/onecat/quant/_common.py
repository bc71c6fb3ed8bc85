"""Shared helpers for the reference codecs: input validation, byte-field access, half/bfloat16 bits.

Errors are ``ValueError`` whose message starts with the tensor's name (when the caller gave one) and
the format, then says what is wrong, e.g.
``tensor 'blk.0.ffn_up.weight' (Q4_K): row length 100 is not a multiple of the block size 256``.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from ._minifloat import bits_to_float32, decode_codes, float32_bits

__all__ = [
    "where",
    "as_uint8",
    "as_float32",
    "normalize_shape",
    "to_blocks",
    "u16_at",
    "u32_at",
    "f16_at",
    "f16_bits_to_float32",
    "float32_to_f16_bits",
    "bf16_bits_to_float32",
    "float32_to_bf16_bits",
]


def where(fmt: str, name: str | None) -> str:
    """The prefix of every error message: which tensor, which format."""
    return f"tensor {name!r} ({fmt})" if name else f"tensor ({fmt})"


def _to_torch(x, fmt: str, name: str | None) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.require(x, requirements=["C", "W"]))  # copies only read-only/strided arrays
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{where(fmt, name)}: expected a torch.Tensor or numpy array, got {type(x).__name__}")
    return x


def as_uint8(raw, fmt: str, name: str | None = None) -> torch.Tensor:
    """Flat uint8 view of ``raw`` (any dtype: int8/float32 raw data is reinterpreted, never converted)."""
    raw = _to_torch(raw, fmt, name)
    if raw.is_complex() or raw.dtype == torch.bool:
        raise ValueError(f"{where(fmt, name)}: raw data must be bytes, got dtype {raw.dtype}")
    raw = raw.contiguous().reshape(-1)
    return raw if raw.dtype == torch.uint8 else raw.view(torch.uint8)


def as_float32(x, fmt: str, name: str | None = None) -> torch.Tensor:
    x = _to_torch(x, fmt, name)
    if not x.is_floating_point():
        raise ValueError(f"{where(fmt, name)}: expected a floating-point tensor to quantize, got {x.dtype}")
    return x.to(torch.float32)


def normalize_shape(shape: Sequence[int], fmt: str, name: str | None) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise ValueError(f"{where(fmt, name)}: shape must be a sequence of ints, got {shape!r}") from None
    if len(shape) == 0 or any(d < 0 for d in shape):
        raise ValueError(f"{where(fmt, name)}: invalid shape {shape}")
    return shape


def to_blocks(raw, shape: Sequence[int], block_size: int, type_size: int, fmt: str, name: str | None):
    """Validate raw bytes against a logical shape; return ``(blocks [n_blocks, type_size], shape)``.

    ``shape`` is the logical (row-major) tensor shape; its last dim is the row, quantized in blocks of
    ``block_size`` elements of ``type_size`` bytes each.
    """
    shape = normalize_shape(shape, fmt, name)
    if shape[-1] % block_size != 0:
        raise ValueError(
            f"{where(fmt, name)}: row length {shape[-1]} is not a multiple of the block size {block_size}"
        )
    n_blocks = math.prod(shape) // block_size
    flat = as_uint8(raw, fmt, name)
    expected = n_blocks * type_size
    if flat.numel() != expected:
        raise ValueError(
            f"{where(fmt, name)}: shape {shape} needs {expected} bytes ({n_blocks} blocks x {type_size} B), "
            f"got {flat.numel()}"
        )
    return flat.reshape(n_blocks, type_size), shape


# ---- little-endian byte fields of a [n_blocks, type_size] uint8 tensor -----------------------------

def u16_at(blocks: torch.Tensor, off: int) -> torch.Tensor:
    """Little-endian uint16 at byte ``off`` of every block, as int64 [n, 1]."""
    return blocks[:, off:off + 2].contiguous().view(torch.int16).to(torch.int64) & 0xFFFF


def u32_at(blocks: torch.Tensor, off: int, count: int = 1) -> torch.Tensor:
    """``count`` consecutive little-endian uint32 starting at byte ``off``, as int64 [n, count]."""
    b = blocks[:, off:off + 4 * count].to(torch.int64).reshape(blocks.shape[0], count, 4)
    return b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)


# ---- IEEE half (E5M10, bias 15) and bfloat16 -------------------------------------------------------

_F16_TABLE: torch.Tensor | None = None


def _f16_table() -> torch.Tensor:
    global _F16_TABLE
    if _F16_TABLE is None:
        _F16_TABLE = decode_codes(torch.arange(65536, dtype=torch.int64), 5, 10, 15, "ieee")
    return _F16_TABLE


def f16_bits_to_float32(bits: torch.Tensor) -> torch.Tensor:
    """uint16 patterns (any int dtype) -> float32, exact, NaN payloads kept (numpy's rule)."""
    return _f16_table()[bits.to(torch.int64) & 0xFFFF]


def f16_at(blocks: torch.Tensor, off: int) -> torch.Tensor:
    """The fp16 scalar at byte ``off`` of every block, as float32 [n, 1]."""
    return f16_bits_to_float32(u16_at(blocks, off))


def float32_to_f16_bits(x: torch.Tensor) -> torch.Tensor:
    """float32 -> fp16 bit patterns (int64), round-to-nearest-even, overflow -> inf.

    Non-NaN values use torch's float16 conversion, which is IEEE round-to-nearest-even (subnormals
    and overflow-to-inf included; the tests check it bit for bit against numpy/gguf-py). NaN is not
    left to the platform: it keeps its sign and top 10 payload bits, and a payload that truncates to
    0 becomes 1 (so it stays NaN) -- the rule of numpy's software conversion.
    """
    x = x.to(torch.float32)
    h = x.to(torch.float16).view(torch.int16).to(torch.int64) & 0xFFFF
    nan = torch.isnan(x)
    if bool(nan.any()):
        bits = float32_bits(x)
        payload = (bits & 0x7FFFFF) >> 13
        soft = ((bits >> 31) << 15) | 0x7C00 | torch.where(payload == 0, torch.ones_like(payload), payload)
        h = torch.where(nan, soft, h)
    return h


def bf16_bits_to_float32(bits: torch.Tensor) -> torch.Tensor:
    return bits_to_float32((bits.to(torch.int64) & 0xFFFF) << 16)


def float32_to_bf16_bits(x: torch.Tensor) -> torch.Tensor:
    """float32 -> bfloat16 bits (int64): round-to-nearest-even; NaN forced quiet (ggml's rule)."""
    n = float32_bits(x)
    is_nan = (n & 0x7FFFFFFF) > 0x7F800000
    n = torch.where(is_nan, (n & 0xFFFF0000) | 0x400000, n)
    return ((n + (0x7FFF + ((n >> 16) & 1))) >> 16) & 0xFFFF
