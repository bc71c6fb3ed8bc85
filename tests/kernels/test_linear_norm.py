"""The projections joined across the residual add and RMSNorm (linear_norm_ops: linear_rms_norm_linear,
linear_rms_norm_qkv_rotary_cache). CPU: the references are the two ops in sequence, admission and refusal
reasons on fake devices, the launches (intercepted: the _norm entry, then the _glu / _rope entry with its
RowNorm; at one row the _norm GEMV, then the _rs_glu / _rs_rope one), the launch's argument checks. GPU (marked
`gpu`; the GEMMs sm_80+, the GEMVs any): the fused routes against the unfused one at llama3-8b shapes: the new
residual stream bit for bit, the outputs and cache rows within one FP16 rounding, the sums of squares, CUDA-graph
replay. Seed: $ONECAT_TEST_SEED, else random (printed on failure)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from onecat.kernels import cuda_ops, gemm_ops, linear_norm_ops, ops
from onecat.kernels import reference as ref
from onecat.kernels.weights import random_packed

from .packed_gemm_cases import SEED, explain, gpu, launches, needs_rd, needs_wg, rel_err  # noqa: F401
from .test_gemm_rd import _bits, _qkv_args


def _glu_args(m, h, k, inter, kind="q4_0", kind_in="q4_0", device="cpu", seed=0):
    """linear_rms_norm_linear's arguments: x [m, k], o-like weight [h, k], residual, norm weight, eps, [gate | up]
    weight [2 inter, h], no bias, silu_and_mul."""
    gen = torch.Generator().manual_seed(seed)
    x, res = torch.randn(m, k, generator=gen).half().to(device), torch.randn(m, h, generator=gen).half().to(device)
    norm = ((torch.rand(h, generator=gen) + 0.5) / 16).half().to(device)  # gate / up well inside FP16 at K 4096
    return [x, random_packed(h, k, kind_in, gen, device), res, norm, 1e-5, random_packed(2 * inter, h, kind, gen, device),
            None, "silu_and_mul"]


def _down_qkv_args(m, h, k, hq, hk, d, rot, kind="q4_0", kind_in="q4_0", device="cpu", seed=0, blocks=8):
    """linear_rms_norm_qkv_rotary_cache's arguments: x [m, k], down-like weight [h, k], then _qkv_args' (its x as
    the residual)."""
    qa = _qkv_args(m, h, hq, hk, d, rot, kind, device=device, seed=seed, blocks=blocks)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(m, k, generator=gen).half().to(device)
    return [x, random_packed(h, k, kind_in, gen, device), qa[4], qa[1], qa[2], qa[3], *qa[5:]]


def _on(op, args, cap=(9, 0), **override):
    p = ops.problem(op, *args)
    params = dict(p.params) | override
    return explain(dataclasses.replace(p, device="cuda", capability=cap, params=tuple(sorted(params.items()))))


def test_references_are_the_sequence():
    """Each reference is linear into the residual stream, then the normed op (bit for bit on the CPU)."""
    a = _glu_args(5, 256, 512, 128)
    got = ref.linear_rms_norm_linear(*a)
    want = ref.rms_norm_linear(ref.linear(a[0], a[1]), a[3], a[4], a[5], a[2], None, "silu_and_mul")
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    b = _down_qkv_args(5, 256, 512, 4, 2, 64, 64)
    kc, vc = b[11].clone(), b[12].clone()
    q, r = ref.linear_rms_norm_qkv_rotary_cache(*b)
    wq, wr = ref.rms_norm_qkv_rotary_cache(ref.linear(b[0], b[1]), b[3], b[4], b[5], b[2], b[6], b[7], b[8], b[9],
                                           b[10], kc, vc, *b[13:])
    assert torch.equal(q, wq) and torch.equal(r, wr) and torch.equal(b[11], kc) and torch.equal(b[12], vc)


def test_admission(any_nvrtc):
    """cuda_pack_gemm_rd where both projections take the register-direct GEMM (3..64 rows, sm_80+) and the one
    behind has its GLU / rotary epilogue; else the unfused route, the report saying why."""
    glu, qkv = _glu_args(32, 256, 512, 128), _down_qkv_args(32, 256, 512, 4, 2, 64, 64)
    assert _on("linear_rms_norm_linear", glu).provider.name == "cuda_pack_gemm_rd"
    assert _on("linear_rms_norm_qkv_rotary_cache", qkv).provider.name == "cuda_pack_gemm_rd"
    for sel, why in (
            (_on("linear_rms_norm_linear", glu, cap=(7, 0)), "capability 7.0 < 8.0"),
            (_on("linear_rms_norm_linear", glu, in_format="packed_q4_1"),
             "projection in front: weight format packed_q4_1 not packed_q4_0"),
            (_on("linear_rms_norm_linear", glu, in_n=384), "the projection in front gives 384 features, the one "
                                                          "behind takes 256"),
            (_on("linear_rms_norm_linear", glu, act=None), "activation None: the GEMM epilogue is silu_and_mul only"),
            (_on("linear_rms_norm_linear", glu, residual_dtype="float32"), "residual dtype float32 not float16"),
            (_on("linear_rms_norm_qkv_rotary_cache", qkv, neox=True), "NeoX rotary"),
            (_on("linear_rms_norm_qkv_rotary_cache", qkv, in_k=288), "projection in front: K=288 not a multiple of "
                                                                    "128")):
        assert sel.provider.name == "unfused", why
        assert any(why in r for r in sel.refused["cuda_pack_gemm_rd"]), sel.refused["cuda_pack_gemm_rd"]
    one = _on("linear_rms_norm_linear", glu, rows=1)  # one row of q4_0: its normed-prologue GEMVs (unfused)
    assert one.provider.name == "unfused" and any("M=1 rows" in r for r in one.refused["cuda_pack_gemm_rd"])
    assert any("packed_q4_0 not packed_q4_k" in r for r in one.refused["cuda_gemv_norm"])
    n = len(linear_norm_ops.IN_PREFIX)
    p = ops.problem("linear_rms_norm_linear", *glu)
    assert dict(linear_norm_ops.in_problem(p).params) == {k[n:]: v for k, v in p.params if k.startswith("in_")}
    assert dict(linear_norm_ops.in_problem(p).params) == dict(ops.problem("linear", glu[0], glu[1]).params)


def test_launches(launches, monkeypatch):
    """The provider's two launches: the _norm entry (res, res_out, gamma, ss after the GEMM's arguments), then the
    _glu / _rope entry reading its x~ with the RowNorm (ss, its tiles, eps); 33..64 rows of the wide matrices on the
    wgmma tile."""
    monkeypatch.setattr(gemm_ops, "rd_fits", lambda kind, k, device: True)
    monkeypatch.setattr(gemm_ops, "wg_fits", lambda kind, k, device: kind == "q4_0")
    monkeypatch.setattr(gemm_ops, "gemm_slots", lambda kind, device: (132, {"r16": 4, "r16w": 3, "r32": 3, "r32w": 2,
                                                                            "w64": 1}))
    a = _glu_args(32, 256, 512, 128)
    out, res = linear_norm_ops.linear_rms_norm_linear_gemm(*a)
    (n1, g1, a1), (n2, g2, a2) = launches
    assert out.shape == (32, 128) and res.shape == (32, 256)
    assert n1 == "gemm_rd_q4_0_r32_norm" and g1[:2] == (256 // 64, 1) and a1[8:11] == (32, 256, 512)
    assert a1[13] == a[2].data_ptr() and a1[14] == res.data_ptr() and a1[15] == a[3].data_ptr()
    assert n2 == "gemm_rd_q4_0_r32_glu" and a2[1] == a1[0] and a2[8:11] == (32, 256, 256)
    assert a2[13] == a1[16] and a2[14:] == (256 // 64, 1e-5)  # ss: [32 rows][4 tiles] float32
    launches.clear()
    a = _glu_args(40, 256, 8192, 8192)  # long K in front, a wide [gate | up] behind: the wgmma tile both times
    linear_norm_ops.linear_rms_norm_linear_gemm(*a)
    assert [c[0] for c in launches] == ["gemm_wg_q4_0_w64_norm", "gemm_wg_q4_0_w64_glu"]
    assert launches[1][2][14] == 256 // 128
    launches.clear()
    b = _down_qkv_args(40, 256, 8192, 4, 2, 64, 64)
    q, _ = linear_norm_ops.linear_rms_norm_qkv_rotary_cache_gemm(*b)
    assert q.shape == (40, 256) and [c[0] for c in launches] == ["gemm_wg_q4_0_w64_norm", "gemm_rd_q4_0_r32_rope"]
    assert launches[1][2][13:16] == (launches[0][2][16], 256 // 128, 1e-5)
    assert launches[1][2][16:21] == tuple(t.data_ptr() for t in (b[7], b[13], b[9], b[11], b[12]))
    launches.clear()
    monkeypatch.setattr(gemm_ops, "gemm_slots", lambda kind, device: (132, {"r16": 4, "r16w": 3, "r32": 3, "r32w": 2,
                                                                            "w64": 1, "w64b2": 2}))
    a = _glu_args(40, 256, 8192, 9216)  # gate_up past one wave of w64: w64b2, so o's epilogue writes its x stages
    out, res = linear_norm_ops.linear_rms_norm_linear_gemm(*a)
    (n1, _, a1), (n2, g2, a2) = launches
    assert out.shape == (40, 9216) and [n1, n2] == ["gemm_wg_q4_0_w64_norm", "gemm_wg_q4_0_w64b2_glu_xb"]
    assert a1[0] == 0 and a1[17] != 0 and a2[1] == a1[17] and g2 == (2 * 9216 // 128, 1, 1)  # no row-major x~
    assert a2[8:11] == (40, 18432, 256) and a2[13:] == (a1[16], 256 // 128, 1e-5)
    launches.clear()
    # down behind on w64 (feeds): gate_up writes its output as down's x stages, down copies them whole (_norm_xb)
    b = _down_qkv_args(40, 256, 9216, 4, 2, 64, 64)
    linear_norm_ops.linear_rms_norm_linear_gemm(*a, feeds=b[1])
    assert launches[-1][0] == ("gemm_wg_q4_0_w64b2_glu_xb_xs" if linear_norm_ops.XB_FEEDS else "gemm_wg_q4_0_w64b2_glu_xb")
    launches.clear()
    monkeypatch.setattr(linear_norm_ops, "XB_FEEDS", True)
    out, res = linear_norm_ops.linear_rms_norm_linear_gemm(*a, feeds=b[1])
    assert isinstance(out, gemm_ops.XStages) and (out.m, out.k) == (40, 9216) and res.shape == (40, 256)
    assert [c[0] for c in launches] == ["gemm_wg_q4_0_w64_norm", "gemm_wg_q4_0_w64b2_glu_xb_xs"]
    assert launches[1][2][0] == out.stages.data_ptr() and tuple(out.stages.shape) == (1, 9216 // 128, 8 * 2064)
    launches.clear()
    q, _ = linear_norm_ops.linear_rms_norm_qkv_rotary_cache_gemm(out, *b[1:])
    assert q.shape == (40, 256) and [c[0] for c in launches] == ["gemm_wg_q4_0_w64_norm_xb", "gemm_rd_q4_0_r32_rope"]
    assert launches[0][2][1] == out.stages.data_ptr() and launches[0][1] == (2, 1, 8)  # K split: steps per split
    launches.clear()
    linear_norm_ops.linear_rms_norm_linear_gemm(*a, feeds=random_packed(256, 9216, "q4_k", torch.Generator()))
    assert [c[0] for c in launches] == ["gemm_wg_q4_0_w64_norm", "gemm_wg_q4_0_w64b2_glu_xb"]  # q4_k down: row-major
    launches.clear()
    a = _glu_args(5, 256, 512, 128, kind_in="q4_k")
    linear_norm_ops.linear_rms_norm_linear_gemm(*a)
    assert [c[0] for c in launches] == ["gemm_rd_q4_k_r16_norm", "gemm_rd_q4_0_r16_glu"]
    launches.clear()  # the plain GLU launch passes a null RowNorm
    gemm_ops.linear_packed_gemm_rd(torch.zeros(5, 256, dtype=torch.float16), a[5], glu=True)
    assert launches[0][2][13:] == (0, 0, 0.0)


def test_gemv_admission(any_nvrtc):
    """cuda_gemv_norm at one row where both weights are q4_k, or a q6_k down (K >= 8192: a Q4_K_M file's) in front,
    on every GPU from sm_70; else (q4_0 measured slower than its normed-prologue GEMVs) the unfused route, the report
    saying why."""
    glu, qkv = _glu_args(1, 256, 512, 128, "q4_k", "q4_k"), _down_qkv_args(1, 256, 4096, 4, 2, 64, 64, "q4_k", "q4_k")
    q6_down = _down_qkv_args(1, 256, 8192, 4, 2, 64, 64, "q4_k", "q6_k")
    for cap in ((7, 0), (9, 0)):
        assert _on("linear_rms_norm_linear", glu, cap).provider.name == "cuda_gemv_norm"
        assert _on("linear_rms_norm_qkv_rotary_cache", qkv, cap).provider.name == "cuda_gemv_norm"
        assert _on("linear_rms_norm_qkv_rotary_cache", qkv, cap, neox=True).provider.name == "cuda_gemv_norm"
        assert _on("linear_rms_norm_qkv_rotary_cache", q6_down, cap).provider.name == "cuda_gemv_norm"
    for sel, why in (
            (_on("linear_rms_norm_linear", glu, rows=2), "M=2: the joined GEMVs take one row"),
            (_on("linear_rms_norm_linear", glu, in_format="packed_q4_1"),
             "projection in front: weight format packed_q4_1 not packed_q4_k / packed_q6_k"),
            (_on("linear_rms_norm_qkv_rotary_cache", qkv, in_format="packed_q6_k"),  # q6_k at K 4096: the "n" shape
             "projection in front: M = 1 shape (4, 1, 2, 'n') of packed_q6_k has no joined instance"),
            (_on("linear_rms_norm_qkv_rotary_cache", q6_down, format="packed_q6_k"),
             "projection behind: weight format packed_q6_k not packed_q4_k"),
            (_on("linear_rms_norm_linear", glu, format="packed_q4_0"), "projection behind: weight format packed_q4_0"),
            (_on("linear_rms_norm_linear", glu, in_n=384), "the projection in front gives 384 features"),
            (_on("linear_rms_norm_linear", glu, act=None), "activation None: the GLU epilogue is silu_and_mul only"),
            (_on("linear_rms_norm_linear", glu, residual_dtype="float32"), "residual dtype float32 not float16"),
            (_on("linear_rms_norm_qkv_rotary_cache", qkv, head_dim=66), "head_dim 66 / rotary_dim 64: not multiples"),
            (_on("linear_rms_norm_qkv_rotary_cache", qkv, kv_dtype="float32"), "KV cache dtype float32")):
        assert sel.provider.name == "unfused", why
        assert any(why in r for r in sel.refused["cuda_gemv_norm"]), sel.refused["cuda_gemv_norm"]


def test_gemv_launches(launches):
    """The _norm GEMV (res, res_out, gamma, ss after the GEMV's arguments; ss one float per 4 rows), then the
    _rs_glu / _rs_rope one reading its x~ with (ss, its N / 4 sums, eps): the plain shape gemv_m1_shape picks in
    front, the normed one behind."""
    a = _glu_args(1, 256, 512, 128, "q4_k", "q4_k")
    out, res = linear_norm_ops.linear_rms_norm_linear_gemv(*a)
    (n1, g1, a1), (n2, g2, a2) = launches
    assert out.shape == (1, 128) and res.shape == (1, 256)
    assert n1 == "gemv_r_q4_k_r4u1k1_norm" and a1[6:9] == (256, 512, a[1].group_size // 32) and a1[5] == 0
    assert a1[9] == a[2].data_ptr() and a1[10] == res.data_ptr() and a1[11] == a[3].data_ptr()
    assert n2 == "gemv_r_q4_k_r4u1k2nw8_rs_glu" and a2[0] == out.data_ptr() and a2[1] == a1[0]
    assert a2[6:8] == (256, 256) and a2[9] == a1[12] and a2[10:] == (256 // 4, 1e-5)
    assert g1[0] == 256 // 16 and g2[0] == 128 // 8  # 4 / 4 groups of 4 rows a block (behind: K split 2 ways), GLU 2
    launches.clear()
    b = _down_qkv_args(1, 256, 4096, 4, 2, 64, 64, "q4_k", "q4_k")
    q, _ = linear_norm_ops.linear_rms_norm_qkv_rotary_cache_gemv(*b)
    assert q.shape == (1, 256) and [c[0] for c in launches] == ["gemv_r_q4_k_r4u1k2_norm", "gemv_r_q4_k_r4u1k2nw8_rs_rope"]
    assert launches[1][2][9:12] == (launches[0][2][12], 256 // 4, 1e-5)
    assert launches[1][2][12:17] == tuple(t.data_ptr() for t in (b[7], b[13], b[9], b[11], b[12]))
    launches.clear()  # a q6_k down in front (K 8192: its plain shape r4u1k2)
    q, _ = linear_norm_ops.linear_rms_norm_qkv_rotary_cache_gemv(*_down_qkv_args(1, 256, 8192, 4, 2, 64, 64, "q4_k",
                                                                                 "q6_k"))
    assert [c[0] for c in launches] == ["gemv_r_q6_k_r4u1k2_norm", "gemv_r_q4_k_r4u1k2nw8_rs_rope"]
    assert launches[0][1][0] == 256 // 8 and launches[1][2][10] == 256 // 4  # 2 groups of 4 rows a block (K split)


def test_launch_checks(launches, monkeypatch):
    monkeypatch.setattr(gemm_ops, "rd_fits", lambda kind, k, device: True)
    x, w, res, norm, eps, w2, _, _ = _glu_args(32, 256, 512, 128)
    with pytest.raises(ValueError, match="norm epilogue: tile r32, N=256"):
        gemm_ops.gemm_launch(x, w, None, "r32", 1, glu=True, norm=gemm_ops.NormIn(res, norm))
    with pytest.raises(ValueError, match="norm epilogue"):  # a residual of another width
        gemm_ops.gemm_launch(x, w, None, "r32", 1, norm=gemm_ops.NormIn(res[:, :128], norm))
    with pytest.raises(ValueError, match="norm epilogue: tile r32w, N=192"):  # a partial 128-wide tile
        gemm_ops.gemm_launch(x, random_packed(192, 512, "q4_0", torch.Generator().manual_seed(0)), None, "r32w", 1,
                             norm=gemm_ops.NormIn(res[:, :192], norm[:192]))
    with pytest.raises(ValueError, match="norm epilogue: tile r32, N=192"):  # x stages: whole 128-wide steps
        gemm_ops.gemm_launch(x, random_packed(192, 512, "q4_0", torch.Generator().manual_seed(0)), None, "r32", 1,
                             norm=gemm_ops.NormIn(res[:, :192], norm[:192], True))
    xs = gemm_ops.XStages.empty(32, 256, torch.device("cpu"))
    with pytest.raises(ValueError, match="on x stages: tile r32, glu"):  # the XB entries are the wgmma tiles'
        gemm_ops.gemm_launch(xs, w2, None, "r32", 1, glu=True)
    with pytest.raises(ValueError, match="on x stages: tile w64, glu"):  # w64's are plain and _norm
        gemm_ops.gemm_launch(xs, w2, None, "w64", 1, glu=True)
    with pytest.raises(ValueError, match="on x stages: tile w64b2, norm"):  # w64b2's plain and GLU
        gemm_ops.gemm_launch(xs, w2, None, "w64b2", 1, norm=gemm_ops.NormIn(res[:, :128], norm[:128]))
    with pytest.raises(ValueError, match="on x stages: tile w64, norm"):  # x~ as stages for yet another XB tile
        gemm_ops.gemm_launch(xs, w2, None, "w64", 1, norm=gemm_ops.NormIn(res[:, :128], norm[:128], True))
    with pytest.raises(ValueError, match="on x stages: tile w64b2"):  # stages of another shape
        gemm_ops.gemm_launch(gemm_ops.XStages(xs.stages, 32, 512), w2, None, "w64b2", 1, glu=True)
    with pytest.raises(ValueError, match="output as x stages: GLU True, x stages False"):  # the GLU XB entry only
        gemm_ops.gemm_launch(res, w2, None, "w64b2", 1, glu=True, out_stages=True)
    with pytest.raises(ValueError, match="output as x stages: GLU False"):
        gemm_ops.gemm_launch(xs, w2, None, "w64b2", 1, out_stages=True)
    with pytest.raises(ValueError, match="output as x stages: GLU True, x stages True, N=192"):  # N / 2 % 128
        gemm_ops.gemm_launch(xs, random_packed(192, 256, "q4_0", torch.Generator().manual_seed(0)), None, "w64b2", 1,
                             glu=True, out_stages=True)
    ss = torch.zeros(32, 4)
    with pytest.raises(ValueError, match="row norm: glu False"):
        gemm_ops.gemm_launch(res, w2, None, "r32", 1, row_norm=gemm_ops.RowNorm(ss, eps))
    with pytest.raises(ValueError, match="row norm"):
        gemm_ops.gemm_launch(res, w2, None, "r32", 1, glu=True, row_norm=gemm_ops.RowNorm(ss.double(), eps))
    assert not launches


# -- GPU ---------------------------------------------------------------------------------------------------------
# How far a joined route's output may be from an FP32 reference, against the unfused route's distance: the joined
# GEMV behind the norm rounds its x to FP16 twice (x~ = r gamma, then x~ times the row's scale, which keeps the FP16
# product chains in range), where rms_norm then the GEMV round it once. H200 s35 (calls 6-7, glu-err.txt): 1.0-1.56x
# over the seeds run, both routes 3e-4 to 8e-3 from FP32 with the inputs' conditioning; mutually they were up to 3e-3
# apart, more than one FP16 rounding.
JOIN_ERR = 2.0


def _assert_within_join_err(got, want, ref32, what):
    """got (the joined route's) within JOIN_ERR x want's (the unfused route's) distance to the FP32 reference ref32."""
    e_got, e_want = rel_err(got.float(), ref32), rel_err(want.float(), ref32)
    assert e_got <= JOIN_ERR * e_want + 1e-4, (what, e_got, e_want)


def _normed_fp32(residual, norm_weight, eps, weight, bias=None):
    """The projection behind the norm in FP32 from the new residual stream (which both routes share bit for bit):
    the reference's rms_norm then linear, on float32 x."""
    return ref.linear(ref.rms_norm(residual.float(), norm_weight, eps), weight, bias)


def _glu_fp32(a, residual):
    """linear_rms_norm_linear(*a)'s GLU in FP32: silu(gate) * up of the normed projection."""
    return ref.silu_and_mul(_normed_fp32(residual, a[3], a[4], a[5]))


def _check_o_gate_up(a, provider, front, tag):
    """linear_rms_norm_linear(*a) on `provider` against the unfused route: selected, the new residual stream bit for
    bit, the GLU output within JOIN_ERR x the unfused route's distance to an FP32 reference; front() (the projection
    in front alone: x~, residual, sums of squares) gives that residual, x~ = fp16(r' gamma) exactly and sums adding up
    to each row's; a CUDA graph replays the eager result. Returns the sums."""
    m = a[0].shape[0]
    assert ops.registry.select(ops.problem("linear_rms_norm_linear", *a)).provider.name == provider
    fused, unfused = _fused_and_unfused("linear_rms_norm_linear", provider)
    with cuda_ops.poison_outputs():
        got, got_res = fused(*a)
    want, want_res = unfused(*a)
    assert bool(torch.isfinite(want).all()) and float(want.abs().max()) > 0, (*tag, SEED)
    assert torch.equal(got_res, want_res), (*tag, SEED)
    _assert_within_join_err(got, want, _glu_fp32(a, want_res), (*tag, SEED))
    xt, res, ss = front()
    assert torch.equal(res, want_res)
    torch.testing.assert_close(ss.reshape(m, -1).sum(1), res.float().pow(2).sum(1), rtol=1e-5, atol=0)
    torch.testing.assert_close(xt, (res.float() * a[3].float()).half(), rtol=0, atol=0)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out, out_res = ops.linear_rms_norm_linear(*a)
    a[0].copy_(torch.randn(m, a[0].shape[1], generator=torch.Generator().manual_seed(SEED)).half())
    g.replay()
    torch.cuda.synchronize()
    want, want_res = fused(*a)
    assert torch.equal(out, want) and torch.equal(out_res, want_res)
    return ss


def _written(slots) -> torch.Tensor:
    """The flat cache slots a step wrote: its slot mapping without the padding rows (< 0)."""
    return slots[slots >= 0].long()


def _assert_caches_close(got, want, kv, slots, ref32=None):
    """The K / V rows the step wrote (flat `slots`; every other row as the unfused route left it). FP16: those rows
    within JOIN_ERR x the unfused route's distance to their FP32 reference `ref32` ((k rotated, v), a row per slot), or
    (no ref) within one FP16 rounding of it; FP8: the rows' values within a tenth (an E4M3 code is 1/8 apart, E5M2's
    1/4: a few values quantized the other way)."""
    for i, (c, w) in enumerate(zip(got, want)):
        n = c.shape[0] * c.shape[1]
        cb, wb = _bits(c).reshape(n, -1), _bits(w).reshape(n, -1)  # a row per slot, as bytes (FP8 indexed so)
        rest = torch.ones(n, dtype=torch.bool, device=c.device)
        rest[slots] = False
        assert torch.equal(cb[rest], wb[rest]), i
        gr, wr = (c.reshape(n, -1)[slots], w.reshape(n, -1)[slots]) if kv == torch.float16 else (cb[slots], wb[slots])
        if kv == torch.float16 and ref32 is not None:
            _assert_within_join_err(gr, wr, ref32[i].reshape(gr.shape), i)
        elif kv == torch.float16:
            assert rel_err(gr, wr) < 2e-3, (i, rel_err(gr, wr))
        else:  # codes apart where the two routes' values round differently (near 0, where codes are dense, by
            # several; s35 call 7: 5.3% of a row's codes at one seed, the values 0.9% apart)
            gv, wv = gr.view(kv).float(), wr.view(kv).float()
            assert rel_err(gv, wv) < 0.1, (i, rel_err(gv, wv), float((gr != wr).float().mean()))


def _qkv_fp32(b, residual):
    """linear_rms_norm_qkv_rotary_cache(*b)'s step behind the projection in front, in FP32: (rotated q, rotated k, v)
    of the normed projection (+ bias)."""
    d, hq, hk = b[8], b[14], b[15]
    q, k, v = _normed_fp32(residual, b[3], b[4], b[5], b[6]).split([hq * d, hk * d, hk * d], dim=-1)
    q, k = ref.rotary_embedding(b[7], q, k, d, b[9], b[10])
    return q, k, v


def _fused_and_unfused(op, fused="cuda_pack_gemm_rd"):
    provs = ops.registry.providers[op]
    return provs[fused].fn, provs["unfused"].fn


@gpu
@pytest.mark.parametrize("kind_in,kind", [("q4_k", "q4_k")])
def test_gemv_o_gate_up_against_unfused(kind_in, kind):
    """One row (batch-1 decode), llama3-8b's o_proj -> post-attention norm -> gate_up GLU on the joined GEMVs: the
    new residual stream equals the unfused route's bit for bit (the same plain GEMV, rms_norm.cu's add), the GLU
    output within JOIN_ERR x the unfused route's distance to an FP32 reference; the warps' sums of squares add up to
    the residual's; a CUDA graph replays."""
    a = _glu_args(1, 4096, 4096, 14336, kind, kind_in, "cuda", SEED)
    ss = _check_o_gate_up(a, "cuda_gemv_norm", lambda: linear_norm_ops._gemv_front(a[0], a[1], a[2], a[3]),
                          (kind_in, kind))
    assert ss.shape == (4096 // 4,)


@gpu
@pytest.mark.parametrize("kind_in,kind,kv,rot", [("q4_k", "q4_k", torch.float16, 64), ("q4_k", "q4_k", torch.float16, 128),
                                                 ("q4_k", "q4_k", torch.float8_e4m3fn, 128),
                                                 ("q4_k", "q4_k", torch.float8_e5m2, 128),
                                                 ("q6_k", "q4_k", torch.float16, 128),
                                                 ("q6_k", "q4_k", torch.float8_e4m3fn, 128)])
@pytest.mark.parametrize("neox", [False, True])
def test_gemv_down_qkv_against_unfused(kind_in, kind, kv, rot, neox):
    """One row, llama3-8b's down (q4_k; q6_k as in a Q4_K_M file) -> the next layer's input norm -> qkv, rotary (GPT-J
    / NeoX, full and partial) and the cache write on the joined GEMVs: the new residual stream bit for bit; q and the
    FP16 cache's new rows within JOIN_ERR x the unfused route's distance to an FP32 reference, FP8 rows within a
    tenth."""
    b = _down_qkv_args(1, 4096, 14336, 32, 8, 128, rot, kind, kind_in, "cuda", SEED, blocks=64)
    b[10], b[11], b[12], b[13] = neox, b[11].to(kv), b[12].to(kv), torch.tensor([5], device="cuda")  # a real slot
    assert ops.registry.select(ops.problem("linear_rms_norm_qkv_rotary_cache", *b)).provider.name == "cuda_gemv_norm"
    fused, unfused = _fused_and_unfused("linear_rms_norm_qkv_rotary_cache", "cuda_gemv_norm")
    kw, vw = b[11].clone(), b[12].clone()
    want, want_res = unfused(*b[:11], kw, vw, *b[13:])
    with cuda_ops.poison_outputs():
        got, got_res = fused(*b)
    assert bool(torch.isfinite(want).all()) and float(want.abs().max()) > 0, (kind, SEED)
    assert torch.equal(got_res, want_res), (kind_in, kind, kv, SEED)
    q32, k32, v32 = _qkv_fp32(b, want_res)
    _assert_within_join_err(got, want, q32, (kind_in, kind, kv, SEED))
    _assert_caches_close((b[11], b[12]), (kw, vw), kv, _written(b[13]), (k32, v32))


@gpu
@needs_rd
@pytest.mark.parametrize("m,kind", [(3, "q4_0"), (16, "q4_0"), (32, "q4_0"), (48, "q4_0"), (64, "q4_0"),
                                    (32, "q4_k"), (24, "q6_k")])
def test_o_gate_up_against_unfused(m, kind):
    """llama3-8b's o_proj -> post-attention norm -> gate_up GLU: the new residual stream equals the unfused route's
    bit for bit (same tile and splits, rms_norm.cu's add), the GLU output within JOIN_ERR x the unfused route's
    distance to an FP32 reference; the tiles' sums of squares add up to the residual's; a CUDA graph replays."""
    a = _glu_args(m, 4096, 4096, 14336, kind, kind, "cuda", SEED + m)
    _check_o_gate_up(a, "cuda_pack_gemm_rd",
                     lambda: gemm_ops.linear_packed_gemm_rd(a[0], a[1], norm=gemm_ops.NormIn(a[2], a[3])), (m, kind))


@gpu
@needs_wg
@pytest.mark.parametrize("m", [33, 48, 64])
def test_o_gate_up_x_stages(m, monkeypatch):
    """Where gate_up runs w64b2, o's _norm epilogue writes x~ as that tile's x stages (XStages) and the _glu_xb entry
    copies them whole: the GLU output and the residual bit for bit those of x~ row-major through the producer warps,
    and the stages' rows those of gemm_ops.wg_x_stages of the row-major x~."""
    a = _glu_args(m, 4096, 4096, 14336, "q4_0", "q4_0", "cuda", SEED + m)
    assert gemm_ops.takes_x_stages(a[5], m, a[0].device)
    with cuda_ops.poison_outputs():
        got, got_res = linear_norm_ops.linear_rms_norm_linear_gemm(*a)
        xs, _, _ = gemm_ops.linear_packed_gemm_rd(a[0], a[1], norm=gemm_ops.NormIn(a[2], a[3], True))
    xt, _, _ = gemm_ops.linear_packed_gemm_rd(a[0], a[1], norm=gemm_ops.NormIn(a[2], a[3]))
    written = gemm_ops.wg_x_stages(torch.full_like(xt, 1.0009765625)) != 0  # 0x3C01: both bytes of every real pair
    assert torch.equal(xs.stages[written], gemm_ops.wg_x_stages(xt)[written]), m
    monkeypatch.setattr(gemm_ops, "takes_x_stages", lambda *_: False)
    want, want_res = linear_norm_ops.linear_rms_norm_linear_gemm(*a)
    assert bool(torch.isfinite(want).all()) and float(want.abs().max()) > 0
    assert torch.equal(got_res, want_res) and torch.equal(got, want), m


@gpu
@needs_wg
@pytest.mark.parametrize("m", [33, 48, 64])
def test_gate_up_down_x_stages(m, monkeypatch):
    """Where down runs w64 behind gate_up's w64b2 (feeds), gate_up writes its GLU output as down's x stages
    (_glu_xb_xs) and down copies them whole (_norm_xb, split-K): the GLU output, then q, the residual and the cache
    rows down's op gives, bit for bit those of the row-major route; the last layer's plain down (ops.linear) too."""
    a = _glu_args(m, 4096, 4096, 14336, "q4_0", "q4_0", "cuda", SEED + m)
    b = _down_qkv_args(m, 4096, 14336, 32, 8, 128, 128, "q4_0", "q4_0", "cuda", SEED + 2 * m, blocks=64)
    assert gemm_ops.takes_x_stages(b[1], m, b[1].q.device, "norm")
    monkeypatch.setattr(linear_norm_ops, "XB_FEEDS", True)
    with cuda_ops.poison_outputs():
        staged, res = linear_norm_ops.linear_rms_norm_linear_gemm(*a, feeds=b[1])
    want, want_res = linear_norm_ops.linear_rms_norm_linear_gemm(*a)
    assert isinstance(staged, gemm_ops.XStages) and torch.equal(res, want_res)
    assert bool(torch.isfinite(want).all()) and float(want.abs().max()) > 0
    assert torch.equal(staged.tensor(), want), m
    kc, vc = b[11].clone(), b[12].clone()
    with cuda_ops.poison_outputs():
        got_q, got_r = ops.linear_rms_norm_qkv_rotary_cache(staged, *b[1:11], kc, vc, *b[13:])
    assert ops.registry.select(ops.problem("linear_rms_norm_qkv_rotary_cache", staged, *b[1:])).provider.name == \
        "cuda_pack_gemm_rd"
    monkeypatch.setattr(gemm_ops, "XB_ROUTE", False)
    want_q, want_r = ops.linear_rms_norm_qkv_rotary_cache(want, *b[1:])
    assert torch.equal(got_q, want_q) and torch.equal(got_r, want_r), m
    assert torch.equal(kc.view(torch.uint8), b[11].view(torch.uint8)) and torch.equal(vc.view(torch.uint8),
                                                                                      b[12].view(torch.uint8))
    assert torch.equal(ops.linear(staged, b[1]), ops.linear(want, b[1])), m


@gpu
@needs_rd
@pytest.mark.parametrize("m,kind,kv", [(3, "q4_0", torch.float16), (32, "q4_0", torch.float16),
                                       (64, "q4_0", torch.float16), (32, "q4_0", torch.float8_e4m3fn),
                                       (17, "q4_k", torch.float8_e5m2), (40, "awq", torch.float16)])
def test_down_qkv_against_unfused(m, kind, kv):
    """llama3-8b's down -> the next layer's input norm -> qkv, rotary and the cache write (a padding slot): the new
    residual stream bit for bit, q within one FP16 rounding of the unfused route, the FP16 cache's new rows within
    JOIN_ERR x the unfused route's distance to an FP32 reference (FP8 caches: the rows within a tenth)."""
    b = _down_qkv_args(m, 4096, 14336, 32, 8, 128, 128, kind, kind, "cuda", SEED + m, blocks=64)
    b[11], b[12] = b[11].to(kv), b[12].to(kv)
    assert ops.registry.select(ops.problem("linear_rms_norm_qkv_rotary_cache", *b)).provider.name == "cuda_pack_gemm_rd"
    fused, unfused = _fused_and_unfused("linear_rms_norm_qkv_rotary_cache")
    kw, vw = b[11].clone(), b[12].clone()
    want, want_res = unfused(*b[:11], kw, vw, *b[13:])
    with cuda_ops.poison_outputs():
        got, got_res = fused(*b)
    assert bool(torch.isfinite(want).all()) and float(want.abs().max()) > 0, (m, kind, SEED)
    assert torch.equal(got_res, want_res), (m, kind, kv, SEED)
    assert rel_err(got, want) < 2e-3, (m, kind, rel_err(got, want), SEED)
    k32, v32 = _qkv_fp32(b, want_res)[1:]
    _assert_caches_close((b[11], b[12]), (kw, vw), kv, _written(b[13]), (k32[b[13] >= 0], v32[b[13] >= 0]))
