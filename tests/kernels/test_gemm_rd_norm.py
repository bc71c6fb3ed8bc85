"""The register-direct GEMM with rms_norm_linear's RMSNorm in front (csrc/gemm_rd.cu NORM tiles,
provider `cuda_pack_gemm_rd_norm`, an experiment behind ONECAT_RD_NORM=1). CPU: admission on fake
devices and the reasons it gives. GPU (sm_80+): against the torch reference (rms_norm, then x @
W.dequantize()^T, then silu_and_mul), the new residual stream bit-equal to the reference's, unsplit and
split-K tiles, the GLU in the launch (one split, no bias) or after it, no residual (the first layer),
bias, odd N, and a CUDA-graph replay."""

from __future__ import annotations

import dataclasses
import os
import random

import pytest
import torch

from onecat.kernels import cuda_ops, gemm_ops, linear_fused_ops, ops
from onecat.kernels import reference as ref
from onecat.kernels.weights import random_packed

SEED = int(os.environ.get("ONECAT_TEST_SEED", random.randrange(2**31)))
TOL = 5e-3  # ops' rms_norm_linear tolerance in float16: x . g is staged in FP16, inv_rms applied after
gpu = pytest.mark.gpu
needs_sm80 = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < gemm_ops.RD_MIN_CAPABILITY,
                                reason="register-direct GEMM needs sm_80+ (mma.sync m16n8k16)")


def _problem(m, w, residual=True, act=None, cap=(9, 0)):
    k = w.shape[1]
    x = torch.zeros(m, k, dtype=torch.float16)
    p = ops.problem("rms_norm_linear", x, torch.ones(k, dtype=torch.float16), 1e-6, w,
                    torch.zeros(m, k, dtype=torch.float16) if residual else None, None, act)
    return dataclasses.replace(p, device="cuda", capability=cap)


@pytest.fixture
def rd_norm_on(monkeypatch):
    """The experiment's switch on, the registry's cached selections dropped on the way in and out."""
    monkeypatch.setattr(linear_fused_ops, "RD_NORM", True)
    ops.registry.clear_cache()
    yield
    ops.registry.clear_cache()


def test_admission(any_nvrtc, monkeypatch):
    """Refused with the reason while the switch is off; on: 17..32 rows of q4_0 on sm_80+, with or without
    a residual and the GLU; more rows, an older GPU or another format keep the unfused route."""
    w = random_packed(64, 256, "q4_0", torch.Generator().manual_seed(0))

    def select(*a, **kw):
        return ops.registry.explain(_problem(*a, **kw), check_available=False)

    sel = select(32, w)  # the switch off: the unfused norm and GEMM, with the reason
    assert sel.provider.name == "unfused"
    assert "an experiment: set ONECAT_RD_NORM=1" in sel.refused["cuda_pack_gemm_rd_norm"]
    monkeypatch.setattr(linear_fused_ops, "RD_NORM", True)
    for m, residual, act in ((17, True, None), (32, False, None), (32, True, "silu_and_mul")):
        assert select(m, w, residual, act).provider.name == "cuda_pack_gemm_rd_norm", (m, residual, act)
    assert "cuda_pack_gemm_rd_norm" in ops.registry.order("rms_norm_linear")
    sel = select(40, w)
    assert sel.provider.name == "unfused"
    assert any("more than 32 rows" in r for r in sel.refused["cuda_pack_gemm_rd_norm"])
    assert any("capability 7.0 < 8.0" in r for r in select(32, w, cap=(7, 0)).refused["cuda_pack_gemm_rd_norm"])
    q4k = random_packed(64, 256, "q4_k", torch.Generator().manual_seed(0))
    assert any("not packed_q4_0" in r for r in select(32, q4k).refused["cuda_pack_gemm_rd_norm"])
    assert select(1, w).provider.name == "cuda_gemv_norm"  # one row stays on the normed GEMV


