"""Providers of the `embedding` op (token ids -> FP16 rows of the embedding table; semantics:
reference.embedding).

* `cuda`: csrc/embedding.cu, one launch for a dense FP16 table or a PackedWeight table (q4_0, q4_1,
  q8_0, q4_k, q6_k), bit-identical with the reference. On sm_90 it is a PDL kernel, so a graphed
  decode step runs from the embedding to the LM head without a torch kernel breaking the chain
  (the reference route there was index_select of each plane plus the dequantize's elementwise ops).
* the torch reference everywhere else (CPU, raw GGUF blocks, AWQ tables, FP32/BF16 outputs).
"""

from __future__ import annotations

import torch

from . import cuda_ops
from .cuda_ops import _common, _empty, _need, available
from .driver import Kernel
from .registry import KernelRegistry, Problem, Provider

_FORMATS = {"dense": "f16", "packed_q4_0": "q4_0", "packed_q4_1": "q4_1", "packed_q8_0": "q8_0",
            "packed_q4_k": "q4_k", "packed_q6_k": "q6_k"}
_KERNELS = {f: Kernel("embedding.cu", f"embedding_{f}", "pppppqi", pdl=True) for f in _FORMATS.values()}
_THREADS = 128  # threads per block; each writes 8 weights of one row
_MAX_ROWS = 65535  # grid.y: rows per launch


def supports_embedding(p: Problem) -> list[str]:
    r = _common(p, dtypes=("int64",))
    fmt, k = p.param("format"), p.param("k")
    _need(r, fmt in _FORMATS, f"table format {fmt} not dense float16 or packed "
          f"{'/'.join(f[7:] for f in _FORMATS if f != 'dense')}")
    _need(r, fmt != "dense" or p.param("table_dtype") == "float16",
          f"dense table dtype {p.param('table_dtype')} not float16")
    _need(r, p.param("out_dtype") == "float16", f"output dtype {p.param('out_dtype')} not float16")
    block = 256 if fmt in ("packed_q4_k", "packed_q6_k") else 32 if fmt != "dense" else 8
    _need(r, k % block == 0, f"K={k} not a multiple of {block}")
    _need(r, p.param("ids_contiguous", True), "ids not a contiguous 1-D tensor")
    _need(r, p.param("planes_ok", True), "table planes not contiguous and 16-byte aligned")
    return r


def embedding_cuda(weight, ids, dtype):
    t, (n, k) = ids.shape[0], weight.shape
    out = _empty((t, k), torch.float16, ids.device)
    if t:
        dense = isinstance(weight, torch.Tensor)
        kern = _KERNELS[_FORMATS[getattr(weight, "format", "dense")]]
        q = weight if dense else weight.q
        for r in range(0, t, _MAX_ROWS):
            grid = (-(-k // (8 * _THREADS)), min(_MAX_ROWS, t - r), 1)
            cuda_ops._launch(kern, grid, (_THREADS, 1, 1), out[r:].data_ptr(), ids[r:].data_ptr(), q.data_ptr(),
                             cuda_ops._ptr(None if dense else weight.qh),
                             cuda_ops._ptr(None if dense else weight.meta), n, k, device=ids.device)
    return out


def register(reg: KernelRegistry) -> None:
    reg.register(Provider("cuda", "embedding", embedding_cuda, available=available, supports=supports_embedding))
