"""A chain of M = 1 packed GEMVs in one persistent, cooperative launch (csrc/gemv_chain.cu): the
experiment behind issue #7's G2, timed against the CUDA graph of one kernel per GEMV by
tools/gpu/gemv_chain.py --persistent. Not registered as a provider: nothing on the engine's route
launches it.

    tasks = pack_tasks([(out0, x0, w0), (out1, out0, w1), ...])   # x of a task: an input or an earlier y
    run_chain(tasks, "q4_0", (4, 1))                               # one launch, all tasks in order
"""

from __future__ import annotations

import ctypes
import functools

import torch

from .cuda_ops import _ptr, cuda_index
from .driver import Kernel, libcuda

CHAIN_SHAPES = {"q4_0": ((4, 1), (2, 1), (2, 2)), "q4_k": ((4, 1), (2, 2))}  # (R rows, U chunks in flight)
_CHAIN = {(f, s): Kernel("gemv_chain.cu", f"gemv_chain_{f}_r{s[0]}u{s[1]}", "pip", cooperative=True)
          for f, shapes in CHAIN_SHAPES.items() for s in shapes}
THREADS = 128
TASK_WORDS = 7  # sizeof(ChainTask) / 8


def pack_tasks(links) -> torch.Tensor:
    """links: (out [1, N] fp16, x [1, K] fp16, PackedWeight [N, K]) per task, in order -> the device
    array of csrc/gemv_chain.cu's ChainTask (7 int64 words each). One format for the whole chain."""
    if not links:
        raise ValueError("an empty chain")
    kinds = {w.kind for _, _, w in links}
    if len(kinds) != 1:
        raise ValueError(f"one weight format per chain, got {sorted(kinds)}")
    words = []
    for out, x, w in links:
        n, k = w.shape
        if out.numel() < n or x.numel() < k or k % 32:
            raise ValueError(f"task {len(words) // TASK_WORDS}: out {tuple(out.shape)} / x {tuple(x.shape)} "
                             f"do not fit W {tuple(w.shape)} (K a multiple of 32)")
        if out.dtype != torch.float16 or x.dtype != torch.float16 or x.data_ptr() % 16:
            raise ValueError("out and x must be fp16, x 16-byte aligned")
        words += [out.data_ptr(), x.data_ptr(), w.q.data_ptr(), _ptr(w.qh), w.meta.data_ptr(),
                  n | (k << 32), w.group_size // 32]
    return torch.tensor([v - (1 << 64) if v >= 1 << 63 else v for v in words], dtype=torch.int64,
                        device=links[0][0].device)


@functools.lru_cache(maxsize=None)
def grid_blocks(fmt: str, shape: tuple[int, int], device_index: int) -> int:
    """Blocks of the cooperative grid: every SM filled to the kernel's occupancy (all resident)."""
    kern = _CHAIN[(fmt, shape)]
    n = ctypes.c_int()
    with torch.cuda.device(device_index):
        fn = kern.function(device_index)
        res = libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), fn, THREADS, 0)
    if res != 0 or n.value < 1:
        raise RuntimeError(f"{kern.name}: no occupancy ({res}, {n.value})")
    return n.value * torch.cuda.get_device_properties(device_index).multi_processor_count


_barriers: dict[int, torch.Tensor] = {}


def run_chain(tasks: torch.Tensor, fmt: str, shape: tuple[int, int]) -> None:
    """One cooperative launch running every task of `tasks` (pack_tasks) in order on torch's stream."""
    if (fmt, shape) not in _CHAIN:
        raise ValueError(f"no persistent chain kernel for {fmt} r{shape[0]}u{shape[1]} (have {sorted(_CHAIN)})")
    idx = cuda_index(tasks.device)
    bar = _barriers.get(idx)
    if bar is None:  # {count, generation}: the kernel re-arms the count itself
        bar = _barriers[idx] = torch.zeros(2, dtype=torch.int32, device=tasks.device)
    with torch.cuda.device(idx):
        _CHAIN[(fmt, shape)]((grid_blocks(fmt, shape, idx), 1, 1), (THREADS, 1, 1), tasks.data_ptr(),
                             tasks.numel() // TASK_WORDS, bar.data_ptr(), device=idx)