def test_launch_refuses_what_the_kernels_do_not_take():
    """gemm_launch's normed / GLU forms: the GLU needs the normed tiles, no bias and an even N; the
    normed form exists for r32 / r32w only (checked before anything launches)."""
    w = random_packed(64, 256, "q4_0", torch.Generator().manual_seed(0))
    x, g = torch.zeros(20, 256, dtype=torch.float16), torch.ones(256, dtype=torch.float16)
    with pytest.raises(ValueError, match="GLU behind: needs the normed-input tiles"):
        gemm_ops.gemm_launch(x, w, None, "r32", 1, glu=True)
    with pytest.raises(ValueError, match="GLU behind: needs the normed-input tiles"):
        gemm_ops.gemm_launch(x, w, torch.zeros(64, dtype=torch.float16), "r32", 1, norm=(None, None, g, 1e-6), glu=True)
    with pytest.raises(ValueError, match="no normed-input form"):
        gemm_ops.gemm_launch(x, w, None, "m32", 1, norm=(None, None, g, 1e-6))


def _case(m, n, k, residual, bias, seed):
    gen = torch.Generator().manual_seed(seed)
    w = random_packed(n, k, "q4_0", gen, "cuda")
    x = (torch.randn(m, k, generator=gen) * 2).half().cuda()
    res = torch.randn(m, k, generator=gen).half().cuda() if residual else None
    g = (1 + 0.5 * torch.randn(k, generator=gen)).half().cuda()
    b = torch.randn(n, generator=gen).half().cuda() if bias else None
    return x, res, g, w, b


def _reference(x, res, g, w, b, eps, act):
    h, new_res = (ref.rms_norm(x, g, eps, res) if res is not None else (ref.rms_norm(x, g, eps), x))
    y = h.float() @ w.dequantize().float().t() + (b.float() if b is not None else 0)
    return (ref.silu_and_mul(y.half()) if act else y.half()), new_res


def _err(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


@gpu
@needs_sm80
@pytest.mark.parametrize("m,n,k,residual,bias,act,glu", [
    (17, 6144, 4096, True, False, None, False),            # qkv: r32, split K
    (32, 28672, 4096, True, False, "silu_and_mul", True),   # gate_up: r32w, one split, the GLU in the launch
    (24, 4096, 1024, False, True, None, False),             # the first layer (no residual), bias
    (32, 4096, 14336, True, False, None, False),            # long K: r32w, 8 splits
    (20, 200, 512, True, False, None, False),               # N not a multiple of the tile
    (20, 3072, 4096, True, False, "silu_and_mul", False),   # split K: silu_and_mul after the launch
    (32, 28672, 4096, True, True, "silu_and_mul", False),   # bias: silu_and_mul after the launch
])
def test_against_reference(rd_norm_on, monkeypatch, m, n, k, residual, bias, act, glu):
    seed = SEED + m + n
    x, res, g, w, b = _case(m, n, k, residual, bias, seed)
    launched = []
    real = gemm_ops.gemm_launch
    monkeypatch.setattr(gemm_ops, "gemm_launch", lambda *a, **kw: launched.append(kw["glu"]) or real(*a, **kw))
    with cuda_ops.poison_outputs(), ops.registry.recording() as used:
        y, new_res = ops.rms_norm_linear(x, g, 1e-6, w, res, b, act)
    assert [s.provider.name for s in used if s.problem.op == "rms_norm_linear"] == ["cuda_pack_gemm_rd_norm"]
    assert launched == [glu]
    want, want_res = _reference(x, res, g, w, b, 1e-6, act)
    assert torch.equal(new_res, want_res), "the new residual stream differs"
    assert _err(y, want) <= TOL, f"M={m} N={n} K={k} act={act}: rel err {_err(y, want):.3g} seed={seed}"


@gpu
@needs_sm80
def test_graph_replay(rd_norm_on):
    """Split-K under a CUDA graph: the counters re-arm and each replay's sums of squares are its own."""
    x, res, g, w, _ = _case(32, 4096, 4096, True, False, SEED)
    ops.rms_norm_linear(x, g, 1e-6, w, res)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y, new_res = ops.rms_norm_linear(x, g, 1e-6, w, res)
    for i in range(2):
        gen = torch.Generator().manual_seed(SEED + i)
        x.copy_((torch.randn(32, 4096, generator=gen) * (1 + i)).half())
        graph.replay()
        torch.cuda.synchronize()
        want, want_res = _reference(x, res, g, w, None, 1e-6, None)
        assert torch.equal(new_res, want_res) and _err(y, want) <= TOL, f"replay {i}: seed={SEED}"
