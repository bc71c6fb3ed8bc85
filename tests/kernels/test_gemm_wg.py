"""The wgmma GEMM tiles (csrc/gemm_wg.cu, sm_90a only: gemm_ops.WG_TILES w64 / w64b2 and their XB entries, which
take x as x stages): where gemm_shape picks them, their launch (intercepted on the CPU), and on a capability-9.0 GPU
(marked `gpu`) every tile against the float reference, the GLU entries bit-equal to the tile then silu_and_mul, the XB
entries bit-equal to their row-major tiles, the diagnostic and _trace entries, the route under CUDA-graph replay.
The register-direct tiles that share their epilogues are test_gemm_rd.py's. Seed: $ONECAT_TEST_SEED, else random."""

from __future__ import annotations

import pytest
import torch

from onecat.kernels import cuda_ops, gemm_ops, ops
from onecat.kernels.weights import random_packed

from .packed_gemm_cases import (SEED, TOL, check_trace_rows, gpu, gpu_inputs, launches, needs_wg,  # noqa: F401
                                ref_linear, rel_err)


def test_gemm_shape_wgmma_tile():
    """Where gemm_slots lists the wgmma tile (q4_0 on capability 9.0), 33..64 rows of the wide matrices take
    it (one 64-row tile: each weight dequantized once), split as the register-direct tiles at its one block
    per SM; up to 32 rows, and the narrow matrices, keep r32 / r32w."""
    h200 = {"m32": 4, "m64": 3, "m128": 2, "m32w": 4, "m64w": 2, "r32": 3, "r32w": 2, "r64": 2, "r16": 4,
            "r16w": 3, "w64": 1}
    rd = dict(rd=True)
    assert gemm_ops.gemm_shape(64, 28672, 4096, 132, h200, **rd) == ("w64", 1)  # s23: 72.3 -> 63.3 us
    assert gemm_ops.gemm_shape(48, 28672, 4096, 132, h200, **rd) == ("w64", 1)
    assert gemm_ops.gemm_shape(64, 4096, 14336, 132, h200, **rd) == ("w64", 4)  # 32 tiles x 4 <= 132 slots
    assert gemm_ops.gemm_shape(33, 16448, 1024, 132, h200, **rd) == ("w64", 1)
    assert gemm_ops.gemm_shape(32, 28672, 4096, 132, h200, **rd) == ("r32w", 1)
    assert gemm_ops.gemm_shape(64, 6144, 4096, 132, h200, **rd) == ("r32", 2)
    assert gemm_ops.gemm_shape(64, 4096, 4096, 132, h200, **rd)[0] == "r32"
    del h200["w64"]
    assert gemm_ops.gemm_shape(64, 28672, 4096, 132, h200, **rd) == ("r32w", 1)


def test_gemm_shape_two_per_sm_wgmma_tile():
    """Where gemm_slots also lists w64b2 (two blocks per SM), a w64 grid past one wave at one block per SM takes
    it unsplit (gate_up: 224 tiles on 132 SMs, s39 59.0 -> 48.8 us at M 64; the q4_0 LM head's 1002 tiles, s40
    216.6 -> 176.3 us); a grid that fits one wave at one per SM (down, 32 tiles x 4 splits) keeps w64, and
    without w64b2 in `resident` nothing moves."""
    h200 = {"r32": 3, "r32w": 2, "r64": 2, "r16": 4, "r16w": 3, "w64": 1, "w64b2": 2}
    rd = dict(rd=True)
    assert gemm_ops.gemm_shape(64, 28672, 4096, 132, h200, **rd) == ("w64b2", 1)
    assert gemm_ops.gemm_shape(48, 28672, 4096, 132, h200, **rd) == ("w64b2", 1)
    assert gemm_ops.gemm_shape(64, 4096, 14336, 132, h200, **rd) == ("w64", 4)
    assert gemm_ops.gemm_shape(64, 16896, 4096, 132, h200, **rd) == ("w64", 1)  # 132 tiles: one wave at one per SM
    assert gemm_ops.gemm_shape(64, 16896 + 128, 4096, 132, h200, **rd) == ("w64b2", 1)
    assert gemm_ops.gemm_shape(64, 2 * 16896 + 128, 4096, 132, h200, **rd) == ("w64b2", 1)  # past 264 tiles
    assert gemm_ops.gemm_shape(64, 128256, 4096, 132, h200, **rd) == ("w64b2", 1)  # the LM head
    no_b2 = {t: r for t, r in h200.items() if t != "w64b2"}
    assert gemm_ops.gemm_shape(64, 128256, 4096, 132, no_b2, **rd) == ("w64", 1)
    assert gemm_ops.gemm_shape(64, 28672, 4096, 132, no_b2, **rd) == ("w64", 1)
    assert gemm_ops.gemm_shape(32, 28672, 4096, 132, h200, **rd) == ("r32w", 1)


