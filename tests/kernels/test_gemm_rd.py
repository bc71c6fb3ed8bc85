"""The register-direct packed GEMM (csrc/gemm_rd.cu, provider `cuda_pack_gemm_rd`: linear and the GLU
route of rms_norm_linear at 3..64 rows of q4_0 / q4_k / q6_k / awq on sm_80+; on capability 9.0 its q4_0
wide matrices past 32 rows on the wgmma tile, csrc/gemm_wg.cu). CPU: admission on fake
devices and refusal reasons, the tile / split-K choice, the launch per format (intercepted). GPU (marked
`gpu`, and sm_80+): every tile and split against the float reference (ragged rows and N, AWQ groups of
32 / 64 / 128), the GLU entries bit-equal to linear then silu_and_mul, the rotary entries bit-equal to
linear then rotary_and_cache, the traced entries, the route incl. CUDA-graph replay. Seed:
$ONECAT_TEST_SEED, else random (printed on failure)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from onecat.kernels import cuda_ops, gemm_ops, linear_fused_ops, ops
from onecat.kernels.weights import pack_awq, random_awq, random_packed

from .packed_gemm_cases import (SEED, TOL, check_trace_rows, explain, gpu, gpu_inputs, launches,  # noqa: F401
                                linear_problem, needs_rd, ref_linear, rel_err, small)


def test_register_direct_admission(small, any_nvrtc):
    """cuda_pack_gemm_rd: sm_80+, packed q4_0 / awq (K % 128 == 0; AWQ groups of a power of two) or q4_k /
    q6_k (K % 256), 3..64 rows; every refusal says why and the shared-memory GEMM takes the call instead (a
    V100 keeps it)."""
    x, w = torch.zeros(32, 256, dtype=torch.float16), small["q4_0"]

    def reasons(p):
        return gemm_ops.supports_linear_packed_gemm_rd(p)

    assert reasons(linear_problem(x, w, cap=(8, 0))) == [] and reasons(linear_problem(x, w, cap=(9, 0))) == []
    assert "capability 7.0 < 8.0 (mma.sync m16n8k16)" in reasons(linear_problem(x, w, cap=(7, 0)))
    for kind in ("q4_k", "q6_k", "awq"):
        assert reasons(linear_problem(x, small[kind], cap=(9, 0))) == [], kind
    for kind in ("q4_1", "q8_0"):
        assert f"weight format packed_{kind} not packed_q4_0 / packed_q4_k / packed_q6_k / packed_awq" in reasons(
            linear_problem(x, small[kind], cap=(9, 0)))
    w96 = pack_awq(*random_awq(80, 384, 96, torch.Generator().manual_seed(0)), 96)  # groups of 3 chunks
    x384 = torch.zeros(32, 384, dtype=torch.float16)
    assert reasons(linear_problem(x384, w96, cap=(9, 0))) == ["AWQ group size 96 not a power of two >= 32"]
    assert explain(linear_problem(x384, w96, cap=(9, 0))).provider.name == "cuda_pack_gemm"
    assert any("the register-direct tiles take 3..64" in r
               for r in reasons(linear_problem(torch.zeros(65, 256, dtype=torch.float16), w, cap=(9, 0))))
    assert "K=288 not a multiple of 128 (the K-step)" in reasons(linear_problem(x, w, cap=(9, 0), k=288))
    assert "bias dtype float32 not float16" in reasons(linear_problem(x, w, torch.zeros(80), cap=(9, 0)))
    sel = explain(linear_problem(x, w, cap=(7, 0)))
    assert sel.provider.name == "cuda_pack_gemm" and any("< 8.0" in r for r in sel.refused["cuda_pack_gemm_rd"])
    sel = explain(linear_problem(x, w, cap=(9, 0)))
    assert sel.provider.name == "cuda_pack_gemm_rd" and sel.refused["cuda_pack_gemm"] == [
        "lower priority than cuda_pack_gemm_rd"]


def test_glu_epilogue_admission(any_nvrtc):
    """rms_norm_linear with silu_and_mul at 3..64 rows of a q4_0 [gate | up] on sm_80+: cuda_pack_gemm_rd
    (the norm, then the GEMM with the GLU epilogue); a V100, a bias or halves that are not whole tiles
    keep the unfused route, and the report says why."""
    gen = torch.Generator().manual_seed(1)
    x, w = torch.zeros(32, 256, dtype=torch.float16), random_packed(256, 256, "q4_0", gen)
    norm = torch.ones(256, dtype=torch.float16)

    def select(x, w, cap, bias=None, act="silu_and_mul", **override):
        p = ops.problem("rms_norm_linear", x, norm, 1e-5, w, x, bias, act)
        params = dict(p.params) | override
        return explain(dataclasses.replace(p, device="cuda", capability=cap, params=tuple(sorted(params.items()))))

    sel = select(x, w, (9, 0))
    assert sel.provider.name == "cuda_pack_gemm_rd", sel.refused
    assert any("M=17-64: the normed-input GEMV is for one row" in r for r in sel.refused["cuda_gemv_norm"])
    sel = select(x, w, (7, 0))
    assert sel.provider.name == "unfused" and any("< 8.0" in r for r in sel.refused["cuda_pack_gemm_rd"])
    for refused, why in ((select(x, w, (9, 0), act=None), "activation None: the GEMM epilogue is silu_and_mul only"),
                         (select(x, w, (9, 0), bias=torch.zeros(256, dtype=torch.float16)),
                          "bias with an activation: the GLU epilogue takes none"),
                         (select(x, random_packed(192, 256, "q4_0", gen), (9, 0)),
                          "N=192: the [gate | up] halves are not whole tiles (N / 2 % 64)")):
        assert refused.provider.name != "cuda_pack_gemm_rd"
        assert any(why in r for r in refused.refused["cuda_pack_gemm_rd"]), refused.refused["cuda_pack_gemm_rd"]
    one = ops.problem("rms_norm_linear", torch.zeros(1, 256, dtype=torch.float16), norm, 1e-5, w, None, None,
                      "silu_and_mul")
    assert any("the register-direct tiles take 3..64" in r for r in linear_fused_ops.supports_gemm_glu(
        dataclasses.replace(one, device="cuda", capability=(9, 0))))


def _qkv_args(m, k, hq, hk, d, rot, kind="q4_0", neox=False, device="cpu", seed=0, bias=False, blocks=8, bs=16):
    """rms_norm_qkv_rotary_cache's arguments: x, norm, eps, [q | k | v] weight, residual, bias, positions, head_dim,
    cos_sin, neox, caches [blocks, bs, hk, d], slot_mapping (distinct slots, the last row a padding slot -1), heads."""
    from onecat.kernels.reference import rope_cos_sin
    gen = torch.Generator().manual_seed(seed)
    n = (hq + 2 * hk) * d
    w = random_packed(n, k, kind, gen, device)
    x, res = (torch.randn(m, k, generator=gen).half().to(device) for _ in range(2))
    norm = (torch.rand(k, generator=gen) + 0.5).half().to(device)
    b = torch.randn(n, generator=gen).half().to(device) if bias else None
    pos = torch.randint(0, 4096, (m,), generator=gen).to(device)
    slots = torch.randperm(blocks * bs, generator=gen)[:m].to(device)
    slots[-1] = -1
    kc, vc = (torch.randn(blocks, bs, hk, d, generator=gen).half().to(device) for _ in range(2))
    return [x, norm, 1e-5, w, res, b, pos, d, rope_cos_sin(d, rot, 4096, 10000.0).to(device), neox, kc, vc, slots,
            hq, hk]


def test_rope_epilogue_admission(any_nvrtc):
    """rms_norm_qkv_rotary_cache at 3..64 rows on sm_80+, GPT-J rotary and an FP16 or FP8 (E4M3 / E5M2) cache:
    cuda_pack_gemm_rd (the norm, then the GEMM with the rotary + cache-write epilogue); one row keeps the normed
    GEMV (either cache too), and NeoX pairs, another cache dtype, a V100 or a rotary width off the 8-column
    groups keep the unfused route, the report saying why."""
    def select(args, cap=(9, 0), **override):
        p = ops.problem("rms_norm_qkv_rotary_cache", *args)
        params = dict(p.params) | override
        return explain(dataclasses.replace(p, device="cuda", capability=cap, params=tuple(sorted(params.items()))))

    args = _qkv_args(32, 256, 4, 2, 64, 64)
    sel = select(args)
    assert sel.provider.name == "cuda_pack_gemm_rd", sel.refused
    assert any("the normed-input GEMV is for one row" in r for r in sel.refused["cuda_gemv_norm"])
    assert select(_qkv_args(1, 256, 4, 2, 64, 64)).provider.name == "cuda_gemv_norm"
    for kv in ("float8_e4m3fn", "float8_e5m2"):  # FP8 caches: written by both epilogues
        assert select(args, kv_dtype=kv).provider.name == "cuda_pack_gemm_rd"
        assert select(_qkv_args(1, 256, 4, 2, 64, 64), kv_dtype=kv).provider.name == "cuda_gemv_norm"
    for sel, why in ((select(args, neox=True), "NeoX rotary: pairs (j, j + rot / 2) span column groups"),
                     (select(args, kv_dtype="bfloat16"), "KV cache dtype bfloat16 not float16 / float8_e4m3fn / "
                                                         "float8_e5m2"),
                     (select(args, cap=(7, 0)), "capability 7.0 < 8.0"),
                     (select(args, rotary_dim=36), "head_dim 64 / rotary_dim 36: not multiples of 8"),
                     (select(args, pos_dtype="int32"), "positions / slot_mapping dtype int32 / int64 not int64")):
        assert sel.provider.name == "unfused"
        assert any(why in r for r in sel.refused["cuda_pack_gemm_rd"]), sel.refused["cuda_pack_gemm_rd"]


def test_rope_launch(launches, monkeypatch):
    """The _rope entry of the weight's format on the tile linear would take (r32w where the wgmma tile would):
    the GEMM's arguments, then positions, slots, cos / sin, the caches and the sizes; q_size wide out."""
    monkeypatch.setattr(gemm_ops, "rd_fits", lambda kind, k, device: True)
    monkeypatch.setattr(gemm_ops, "gemm_slots", lambda kind, device: (132, {"r32": 3, "r32w": 2, "w64": 1}))
    x, norm, eps, w, res, b, pos, d, cs, neox, kc, vc, slots, hq, hk = _qkv_args(40, 256, 4, 2, 64, 32)
    rope = gemm_ops.RopeCache(pos, slots, cs, kc, vc, hq * d, hk * d, d, 32)
    q = gemm_ops.linear_packed_gemm_rd(x, w, b, rope=rope)
    (name, grid, args), = launches
    assert q.shape == (40, hq * d) and name == "gemm_rd_q4_0_r32_rope" and grid == (512 // 64, 2, 1)
    assert args[8:11] == (40, 512, 256) and args[5] == 0
    assert args[13:16] == (0, 0, 0.0)  # no RowNorm (linear_norm_ops passes one)
    assert args[16:21] == tuple(t.data_ptr() for t in (pos, slots, cs, kc, vc)) and args[21:] == (256, 128, 64, 32, 0)
    for code, dt in ((1, torch.float8_e4m3fn), (2, torch.float8_e5m2)):  # FP8 caches: the element code last
        k8, v8 = kc.to(dt), vc.to(dt)
        gemm_ops.linear_packed_gemm_rd(x, w, b, rope=gemm_ops.RopeCache(pos, slots, cs, k8, v8, hq * d, hk * d, d, 32))
        assert launches.pop()[2][21:] == (256, 128, 64, 32, code)
    with pytest.raises(ValueError, match="caches torch.float8_e4m3fn / torch.float16"):
        gemm_ops.linear_packed_gemm_rd(x, w, b, rope=gemm_ops.RopeCache(pos, slots, cs, kc.to(torch.float8_e4m3fn), vc,
                                                                         hq * d, hk * d, d, 32))
    wide = random_packed(16448, 256, "q4_0", torch.Generator().manual_seed(1))
    gemm_ops.linear_packed_gemm_rd(x, wide, rope=rope)
    assert launches[1][0] == "gemm_rd_q4_0_r32w_rope"
    with pytest.raises(ValueError, match="rotary epilogue: tile w64"):
        gemm_ops.gemm_launch(x, wide, None, "w64", 1, rope=rope)
    assert len(launches) == 2
    # the provider: the norm (here the CPU reference), then the same launch with its RopeCache
    q, _ = linear_fused_ops.rms_norm_qkv_rotary_cache_gemm(x, norm, eps, w, res, b, pos, d, cs, neox, kc, vc, slots,
                                                           hq, hk)
    assert q.shape == (40, hq * d) and launches[2][0] == "gemm_rd_q4_0_r32_rope" and launches[2][2][13:] == args[13:]


def test_gemm_shape_register_direct():
    """rd (q4_0, sm_80+): r16 / r16w up to 16 rows, r32 / r32w (>= WIDE_MIN_N rows or K >= RD_LONG_K)
    up to 64 rows (two row tiles past 32), at most RD_MAX_SPLITS splits (RD_LONG_K_SPLITS for r32w on long K), each >= 4
    K-steps of 128, no second wave; beyond 64 rows the shared-memory tiles."""
    h200 = {"m32": 4, "m64": 3, "m128": 2, "m32w": 4, "m64w": 2, "r32": 3, "r32w": 2, "r64": 2}
    rd = dict(rd=True)
    assert gemm_ops.gemm_shape(32, 6144, 4096, 132, h200, **rd) == ("r32", 4)  # the H200's best (s11)
    assert gemm_ops.gemm_shape(32, 4096, 4096, 132, h200, **rd) == ("r32", 4)
    assert gemm_ops.gemm_shape(32, 28672, 4096, 132, h200, **rd) == ("r32w", 1)
    assert gemm_ops.gemm_shape(17, 4096, 14336, 132, h200, **rd) == ("r32w", 8)  # the H200's best (s11, s12)
    # the H200's best at M 48 and 64 (s16)
    assert gemm_ops.gemm_shape(64, 6144, 4096, 132, h200, **rd) == ("r32", 2)
    assert gemm_ops.gemm_shape(48, 4096, 4096, 132, h200, **rd) == ("r32", 3)
    assert gemm_ops.gemm_shape(64, 28672, 4096, 132, h200, **rd) == ("r32w", 1)
    assert gemm_ops.gemm_shape(64, 4096, 14336, 132, h200, **rd) == ("r32w", 4)
    assert gemm_ops.gemm_shape(40, 4096, 512, 132, h200, **rd) == ("r32", 1)  # 4 K-steps: no split
    assert gemm_ops.gemm_shape(65, 4096, 4096, 132, h200, **rd)[0] not in gemm_ops.RD_TILES
    # up to 16 rows the one-row-tile twins (s18: batch 3 / 4 / 8 steps 3-8% faster than on r32 / r32w)
    h200 |= {"r16": 4, "r16w": 3}
    assert gemm_ops.gemm_shape(4, 6144, 4096, 132, h200, **rd) == ("r16", 4)
    assert gemm_ops.gemm_shape(16, 28672, 4096, 132, h200, **rd) == ("r16w", 1)
    assert gemm_ops.gemm_shape(8, 4096, 14336, 132, h200, **rd) == ("r16w", 8)
    for m in range(3, 17):
        for n, k in ((4096, 4096), (28672, 4096), (4096, 14336)):
            tile, s = gemm_ops.gemm_shape(m, n, k, 132, h200, **rd)
            assert tile == ("r16w" if n >= 16384 or k >= gemm_ops.RD_LONG_K else "r16"), (m, n, k, tile)
    for m in range(17, 65):
        for n, k in ((80, 128), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096)):
            tile, s = gemm_ops.gemm_shape(m, n, k, 132, h200, **rd)
            t = gemm_ops.RD_TILES[tile]
            long_k = k >= gemm_ops.RD_LONG_K
            assert t.bm == 32 and (t.bn == 128) == (n >= 16384 or long_k), (m, n, k, tile)
            cap = gemm_ops.RD_LONG_K_SPLITS if long_k else gemm_ops.RD_MAX_SPLITS
            assert 1 <= s <= cap and (s == 1 or k // t.bk >= 4 * s)
            assert s == 1 or s * -(-n // t.bn) * -(-m // t.bm) <= 132 * h200[tile]


@pytest.mark.parametrize("kind,group", [("q4_0", 32), ("q4_k", 32), ("q6_k", 32), ("awq", 128), ("awq", 64)])
def test_register_direct_launch(launches, monkeypatch, kind, group):
    """The register-direct entry of the weight's format, its grid, and the planes it reads: q6_k's high
    bits (qh), AWQ's chunks per group (gchunks); the GLU entry on request. (The CPU stands in for an
    sm_80+ device: rd_fits is forced; the kernels themselves are checked on the GPU.)"""
    monkeypatch.setattr(gemm_ops, "rd_fits", lambda kind, k, device: True)
    gen = torch.Generator().manual_seed(4)
    n, k = 256, 1024
    w = pack_awq(*random_awq(n, k, group, gen), group) if kind == "awq" else random_packed(n, k, kind, gen)
    x = torch.zeros(40, k, dtype=torch.float16)
    gemm_ops.gemm_launch(x, w, None, "r32", 2)
    gemm_ops.gemm_launch(x, w, None, "r16w", 1, glu=True)
    (name, grid, args), (gname, ggrid, gargs) = launches
    assert name == f"gemm_rd_{kind}_r32" and grid == (n // 64, 2, 2)  # 40 rows: two 32-row tiles high
    assert gname == f"gemm_rd_{kind}_r16w_glu" and ggrid == (n // 128, 3, 1)
    for a in (args, gargs):
        assert a[2] == w.q.data_ptr() and a[4] == w.meta.data_ptr() and (a[3] != 0) == (kind == "q6_k")
        assert a[8:12] == (40, n, k, group // 32)
    if kind != "q4_0":  # r64 (an A/B tile) is q4_0's only
        with pytest.raises(ValueError, match="a tile other than r64"):
            gemm_ops.gemm_launch(x, w, None, "r64", 1)
        assert len(launches) == 2


def test_trace_only_register_direct_and_wgmma(launches, small):
    """A trace buffer with a tile that has no traced entry (the shared-memory tiles, q4_k's register-direct
    ones) is refused before any launch."""
    x = torch.zeros(20, 256, dtype=torch.float16)
    with pytest.raises(ValueError, match="only the register-direct and wgmma q4_0 tiles"):
        gemm_ops.gemm_launch(x, small["q4_0"], None, "m32", 1, trace=torch.zeros(64, 16, dtype=torch.int64))
    assert launches == []


@gpu
@needs_rd
@pytest.mark.parametrize("kind", ["q4_0", "q4_k", "q6_k", "awq", "awq_g32", "awq_g64"])
def test_register_direct_tiles(kind):
    """gemm_rd_<kind>_<tile> against the float reference: M up to 64 (ragged; 32-row tiles two high), N
    not a multiple of the tile (128 / 64) nor of 8, K from one step (q4_k: one super-block, two steps) to
    4096, bias, splits incl. uneven (q4_k: splits starting on odd steps, the second half of a super-block);
    AWQ with groups of 128 (one K-step of a row), 32 and 64 weights."""
    group = {"awq_g32": 32, "awq_g64": 64}.get(kind)
    for m, n, k, bias in ((17, 72, 256, True), (32, 4096, 4096, False), (25, 200, 1280, True), (64, 83, 768, False),
                          (40, 6144, 4096, True), (33, 136, 256, False), (2, 4096, 4096, True), (5, 88, 512, False),
                          (16, 6144, 4096, False), (3, 96, 2816, True)):
        if kind in ("q4_k", "q6_k") and k % 256:
            k += 128
        if kind.startswith("awq"):  # AutoAWQ packs 8 output features per int32
            n = -(-n // 8) * 8
        x, w, b = gpu_inputs(kind[:3] if group else kind, m, n, k, bias, SEED + m + n)
        if group:
            w = pack_awq(*random_awq(n, k, group, torch.Generator().manual_seed(SEED + m)), group).to("cuda")
        ref = ref_linear(x, w, b)
        for tile in gemm_ops.rd_tiles(w.kind):  # 32-row tiles two high past 32 rows
            for splits in (1, 3, 8):
                with cuda_ops.poison_outputs():
                    got = gemm_ops.gemm_launch(x, w, b, tile, splits)
                err = rel_err(got, ref)
                assert err <= TOL, f"{kind} M={m} N={n} K={k} {tile} x{splits}: rel err {err:.3g} seed={SEED}"
    if kind == "q4_0":
        x, w, _ = gpu_inputs("q4_0", 20, 64, 96, False, SEED)
        with pytest.raises(ValueError, match="K % 128"):
            gemm_ops.gemm_launch(x, w, None, "r32", 1)
    elif kind == "awq":
        x = torch.randn(20, 384, generator=torch.Generator().manual_seed(SEED)).half().cuda()
        w = pack_awq(*random_awq(64, 384, 96, torch.Generator().manual_seed(SEED)), 96).to("cuda")
        with pytest.raises(ValueError, match="power of two"):
            gemm_ops.gemm_launch(x, w, None, "r32", 1)
    elif kind == "q4_k":
        x, w, _ = gpu_inputs("q4_k", 20, 64, 256, False, SEED)
        with pytest.raises(ValueError, match="a tile other than r64"):
            gemm_ops.gemm_launch(x, w, None, "r64", 1)


@gpu
@needs_rd
@pytest.mark.parametrize("kind", ["q4_0", "q4_k", "q6_k", "awq"])
def test_register_direct_glu(kind):
    """The _glu entries give linear then silu_and_mul bit for bit (ragged rows, both halves' tiles at the
    matrix's end, splits incl. uneven), within the float reference's tolerance; the GLU route of
    rms_norm_linear equals the unfused one, eager and under CUDA-graph replay; a matrix whose halves
    are not whole tiles is refused before any launch."""
    for m, n, k in ((17, 256, 256), (32, 28672, 4096), (40, 384, 1280), (64, 512, 768), (3, 256, 512), (16, 28672, 4096)):
        k += 256 if kind in ("q4_k", "q6_k") and k % 256 else 0
        x, w, _ = gpu_inputs(kind, m, n, k, False, SEED + m + n)
        d = n // 2
        y = ref_linear(x, w, None).half().float()
        ref = torch.nn.functional.silu(y[:, :d]) * y[:, d:]
        for tile in gemm_ops.rd_tiles(kind):
            if not gemm_ops.glu_fits(tile, n):
                continue
            for splits in (1, 3):
                want = ops.silu_and_mul(gemm_ops.gemm_launch(x, w, None, tile, splits))
                with cuda_ops.poison_outputs():
                    got = gemm_ops.gemm_launch(x, w, None, tile, splits, glu=True)
                assert got.shape == (m, d) and torch.equal(got, want), (m, n, k, tile, splits)
                assert rel_err(got, ref) <= TOL, (m, n, k, tile, splits)
    x, w, _ = gpu_inputs(kind, 20, 200, 256, False, SEED)  # halves of 100 rows: no tile's half divides them
    with pytest.raises(ValueError, match="packed GEMM GLU"):
        gemm_ops.gemm_launch(x, w, None, "r32", 1, glu=True)
    gen = torch.Generator().manual_seed(SEED)
    x, w, _ = gpu_inputs(kind, 32, 28672, 4096, False, SEED)
    res = torch.randn(32, 4096, generator=gen).half().cuda()
    norm = (torch.rand(4096, generator=gen) + 0.5).half().cuda()
    p = ops.problem("rms_norm_linear", x, norm, 1e-5, w, res, None, "silu_and_mul")
    assert ops.registry.select(p).provider.name == "cuda_pack_gemm_rd"
    h, want_res = ops.rms_norm(x, norm, 1e-5, res)
    want = ops.silu_and_mul(ops.linear(h, w))
    got, got_res = ops.rms_norm_linear(x, norm, 1e-5, w, res, None, "silu_and_mul")
    assert torch.equal(got, want) and torch.equal(got_res, want_res)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out, _ = ops.rms_norm_linear(x, norm, 1e-5, w, res, None, "silu_and_mul")
    for i in range(2):
        x.copy_(torch.randn(32, 4096, generator=torch.Generator().manual_seed(SEED + i)).half())
        g.replay()
        torch.cuda.synchronize()
        h, _ = ops.rms_norm(x, norm, 1e-5, res)
        assert torch.equal(out, ops.silu_and_mul(ops.linear(h, w))), i


def _bits(t: torch.Tensor) -> torch.Tensor:
    """A cache's bytes (torch.equal has no FP8 kernel on every build)."""
    return t.view(torch.uint8)


@gpu
@needs_rd
@pytest.mark.parametrize("kind,kv", [("q4_0", torch.float16), ("q4_k", torch.float16), ("q6_k", torch.float16),
                                     ("awq", torch.float16), ("q4_0", torch.float8_e4m3fn), ("q4_0", torch.float8_e5m2),
                                     ("q6_k", torch.float8_e4m3fn)])
def test_register_direct_rope(kind, kv):
    """The _rope entries give linear then rotary_and_cache bit for bit: q, and the k / v cache rows (a padding
    slot's left untouched; FP8 caches: the unfused cache write's bytes at scale 1), ragged rows, partial rotary,
    bias, splits incl. uneven, every tile; the route (llama3-8b's qkv at 32 rows) equals the unfused one, eager
    and under CUDA-graph replay."""
    for m, k, hq, hk, d, rot, bias in ((17, 256, 4, 2, 64, 64, True), (40, 1280, 8, 2, 128, 64, False),
                                       (3, 512, 2, 1, 64, 32, True), (64, 768, 6, 3, 128, 128, False)):
        k += 256 if kind in ("q4_k", "q6_k") and k % 256 else 0
        x, norm, eps, w, res, b, pos, d, cs, neox, kc, vc, slots, hq, hk = _qkv_args(
            m, k, hq, hk, d, rot, kind, device="cuda", seed=SEED + m, bias=bias)
        kc, vc = kc.to(kv), vc.to(kv)
        qs, kvs = hq * d, hk * d
        for tile in gemm_ops.rd_tiles(w.kind):
            for splits in (1, 3):
                y = gemm_ops.gemm_launch(x, w, b, tile, splits)
                kw, vw = kc.clone(), vc.clone()
                want = ops.rotary_and_cache(pos, y[:, :qs], y[:, qs:qs + kvs], y[:, qs + kvs:], d, cs, False, kw, vw,
                                            slots)
                kg, vg = kc.clone(), vc.clone()
                with cuda_ops.poison_outputs():
                    got = gemm_ops.gemm_launch(x, w, b, tile, splits, rope=gemm_ops.RopeCache(
                        pos, slots, cs, kg, vg, qs, kvs, d, rot))
                what = (kind, kv, m, k, tile, splits)
                assert torch.equal(got, want) and torch.equal(_bits(kg), _bits(kw)), what
                assert torch.equal(_bits(vg), _bits(vw)), what
                assert not torch.equal(_bits(kg), _bits(kc)), what  # rows written (the padding one not: kw)
    x, norm, eps, w, res, b, pos, d, cs, neox, kc, vc, slots, hq, hk = args = _qkv_args(
        32, 4096, 32, 8, 128, 128, kind, device="cuda", seed=SEED, blocks=64)
    args[10], args[11] = kc, vc = kc.to(kv), vc.to(kv)
    p = ops.problem("rms_norm_qkv_rotary_cache", *args)
    assert ops.registry.select(p).provider.name == "cuda_pack_gemm_rd"
    unfused = ops.registry.providers["rms_norm_qkv_rotary_cache"]["unfused"].fn
    kw, vw = kc.clone(), vc.clone()
    want, want_res = unfused(*args[:10], kw, vw, *args[12:])
    got, got_res = ops.rms_norm_qkv_rotary_cache(*args)
    assert torch.equal(got, want) and torch.equal(got_res, want_res)
    assert torch.equal(_bits(kc), _bits(kw)) and torch.equal(_bits(vc), _bits(vw))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out, _ = ops.rms_norm_qkv_rotary_cache(*args)
    for i in range(2):
        x.copy_(torch.randn(32, 4096, generator=torch.Generator().manual_seed(SEED + i)).half())
        pos.add_(1)
        g.replay()
        torch.cuda.synchronize()
        want, _ = unfused(*args[:10], kw, vw, *args[12:])
        assert torch.equal(out, want) and torch.equal(_bits(kc), _bits(kw)) and torch.equal(_bits(vc), _bits(vw)), i


@needs_rd
def test_register_direct_traced():
    """The _trace entries (tools/gpu/gemm_trace.py) give the route entries' output bit for bit, unsplit
    and split-K; every block records entry <= each point <= end (the count only when split); a buffer
    too small is refused before any launch."""
    x, w, b = gpu_inputs("q4_0", 29, 6144, 4096, True, SEED)  # ragged rows: every tile takes them
    for tile, t in gemm_ops.RD_TILES.items():
        for splits in (1, 4):
            tr = torch.zeros(4096, 16, dtype=torch.int64, device="cuda")
            want = gemm_ops.gemm_launch(x, w, b, tile, splits)
            got = gemm_ops.gemm_launch(x, w, b, tile, splits, trace=tr)
            assert torch.equal(got, want), (tile, splits)
            check_trace_rows(tr, -(-6144 // t.bn) * -(-29 // t.bm) * splits, splits, tile)
    with pytest.raises(ValueError, match="packed GEMM trace: need a contiguous int64 tensor"):
        gemm_ops.gemm_launch(x, w, b, "r32", 4, trace=torch.zeros(16, 16, dtype=torch.int64, device="cuda"))


@gpu
@needs_rd
def test_register_direct_route():
    """ops.linear on q4_0 / awq with 3..64 rows and K % 128 == 0 (q4_k: any K, a multiple of 256) takes the
    register-direct tiles (split-K and CUDA-graph replay included); q4_0 with K % 128 != 0 keeps the
    shared-memory tiles."""
    for kind, m, n, k in (("q4_0", 17, 200, 128), ("q4_0", 32, 4096, 4096), ("q4_0", 48, 16448, 1024),
                          ("q4_0", 64, 4096, 14336), ("q4_0", 20, 96, 1056), ("q4_0", 3, 4096, 4096),
                          ("q4_0", 8, 6144, 4096), ("q4_k", 3, 4096, 4096), ("q4_k", 12, 28672, 4096),
                          ("q4_k", 32, 4096, 14336), ("q4_k", 64, 6144, 4096), ("awq", 4, 4096, 4096),
                          ("awq", 16, 28672, 4096), ("awq", 40, 4096, 14336), ("q6_k", 5, 4096, 14336),
                          ("q6_k", 32, 16448, 4096)):
        x, w, b = gpu_inputs(kind, m, n, k, m == 48, SEED + m)
        rd = k % 128 == 0
        tile, splits = gemm_ops.gemm_shape(m, n, k, *gemm_ops.gemm_slots(kind, x.device), rd=rd)
        sel = ops.registry.select(ops.problem("linear", x, w, b)).provider.name
        assert sel == ("cuda_pack_gemm_rd" if rd else "cuda_pack_gemm"), (kind, m, n, k, sel)
        with cuda_ops.poison_outputs():
            got = ops.linear(x, w, b)
        err = rel_err(got, ref_linear(x, w, b))
        assert err <= TOL, f"{kind} M={m} N={n} K={k} {tile} x{splits}: rel err {err:.3g} seed={SEED}"
    x, w, b = gpu_inputs("q4_0", 32, 4096, 4096, True, SEED)
    g = torch.cuda.CUDAGraph()
    ops.linear(x, w, b)
    with torch.cuda.graph(g):
        out = ops.linear(x, w, b)
    for i in range(2):  # the split-K counters re-arm under replay
        x.copy_(torch.randn(32, 4096, generator=torch.Generator().manual_seed(SEED + i)).half())
        g.replay()
        torch.cuda.synchronize()
        assert rel_err(out, ref_linear(x, w, b)) <= TOL
