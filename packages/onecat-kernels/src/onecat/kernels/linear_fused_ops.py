"""Providers of the decode layer's fused projections (semantics: reference.linear_add_rms_norm and
reference.linear_silu_and_mul, the compositions they replace):

* `cuda_gemv_epilogue`: the packed M = 1 GEMV (csrc/gemv_packed.cu, the shape cuda_ops.gemv_m1_shape
  picks) with an epilogue, one launch where the unfused route takes two:
  - linear_silu_and_mul: a warp computes gate rows and the same rows of up, and writes
    silu(gate) * up (the [gate | up] activations never reach memory);
  - linear_add_rms_norm: the last block to finish adds the residual and RMS-normalizes the row
    (o_proj / down, then the next norm), through a zeroed counter it re-arms.
* `unfused`: ops.linear then ops.silu_and_mul / ops.rms_norm, each through its own admitted provider
  (the GPU route for batches, other formats and dense weights).
* the torch reference everywhere else (the CPU route).
"""

from __future__ import annotations

import functools

import torch

from . import cuda_ops
from .cuda_ops import _PACKED_NAMES, _common, _empty, _need, _ptr, available, gemv_m1_rows_per_block, gemv_m1_shape
from .driver import Kernel
from .registry import KernelRegistry, Problem, Provider
from .weights import PACKED_FORMATS

# the (format, shape) pairs gemv_packed.cu instantiates with epilogues: what gemv_m1_shape can pick
EPILOGUE_SHAPES = {"q4_0": ((4, 1, 2, "n"), (4, 1, 1, "n")), "q4_1": ((4, 1, 2, "n"), (4, 1, 1, "n")),
                   "awq": ((4, 1, 2, "n"), (4, 1, 1, "n")), "q8_0": ((4, 1, 2, "n"),),
                   "q4_k": ((4, 1, 2, ""), (4, 1, 1, ""), (4, 1, 1, "n")), "q6_k": ((2, 1, 1, ""),)}
_GLU = {(f, s): Kernel("gemv_packed.cu", f"gemv_r_{f}_r{s[0]}u{s[1]}k{s[2]}{s[3]}_glu", "pppppiii")
        for f in PACKED_FORMATS for s in EPILOGUE_SHAPES[f]}
_NORM = {(f, s): Kernel("gemv_packed.cu", f"gemv_r_{f}_r{s[0]}u{s[1]}k{s[2]}{s[3]}_norm", "pppppiiipppppf")
         for f in PACKED_FORMATS for s in EPILOGUE_SHAPES[f]}
COUNTER_SLOTS = 1  # one launch at a time per device uses the counter (same stream)
# Formats the epilogue is admitted for: where the H200 peers run measured it paying (smollm2 Q4_1
# 827 -> 1,035 tok/s, llama3-8b Q4_0 365 -> 373, with this session's attention change; results
# h200-2026-11-29-s4) or, for q8_0 / awq, the kernels' registers equal the plain GEMV's. The
# llama3-8b Q4_K_M route (q4_k, with q6_k down / v projections) measured slower with it
# (313 -> 286 tok/s median, a noisy run): unfused until an A/B timeline settles it.
EPILOGUE_FORMATS = ("q4_0", "q4_1", "q8_0", "awq")


@functools.lru_cache(maxsize=None)
def _counter(device: torch.device) -> torch.Tensor:
    """The zeroed int32 counter of the norm epilogue: the last block re-arms it. One per device for
    the process, so CUDA graphs keep its address."""
    return torch.zeros(COUNTER_SLOTS, dtype=torch.int32, device=device)


def _device_key(dev: torch.device) -> torch.device:
    """One counter per physical device, whether it is named 'cuda' or 'cuda:N' (CPU devices pass
    through for the host-side tests)."""
    return dev if dev.type != "cuda" else torch.device("cuda", cuda_ops.cuda_index(dev))


