"""Shared by the packed-GEMM tests (test_gemm_packed.py: the shared-memory tiles and linear's routing;
test_gemm_rd.py: the register-direct tiles; test_gemv_packed.py): the seed, the tolerance and the GPU
marks, a linear problem on a fake device and its admission table, the float reference and error, GPU
inputs, and the fixtures (`small` packed weights of every format, `launches` intercepted)."""

from __future__ import annotations

import dataclasses
import os
import random
import struct

import pytest
import torch

from onecat.kernels import cuda_ops, gemm_ops, ops
from onecat.kernels.driver import Kernel
from onecat.kernels.weights import PACKED_FORMATS, random_packed

SEED = int(os.environ.get("ONECAT_TEST_SEED", random.randrange(2**31)))
TOL = 2e-3
gpu = pytest.mark.gpu
needs_rd = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < gemm_ops.RD_MIN_CAPABILITY,
                              reason="register-direct GEMM needs sm_80+ (mma.sync m16n8k16)")
needs_wg = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != gemm_ops.WG_CAPABILITY,
                              reason="the wgmma GEMM tile needs capability 9.0 (sm_90a)")


def linear_problem(x, w, bias=None, cap=(7, 0), dtype=None, **override):
    """ops.problem("linear", ...) as on a device of capability `cap` (None: the CPU), params overridden."""
    p = ops.problem("linear", x, w, bias)
    params = dict(p.params) | override
    return dataclasses.replace(p, device="cuda" if cap else "cpu", capability=cap, dtype=dtype or p.dtype,
                               params=tuple(sorted(params.items())))


def explain(p):
    """The registry's choice and every refusal for p, whatever this machine has."""
    return ops.registry.explain(p, check_available=False)


@pytest.fixture(scope="module")
def small():
    gen = torch.Generator().manual_seed(0)
    return {t: random_packed(80, 256, t, gen) for t in PACKED_FORMATS}


@pytest.fixture
def launches(monkeypatch):
    calls = []

    def fake_launch(kernel, grid, block, *args, device, smem=0):
        assert isinstance(kernel, Kernel)
        assert 1 <= grid[0] < 2**31 and 1 <= grid[1] <= 65535 and 1 <= grid[2] <= 65535
        want = (256 if kernel.name.endswith("_m32t") or "nw8_" in kernel.name else 192 if kernel.name.startswith("gemm_wg_")
                else 128)
        assert block == (want, 1, 1), kernel.name
        assert len(args) == len(kernel.signature), kernel.name
        struct.pack_into(kernel._fmt, kernel._buf, 0, *args)
        calls.append((kernel.name, grid, args))

    monkeypatch.setattr(cuda_ops, "_launch", fake_launch)
    return calls


def ref_linear(x, w, bias):
    """x (fp32) @ W.dequantize(fp32)^T (+ bias)."""
    y = x.float().reshape(-1, x.shape[-1]) @ w.dequantize(torch.float32).t()
    if bias is not None:
        y = y + bias.float()
    return y.reshape(*x.shape[:-1], w.shape[0])


def rel_err(out, ref) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30))


def gpu_inputs(kind, m, n, k, bias, seed):
    """x [m, k] fp16, a generated `kind` PackedWeight [n, k] and an fp16 bias (or None), on the GPU."""
    gen = torch.Generator().manual_seed(seed)
    w = random_packed(n, k, kind, gen, "cuda")
    x = torch.randn(m, k, generator=gen).half().cuda()
    b = torch.randn(n, generator=gen).half().cuda() if bias else None
    return x, w, b


def check_trace_rows(tr: torch.Tensor, blocks: int, splits: int, tile: str) -> None:
    """A traced launch's rows: every one of its `blocks` recorded its entry and nothing past them; each point between
    entry and end; the split-K count only when split; w64b2 records no point 2 (csrc/gemm_wg.cu)."""
    rows = tr[:blocks].cpu()
    assert bool((rows[:, 0] > 0).all()) and not bool(tr[blocks:].any()), (tile, splits)
    no_first_step = tile == "w64b2"
    assert bool((rows[:, 2] == 0).all()) == no_first_step, (tile, splits)
    for i in (1, 3, 4, 6) if no_first_step else (1, 2, 3, 4, 6):
        assert bool((rows[:, i] >= rows[:, 0]).all()) and bool((rows[:, 6] >= rows[:, i]).all()), (tile, i)
    assert bool((rows[:, 5] > 0).all()) == (splits > 1), (tile, splits)
