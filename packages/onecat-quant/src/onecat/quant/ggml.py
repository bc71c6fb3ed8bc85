"""Public entry point for GGUF/ggml tensor data: ``dequantize(raw, shape, type)`` and ``quantize``.

``raw`` is the tensor's data exactly as stored in the GGUF file (``GGUFReader(...).tensors[i].data``
as a torch/numpy array of any dtype -- it is reinterpreted as bytes, never converted). ``shape`` is the
*logical* row-major shape, i.e. GGUF's ``ne`` reversed (``tuple(reversed(t.shape))``); its last dim is
the row that is cut into blocks. The type is a ggml type name (``"Q4_K"``), its numeric id, or a
``gguf.GGMLQuantizationType``.

Block layouts are documented in :mod:`onecat.quant.gguf_blocks` (float and 32-element types),
:mod:`onecat.quant.gguf_kquants` (K-quants) and :mod:`onecat.quant.gguf_iquants` (I-quants).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from . import gguf_blocks, gguf_iquants, gguf_kquants
from ._common import as_float32, normalize_shape, to_blocks, where

__all__ = ["GGMLType", "GGML_TYPES", "ggml_type", "dequantize", "quantize", "nbytes"]


@dataclass(frozen=True)
class GGMLType:
    name: str
    type_id: int          # ggml_type enum value (gguf.GGMLQuantizationType)
    block_size: int       # weights per block
    type_size: int        # bytes per block
    dequantize_blocks: Callable[[torch.Tensor], torch.Tensor]
    quantize_blocks: Callable[[torch.Tensor], torch.Tensor] | None


_SIZES = {
    # name: (ggml type id, block size, bytes per block)
    "F32": (0, 1, 4), "F16": (1, 1, 2), "BF16": (30, 1, 2),
    "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34),
    "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210),
    "IQ3_XXS": (18, 256, 98), "IQ4_NL": (20, 32, 18), "IQ3_S": (21, 256, 110), "IQ4_XS": (23, 256, 136),
}

_DEQ = {**gguf_blocks.DEQUANTIZERS, **gguf_kquants.DEQUANTIZERS, **gguf_iquants.DEQUANTIZERS}

GGML_TYPES: dict[str, GGMLType] = {
    name: GGMLType(name, tid, bs, ts, _DEQ[name], gguf_blocks.QUANTIZERS.get(name))
    for name, (tid, bs, ts) in _SIZES.items()
}
_BY_ID = {t.type_id: t for t in GGML_TYPES.values()}


def ggml_type(qtype, name: str | None = None) -> GGMLType:
    """Resolve a type name / id / ``GGMLQuantizationType`` to its :class:`GGMLType`."""
    if isinstance(qtype, GGMLType):
        return qtype
    key = getattr(qtype, "name", qtype)  # enum members carry .name
    if isinstance(key, str) and key.upper() in GGML_TYPES:
        return GGML_TYPES[key.upper()]
    if isinstance(qtype, int) and qtype in _BY_ID:
        return _BY_ID[qtype]
    label = f"tensor {name!r}: " if name else ""
    raise ValueError(
        f"{label}unknown or unsupported GGML type {qtype!r}; supported: {', '.join(GGML_TYPES)}"
    )


def nbytes(shape: Sequence[int], qtype, name: str | None = None) -> int:
    """Bytes the raw data of a tensor of logical ``shape`` takes in type ``qtype``."""
    t = ggml_type(qtype, name)
    shape = normalize_shape(shape, t.name, name)
    if shape[-1] % t.block_size:
        raise ValueError(f"{where(t.name, name)}: row length {shape[-1]} is not a multiple of the block size {t.block_size}")
    n = 1
    for s in shape:
        n *= s
    return n // t.block_size * t.type_size


# Blocks are processed in chunks of about this many weights: small enough to stay in cache and under
# torch's intra-op parallel grain size (so results and speed don't depend on thread scheduling),
# large enough that the per-chunk Python overhead is negligible.
CHUNK_WEIGHTS = 1 << 15


def _chunked(fn, blocks: torch.Tensor, out: torch.Tensor, per_block: int) -> torch.Tensor:
    if per_block == 1:  # F32/F16/BF16: a few whole-tensor element-wise ops, nothing to gain by chunking
        out[:] = fn(blocks)
        return out
    step = max(1, CHUNK_WEIGHTS // per_block)
    for s in range(0, blocks.shape[0], step):
        out[s:s + step] = fn(blocks[s:s + step])
    return out


def dequantize(raw, shape: Sequence[int], qtype, *, name: str | None = None) -> torch.Tensor:
    """Raw GGUF bytes -> float32 tensor of ``shape``. Raises ValueError on malformed input."""
    t = ggml_type(qtype, name)
    blocks, shape = to_blocks(raw, shape, t.block_size, t.type_size, t.name, name)
    out = torch.empty(blocks.shape[0], t.block_size, dtype=torch.float32)
    return _chunked(t.dequantize_blocks, blocks, out, t.block_size).reshape(shape)


def quantize(x, qtype, *, name: str | None = None) -> torch.Tensor:
    """Float tensor -> raw GGUF bytes, uint8 of shape ``(*x.shape[:-1], row_bytes)``.

    Available for F32/F16/BF16/Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 (the ggml reference quantizers, byte-identical
    to gguf-py's ``gguf.quants.quantize``).
    """
    t = ggml_type(qtype, name)
    if t.quantize_blocks is None:
        raise ValueError(
            f"{where(t.name, name)}: no reference quantizer for this type "
            f"(available: {', '.join(k for k, v in GGML_TYPES.items() if v.quantize_blocks)})"
        )
    x = as_float32(x, t.name, name)
    if x.dim() == 0:
        x = x.reshape(1)
    if x.shape[-1] % t.block_size:
        raise ValueError(f"{where(t.name, name)}: row length {x.shape[-1]} is not a multiple of the block size {t.block_size}")
    out_shape = (*x.shape[:-1], x.shape[-1] // t.block_size * t.type_size)
    blocks = x.contiguous().reshape(-1, t.block_size)
    out = torch.empty(blocks.shape[0], t.type_size, dtype=torch.uint8)
    return _chunked(t.quantize_blocks, blocks, out, t.block_size).reshape(out_shape)