def _supports_gemv(p: Problem, kernels: dict) -> list[str]:
    r = _common(p)
    fmt, n, k = p.param("format"), p.param("n"), p.param("k")
    _need(r, fmt in _PACKED_NAMES, f"weight format {fmt} not a PackedWeight ({'/'.join(_PACKED_NAMES)})")
    _need(r, p.param("rows") == 1, f"M={p.param('rows')}: the epilogue GEMV is for one row (decode, batch 1)")
    _need(r, k % 32 == 0, f"K={k} not a multiple of 32")
    _need(r, p.param("bias") is None, "bias: the fused epilogues take none")
    _need(r, p.param("contiguous", True) and p.param("aligned16", True), "x not contiguous and 16-byte aligned")
    _need(r, fmt not in _PACKED_NAMES or fmt.removeprefix("packed_") in EPILOGUE_FORMATS,
          f"{fmt}: not admitted (the llama3-8b Q4_K_M route measured slower with the epilogue GEMV on the "
          f"H200; formats {'/'.join(EPILOGUE_FORMATS)})")
    if fmt in _PACKED_NAMES and k % 32 == 0:
        shape = gemv_m1_shape(fmt.removeprefix("packed_"), n, k)
        _need(r, (fmt.removeprefix("packed_"), shape) in kernels,
              f"M = 1 kernel shape {shape} of {fmt} has no epilogue instance")
    return r


def supports_glu(p: Problem) -> list[str]:
    r = _supports_gemv(p, _GLU)
    _need(r, p.param("n") % 2 == 0, f"N={p.param('n')} odd: not [gate | up]")
    return r


def supports_norm(p: Problem) -> list[str]:
    r = _supports_gemv(p, _NORM)
    _need(r, p.param("n") % 8 == 0, f"N={p.param('n')} not a multiple of 8 (128-bit tail)")
    _need(r, p.param("norm_dtype") == "float16" and p.param("residual_dtype") == "float16",
          f"norm weight / residual dtype {p.param('norm_dtype')} / {p.param('residual_dtype')} not float16")
    _need(r, p.param("norm_layout_ok", True), "residual / norm weight not contiguous, 16-byte aligned, of N elements")
    return r


def supports_unfused(p: Problem) -> list[str]:
    return [] if p.device == "cuda" else [f"device is {p.device}: the reference is the same composition"]


def _gemv(kernels, x, weight, n_out, *extra):
    k, n = x.shape[-1], weight.shape[0]
    shape = gemv_m1_shape(weight.kind, n, k)
    out = _empty((*x.shape[:-1], n_out), x.dtype, x.device)
    blocks = -(-n_out // (gemv_m1_rows_per_block(shape[0], shape[2]) // (2 if kernels is _GLU else 1)))
    cuda_ops._launch(kernels[(weight.kind, shape)], (blocks, 1, 1), (128, 1, 1), out.data_ptr(), x.data_ptr(),
                     weight.q.data_ptr(), _ptr(weight.qh), weight.meta.data_ptr(), n, k, weight.group_size // 32,
                     *extra, device=x.device)
    return out


def linear_silu_and_mul_cuda(x, weight):
    return _gemv(_GLU, x, weight, weight.shape[0] // 2)


def linear_add_rms_norm_cuda(x, weight, residual, norm_weight, eps):
    n = weight.shape[0]
    h = _empty((*x.shape[:-1], n), x.dtype, x.device)
    res_out = _empty((*x.shape[:-1], n), x.dtype, x.device)
    _gemv(_NORM, x, weight, n, h.data_ptr(), res_out.data_ptr(), residual.data_ptr(), norm_weight.data_ptr(),
          _counter(_device_key(x.device)).data_ptr(), float(eps))
    return h, res_out


def linear_silu_and_mul_unfused(x, weight):
    from . import ops
    return ops.silu_and_mul(ops.linear(x, weight))


def linear_add_rms_norm_unfused(x, weight, residual, norm_weight, eps):
    from . import ops
    return ops.rms_norm(ops.linear(x, weight), norm_weight, eps, residual)


def register(reg: KernelRegistry) -> None:
    for op, fused, unfused, supports in (
            ("linear_silu_and_mul", linear_silu_and_mul_cuda, linear_silu_and_mul_unfused, supports_glu),
            ("linear_add_rms_norm", linear_add_rms_norm_cuda, linear_add_rms_norm_unfused, supports_norm)):
        reg.register(Provider("cuda_gemv_epilogue", op, fused, available=available, supports=supports))
        reg.register(Provider("unfused", op, unfused, supports=supports_unfused))
        reg.priority.setdefault(op, ["cuda_gemv_epilogue", "unfused"])