def test_wgmma_launch(launches, monkeypatch):
    """The wgmma tile's entry (GLU on request), its grid and 192-thread block, the planes it reads; refused
    before any launch off capability 9.0 or on another format."""
    gen = torch.Generator().manual_seed(5)
    n, k = 256, 1024
    w, x = random_packed(n, k, "q4_0", gen), torch.zeros(40, k, dtype=torch.float16)
    refused = r"tile w64: q4_0 K=1024 on cpu \(needs q4_0 with K % 128 == 0 on capability 9.0"
    with pytest.raises(ValueError, match=refused):
        gemm_ops.gemm_launch(x, w, None, "w64", 1)
    assert launches == []
    monkeypatch.setattr(gemm_ops, "wg_fits", lambda kind, k, device: kind == "q4_0")
    gemm_ops.gemm_launch(x, w, None, "w64", 2)
    gemm_ops.gemm_launch(x, w, None, "w64", 1, glu=True)
    (name, grid, args), (gname, ggrid, gargs) = launches
    assert name == "gemm_wg_q4_0_w64" and grid == (n // 128, 1, 2) and gname == "gemm_wg_q4_0_w64_glu"
    assert ggrid == (n // 128, 1, 1) and gemm_ops.WG_TILES["w64"].threads == 192
    for a in (args, gargs):
        assert a[2] == w.q.data_ptr() and a[4] == w.meta.data_ptr() and a[8:11] == (40, n, k)
    with pytest.raises(ValueError, match="tile w64: q4_k"):
        gemm_ops.gemm_launch(x, random_packed(n, k, "q4_k", gen), None, "w64", 1)
    assert len(launches) == 2


@gpu
@needs_wg
@pytest.mark.parametrize("tile", ["w64", "w64b2"])
def test_wgmma_tile(tile):
    """gemm_wg_q4_0_w64 (and w64b2, its two-per-SM form) against the float reference: 33..64 rows (ragged: rows
    past M read row M - 1), N not a multiple of the 128-feature tile nor of 8, K from one step to 4096, bias,
    splits incl. uneven (w64 bit-equal to w64b2: their split-K merges batch their loads differently, in the same
    order); the GLU entry bit-equal to the tile then silu_and_mul; the route (gate_up-sized, 48 rows: w64b2) under
    CUDA-graph replay."""
    for m, n, k, bias in ((33, 200, 128, True), (64, 4096, 4096, False), (48, 1032, 1280, True),
                          (40, 16448, 1024, False), (57, 83, 768, False)):
        x, w, b = gpu_inputs("q4_0", m, n, k, bias, SEED + m + n)
        ref = ref_linear(x, w, b)
        for splits in (1, 3, 8):
            with cuda_ops.poison_outputs():
                got = gemm_ops.gemm_launch(x, w, b, tile, splits)
            err = rel_err(got, ref)
            assert err <= TOL, f"{tile} M={m} N={n} K={k} x{splits}: rel err {err:.3g} seed={SEED}"
            if tile == "w64":  # the same partials, merged 11 slots x 2 splits at a time there, 4 x 4 in w64b2
                assert torch.equal(got, gemm_ops.gemm_launch(x, w, b, "w64b2", splits)), (m, n, k, splits)
    for m, n, k in ((64, 28672, 4096), (37, 512, 768)):
        x, w, _ = gpu_inputs("q4_0", m, n, k, False, SEED + m)
        for splits in (1, 3):
            want = ops.silu_and_mul(gemm_ops.gemm_launch(x, w, None, tile, splits))
            with cuda_ops.poison_outputs():
                got = gemm_ops.gemm_launch(x, w, None, tile, splits, glu=True)
            assert got.shape == (m, n // 2) and torch.equal(got, want), (m, n, k, splits)
    if tile != "w64b2":
        return
    x, w, b = gpu_inputs("q4_0", 48, 28672, 4096, False, SEED)  # the route: 224 tiles, past one wave at one per SM
    assert gemm_ops.gemm_shape(48, 28672, 4096, *gemm_ops.gemm_slots("q4_0", x.device), rd=True)[0] == "w64b2"
    g = torch.cuda.CUDAGraph()
    ops.linear(x, w, b)
    with torch.cuda.graph(g):
        out = ops.linear(x, w, b)
    for i in range(2):
        x.copy_(torch.randn(48, 4096, generator=torch.Generator().manual_seed(SEED + i)).half())
        g.replay()
        torch.cuda.synchronize()
        assert rel_err(out, ref_linear(x, w, b)) <= TOL, i


@gpu
@needs_wg
@pytest.mark.parametrize("tile", ["w64", "w64b2"])
def test_wgmma_xl1_diagnostic(tile, monkeypatch):
    """The XL1 entries (tools/gpu/gemm_xl1.py) launch as the route's: with one K step per split they stage the
    same x and give its output bit for bit; with more steps they reuse the first step's x (a different output)."""
    x, w, _ = gpu_inputs("q4_0", 64, 512, 1024, False, SEED + 7)
    want = {s: gemm_ops.gemm_launch(x, w, None, tile, s) for s in (8, 1)}  # K 1024 = 8 steps: 1 a split, or 8
    monkeypatch.setitem(gemm_ops._WG, tile, gemm_ops.WG_XL1[tile])
    assert torch.equal(gemm_ops.gemm_launch(x, w, None, tile, 8), want[8])
    assert not torch.equal(gemm_ops.gemm_launch(x, w, None, tile, 1), want[1])


@gpu
@needs_wg
def test_wgmma_diagnostics_run(monkeypatch):
    """w64b2's diagnostics (gemm_ops.WG_DIAG; s49's scripts/_s49_diag.py) run to the end in the route's launch, unsplit
    and split-K, and differ from the route (no W / no x by design); _nw's output stays finite (its words' weights are
    at most 1/2); _qd's q x d plus the -8 d x (block sums of x) it leaves out is the GEMM (its FP16 output rounded
    before that term is added back, hence the looser bound)."""
    x, w, _ = gpu_inputs("q4_0", 64, 1024, 1024, False, SEED + 9)
    for splits in (1, 4):
        want = gemm_ops.gemm_launch(x, w, None, "w64b2", splits)
        for diag, kern in gemm_ops.WG_DIAG.items():
            with monkeypatch.context() as mp:
                mp.setitem(gemm_ops._WG, "w64b2", kern)
                got = gemm_ops.gemm_launch(x, w, None, "w64b2", splits)
            torch.cuda.synchronize()
            assert got.shape == want.shape and not torch.equal(got, want), (diag, splits)
            if diag == "nw":
                assert torch.isfinite(got).all(), splits
            if diag == "qd":
                d = w.meta.view(torch.float16).reshape(w.shape[0], -1).float()  # [N, K / 32] block scales
                sums = x.float().reshape(x.shape[0], -1, 32).sum(-1)  # [M, K / 32]
                err = rel_err(got.float() - 8 * sums @ d.t(), ref_linear(x, w, None))
                assert err <= 5e-3, (splits, err)


@gpu
@needs_wg
def test_wgmma_bulk_x_stages():
    """The XB entries (x's stages by bulk copies from gemm_ops.wg_x_stages) give their tile's output bit for bit:
    w64b2 and w64 plain, ragged rows, one and several row tiles, unsplit and split-K (uneven); the GLU entry, and the
    GLU entry writing its output as x stages (_glu_xb_xs: read back by XStages.tensor)."""
    for m, n, k in ((64, 4096, 4096), (37, 1024, 1280), (100, 512, 768)):
        x, w, b = gpu_inputs("q4_0", m, n, k, True, SEED + 3 * m)
        stages = gemm_ops.XStages.of(x)
        for splits in (1, 3):
            want = gemm_ops.gemm_launch(x, w, b, "w64b2", splits)
            with cuda_ops.poison_outputs():
                got = gemm_ops.gemm_launch(stages, w, b, "w64b2", splits)
            assert torch.equal(got, want), (m, n, k, splits)
            want = gemm_ops.gemm_launch(x, w, b, "w64", splits)  # w64's plain XB entry (the last layer's down)
            with cuda_ops.poison_outputs():
                got = gemm_ops.gemm_launch(stages, w, b, "w64", splits)
            assert torch.equal(got, want), (m, n, k, splits, "w64")
        if n % 256 == 0:  # the GLU entry (linear_norm_ops routes it behind o's _norm entry)
            want = gemm_ops.gemm_launch(x, w, None, "w64b2", 1, glu=True)
            with cuda_ops.poison_outputs():
                got = gemm_ops.gemm_launch(stages, w, None, "w64b2", 1, glu=True)
                got_xs = gemm_ops.gemm_launch(stages, w, None, "w64b2", 1, glu=True, out_stages=True)
            assert torch.equal(got, want), (m, n, k, "glu")
            # _glu_xb_xs: the same output written as down's x stages (every real pair where wg_x_stages puts it)
            assert isinstance(got_xs, gemm_ops.XStages) and (got_xs.m, got_xs.k) == (m, n // 2)
            assert torch.equal(got_xs.tensor(), want), (m, n, k, "glu_xs")


@gpu
@needs_wg
def test_wgmma_traced():
    """The wgmma tiles' _trace entries (tools/gpu/gemm_trace.py) give the route entries' output bit for bit, unsplit
    and split-K, at 64 and at ragged rows; every block records entry <= each point <= end (the count only when
    split)."""
    for m in (64, 37):
        x, w, b = gpu_inputs("q4_0", m, 6144, 4096, True, SEED + m)
        for tile, t in gemm_ops.WG_TILES.items():
            for splits in (1, 4):
                tr = torch.zeros(4096, 16, dtype=torch.int64, device="cuda")
                want = gemm_ops.gemm_launch(x, w, b, tile, splits)
                got = gemm_ops.gemm_launch(x, w, b, tile, splits, trace=tr)
                assert torch.equal(got, want), (m, tile, splits)
                check_trace_rows(tr, -(-6144 // t.bn) * -(-m // t.bm) * splits, splits, tile)
