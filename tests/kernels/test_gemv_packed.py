"""The packed GEMV's kernels for 2..4 rows of x (csrc/gemv_packed.cu gemv_rows with MT > 1,
cuda_ops.gemv_mt_launch): the M = 1 kernel's walk with each weight chunk dequantized once for all rows.
CPU: the shape choice and that linear_packed launches them for 2..4 rows only (launches intercepted).
GPU (marked `gpu`): every packed kind, K split over two warps or not, ragged N, a K whose chunks do not
fill the lanes, bias: each row of the output is the M = 1 kernel's (same shape) bit for bit, nothing
left unwritten (outputs poisoned with NaN), and within 2e-3 of the float reference; a CUDA graph of
them. Seed: $ONECAT_TEST_SEED, else random (printed on failure)."""

from __future__ import annotations

import pytest
import torch

from onecat.kernels import cuda_ops
from onecat.kernels.weights import PACKED_FORMATS, random_packed

from .packed_gemm_cases import SEED, TOL, gpu, gpu_inputs, ref_linear, rel_err

K_OF = {"q4_0": 1056, "q4_1": 1056, "q8_0": 1056, "q4_k": 768, "q6_k": 768, "awq": 384}  # a kind's test K


def test_mt_shape():
    assert cuda_ops.gemv_mt_shape(4096) == (4, 1, 2, "n")  # few rows: K over two warps, as M = 1 does
    assert cuda_ops.gemv_mt_shape(14336) == (4, 1, 1, "n")
    for shape in {cuda_ops.gemv_mt_shape(n) for n in (4096, 14336)}:
        assert shape in cuda_ops.GEMV_M1_SHAPES  # the M = 1 kernel of the same walk exists (bits below)


@pytest.fixture
def launches(monkeypatch):
    seen = []
    monkeypatch.setattr(cuda_ops, "_launch", lambda kern, grid, block, *args, **kw: seen.append((kern.name, grid, args)))
    return seen


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 16])
def test_linear_packed_launch(launches, m):
    w = random_packed(200, 256, "q4_0", torch.Generator().manual_seed(1))
    cuda_ops.linear_packed(torch.zeros(m, 256, dtype=torch.float16), w)
    (name, grid, args), = launches
    if m == 1:
        assert name == "gemv_r_q4_0_r4u1k2n"  # the M = 1 kernel gemv_m1_shape picks
    elif m <= 4:
        assert name == f"gemv_r_q4_0_r4u1k2n_t{2 if m == 2 else 4}", name
        assert grid == (-(-200 // 8), 1, 1)  # 4 rows per warp, two K-warps of four: 8 rows per block
        assert args[6] == m  # M: rows past it are neither read past x nor written
    else:
        assert name == "gemv_p_q4_0_m16", name  # (the GEMMs' providers take these rows ahead of it)


@gpu
@pytest.mark.parametrize("kind", PACKED_FORMATS)
def test_rows_match_the_m1_kernel(kind):
    for i, (m, n, bias) in enumerate(((2, 200, True), (3, 8200, False), (4, 200, False), (4, 8200, True))):
        x, w, b = gpu_inputs(kind, m, n, K_OF[kind], bias, SEED + i)
        shape = cuda_ops.gemv_mt_shape(n)
        with cuda_ops.poison_outputs():
            got = cuda_ops.linear_packed(x, w, b)
            for r in range(m):
                one = torch.full((1, n), float("nan"), dtype=torch.float16, device="cuda")
                cuda_ops.gemv_m1_launch(one, x[r:r + 1].contiguous(), w, shape, b)
                assert torch.equal(got[r], one[0]), f"{kind} M={m} N={n} row {r}: not the M = 1 kernel's bits seed={SEED}"
        err = rel_err(got, ref_linear(x, w, b))
        assert err <= TOL, f"{kind} M={m} N={n}: rel err {err:.3g} seed={SEED}"


@gpu
def test_graph_capture():
    x, w, b = gpu_inputs("q4_k", 3, 4096, 4096, True, SEED)
    want = cuda_ops.linear_packed(x, w, b)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s), torch.cuda.graph(g):
        got = cuda_ops.linear_packed(x, w, b)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(got, want)


# -- rms_norm_linear's cuda_gemv_glu: the norm, then the two-row GEMV with the GLU behind ----------
def test_mt_launch_refuses_other_row_counts(launches):
    w = random_packed(200, 256, "q4_0", torch.Generator().manual_seed(1))
    for m, glu in ((1, False), (5, False), (3, True)):
        with pytest.raises(ValueError, match=f"{m} rows of x"):
            cuda_ops.gemv_mt_launch(torch.zeros(m, 100, dtype=torch.float16), torch.zeros(m, 256, dtype=torch.float16),
                                    w, glu=glu)
    assert not launches


def _norm_problem(m, w, act="silu_and_mul", cap=(7, 0), residual=True):
    import dataclasses

    from onecat.kernels import ops
    k = w.shape[1]
    x = torch.zeros(m, k, dtype=torch.float16)
    p = ops.problem("rms_norm_linear", x, torch.ones(k, dtype=torch.float16), 1e-5, w, x if residual else None, None,
                    act)
    return dataclasses.replace(p, device="cuda", capability=cap)


def test_gemv_glu_admission(any_nvrtc):
    from onecat.kernels import linear_fused_ops as lf, ops
    w = random_packed(512, 256, "q4_k", torch.Generator().manual_seed(3))
    assert lf.supports_gemv_glu(_norm_problem(2, w)) == []
    assert lf.supports_gemv_glu(_norm_problem(2, w, residual=False)) == []
    assert any("M=3: the two-row GLU GEMV takes 2 rows" in r for r in lf.supports_gemv_glu(_norm_problem(3, w)))
    assert any("activation None" in r for r in lf.supports_gemv_glu(_norm_problem(2, w, act=None)))
    order = ops.registry.priority["rms_norm_linear"]
    assert order.index("cuda_gemv_norm") < order.index("cuda_pack_gemm_rd") < order.index("cuda_gemv_glu") \
        < order.index("unfused")
    for m, want in ((1, "cuda_gemv_norm"), (2, "cuda_gemv_glu"), (3, "unfused")):
        assert ops.registry.explain(_norm_problem(m, w), check_available=False).provider.name == want, m


@gpu
@pytest.mark.parametrize("kind", PACKED_FORMATS)
def test_gemv_glu_is_the_unfused_route(kind):
    from onecat.kernels import linear_fused_ops as lf
    gen = torch.Generator().manual_seed(SEED)
    for n in (400, 16400):  # 200 outputs (not whole warps of them); past 8192 rows (no K split)
        w = random_packed(n, K_OF[kind], kind, gen, "cuda")
        x, res = (torch.randn(2, K_OF[kind], generator=gen).half().cuda() for _ in range(2))
        nw = (1 + 0.1 * torch.randn(K_OF[kind], generator=gen)).half().cuda()
        for r in (res, None):
            with cuda_ops.poison_outputs():
                got, got_res = lf.rms_norm_linear_gemv_glu(x, nw, 1e-5, w, r, None, "silu_and_mul")
            want, want_res = lf.rms_norm_linear_unfused(x, nw, 1e-5, w, r, None, "silu_and_mul")
            assert torch.equal(got, want) and torch.equal(got_res, want_res), f"{kind} N={n} res={r is not None} seed={SEED}"


@gpu
@pytest.mark.parametrize("neox", [False, True])
@pytest.mark.parametrize("kv", [torch.float16, torch.float8_e4m3fn, torch.float8_e5m2])
def test_gemv_rope_writes_the_unfused_caches(kv, neox):
    """The normed GEMV with the rotary + cache-write epilogue (cuda_gemv_norm, one row: batch-1 decode) gives the
    unfused route's rotated q, residual and cache bytes, for FP16 and FP8 caches (scale 1), GPT-J and NeoX pairs;
    a padding slot (-1) leaves the caches untouched."""
    from onecat.kernels import linear_fused_ops as lf
    from onecat.kernels import ops
    from onecat.kernels.reference import rope_cos_sin
    gen = torch.Generator().manual_seed(SEED)
    hq, hk, d, k = 8, 2, 128, 1024
    w = random_packed((hq + 2 * hk) * d, k, "q4_0", gen, "cuda")
    x, res = (torch.randn(1, k, generator=gen).half().cuda() for _ in range(2))
    nw = (1 + 0.1 * torch.randn(k, generator=gen)).half().cuda()
    cs = rope_cos_sin(d, d, 4096, 10000.0).cuda()
    kc, vc = (torch.randn(16, 16, hk, d, generator=gen).to(kv).cuda() for _ in range(2))
    for slot in (37, -1):
        args = (x, nw, 1e-5, w, res, None, torch.tensor([1234], device="cuda"), d, cs, neox)
        tail = (torch.tensor([slot], device="cuda"), hq, hk)
        assert ops.registry.select(ops.problem("rms_norm_qkv_rotary_cache", *args, kc, vc, *tail)).provider.name \
            == "cuda_gemv_norm"
        kw, vw, kg, vg = kc.clone(), vc.clone(), kc.clone(), vc.clone()
        want, want_res = lf.rms_norm_qkv_rotary_cache_unfused(*args, kw, vw, *tail)
        with cuda_ops.poison_outputs():
            got, got_res = lf.rms_norm_qkv_rotary_cache_cuda(*args, kg, vg, *tail)
        what = f"{kv} neox={neox} slot={slot} seed={SEED}"
        assert torch.equal(got, want) and torch.equal(got_res, want_res), what
        assert torch.equal(kg.view(torch.uint8), kw.view(torch.uint8)), what
        assert torch.equal(vg.view(torch.uint8), vw.view(torch.uint8)), what
        assert torch.equal(kg.view(torch.uint8), kc.view(torch.uint8)) == (slot < 0), what


@gpu
@pytest.mark.parametrize("epilogue", ["plain", "glu", "rope"])
def test_gemv_norm_weight_first_keeps_the_bits(epilogue, monkeypatch):
    """The route's norm-weight-first entries (_gp: the norm weight loaded before the wait, one barrier in the
    prologue's reduction) give the bits of the wait-first form (NORM_WEIGHT_FIRST off): outputs, residual stream
    and FP16 cache rows; both K-split shapes, a K past the preloaded 2 x 256 uint4s; nothing left unwritten."""
    from onecat.kernels import linear_fused_ops as lf
    from onecat.kernels.reference import rope_cos_sin
    gen = torch.Generator().manual_seed(SEED)
    hq, hk, d = 8, 2, 128
    shapes = ((28676, 4096), (6152, 1056), (16400, 5120)) if epilogue != "rope" else (((hq + 2 * hk) * d, 1024),)
    for n, k in shapes:
        w = random_packed(n, k, "q4_0", gen, "cuda")
        assert (w.kind, cuda_ops.gemv_m1_shape("q4_0", n, k, normed=True)) in lf._GP["rn"]
        x, res = (torch.randn(1, k, generator=gen).half().cuda() for _ in range(2))
        nw = (1 + 0.1 * torch.randn(k, generator=gen)).half().cuda()
        cs = rope_cos_sin(d, d, 4096, 10000.0).cuda()
        kc, vc = (torch.randn(16, 16, hk, d, generator=gen).half().cuda() for _ in range(2))
        for r in (res, None):
            outs = []
            for first in (False, True):
                monkeypatch.setattr(lf, "NORM_WEIGHT_FIRST", first)
                kw, vw = kc.clone(), vc.clone()
                with cuda_ops.poison_outputs():
                    if epilogue == "rope":
                        y, y_res = lf.rms_norm_qkv_rotary_cache_cuda(
                            x, nw, 1e-5, w, r, None, torch.tensor([1234], device="cuda"), d, cs, False, kw, vw,
                            torch.tensor([37], device="cuda"), hq, hk)
                    else:
                        y, y_res = lf.rms_norm_linear_cuda(x, nw, 1e-5, w, r, None,
                                                           "silu_and_mul" if epilogue == "glu" else None)
                outs.append((y, y_res, kw, vw))
            (want, want_res, kw, vw), (got, got_res, kg, vg) = outs
            what = f"{epilogue} N={n} K={k} res={r is not None} seed={SEED}"
            assert torch.equal(got, want) and torch.equal(got_res, want_res), what
            assert torch.equal(kg, kw) and torch.equal(vg, vw), what
