"""The normed qkv GEMV over a projection held in two formats (weights.RowParts; Q4_K_M files keep v in q6_k in half
the layers, q and k in q4_k): provider cuda_gemv_mix, one launch of gemv_packed.cu's _mix entries, the norm in front
(linear_fused_ops, rms_norm_qkv_rotary_cache) or the join's row scale (linear_norm_ops,
linear_rms_norm_qkv_rotary_cache). CPU: admission and refusal reasons on fake devices, the launches (intercepted).
GPU (marked `gpu`, any from sm_70): against the unfused route (rms_norm, one plain GEMV per part, rotary_and_cache)
at llama3-8b shapes: the residual bit for bit, rotated q and cache rows equal but for a few within one FP16 rounding
(the norm in front: its reduction order), or within test_linear_norm.JOIN_ERR x the unfused route's distance to an
FP32 reference (joined). Seed: $ONECAT_TEST_SEED, else random (printed on failure)."""

from __future__ import annotations

import pytest
import torch

from onecat.kernels import cuda_ops, linear_fused_ops, linear_norm_ops, ops
from onecat.kernels.weights import RowParts, random_packed

from .packed_gemm_cases import SEED, gpu, launches, rel_err  # noqa: F401
from .test_gemm_rd import _qkv_args
from .test_linear_norm import _assert_caches_close, _assert_within_join_err, _on, _qkv_fp32, _written


def _mixed_qkv_args(k, hq, hk, d, rot, kinds=("q4_k", "q6_k"), device="cpu", seed=0, slot=5):
    """rms_norm_qkv_rotary_cache's arguments at one row with the [q | k | v] weight a RowParts: [q | k] in kinds[0],
    v in kinds[1]; one real cache slot."""
    a = _qkv_args(1, k, hq, hk, d, rot, device=device, seed=seed)
    gen = torch.Generator().manual_seed(seed + 7)
    a[3] = RowParts((random_packed((hq + hk) * d, k, kinds[0], gen, device), random_packed(hk * d, k, kinds[1], gen,
                                                                                            device)))
    a[12] = torch.tensor([slot], device=device)
    return a


def _down_mixed_args(h, k, hq, hk, d, rot, kind_in="q4_k", device="cpu", seed=0):
    """linear_rms_norm_qkv_rotary_cache's arguments: x [1, k], a down-like weight [h, k], then _mixed_qkv_args'."""
    qa = _mixed_qkv_args(h, hq, hk, d, rot, device=device, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(1, k, generator=gen).half().to(device)
    return [x, random_packed(h, k, kind_in, gen, device), qa[4], qa[1], qa[2], qa[3], *qa[5:]]


def test_admission(any_nvrtc):
    """One row, a RowParts of q4_k + q6_k: cuda_gemv_mix on every GPU from sm_70, with the norm in front or joined
    (cuda_gemv_norm refusing the RowParts, cuda_gemv_mix a one-format weight); other pairs, a first part off whole
    blocks, more rows, or the GLU form keep the unfused route, the report saying why."""
    qkv, down_qkv = _mixed_qkv_args(512, 4, 2, 64, 64), _down_mixed_args(512, 1024, 4, 2, 64, 64)
    for cap in ((7, 0), (9, 0)):
        for op, args in (("rms_norm_qkv_rotary_cache", qkv), ("linear_rms_norm_qkv_rotary_cache", down_qkv)):
            sel = _on(op, args, cap)
            assert sel.provider.name == "cuda_gemv_mix", sel.refused
            assert any("row_parts" in r for r in sel.refused["cuda_gemv_norm"]), sel.refused["cuda_gemv_norm"]
    q6_down = _down_mixed_args(512, 8192, 4, 2, 64, 64, kind_in="q6_k")  # a Q4_K_M file's q6_k down in front
    assert _on("linear_rms_norm_qkv_rotary_cache", q6_down).provider.name == "cuda_gemv_mix"
    one = _on("rms_norm_qkv_rotary_cache", qkv, format="packed_q4_k", parts=None)
    assert one.provider.name == "cuda_gemv_norm"
    assert any("not row_parts" in r for r in linear_fused_ops.supports_gemv_mix_rope(one.problem))
    for op, args, override, why in (
            ("rms_norm_qkv_rotary_cache", qkv, {"parts": (("packed_q4_0", 384), ("packed_q6_k", 128))},
             "weight parts packed_q4_0+packed_q6_k: no two-format instance"),
            ("rms_norm_qkv_rotary_cache", qkv, {"parts": (("packed_q4_k", 376), ("packed_q6_k", 136))},
             "first part's 376 rows not whole blocks of 16"),
            ("rms_norm_qkv_rotary_cache", qkv, {"rows": 2}, "M=2"),
            ("linear_rms_norm_qkv_rotary_cache", down_qkv, {"parts": (("packed_q4_k", 384), ("packed_q4_0", 128))},
             "projection behind: weight parts packed_q4_k+packed_q4_0"),
            ("rms_norm_linear", [qkv[0], qkv[1], qkv[2], qkv[3], qkv[4], None, "silu_and_mul"], {},
             "weight format row_parts not a PackedWeight")):
        sel = _on(op, args, **override)
        prov = "cuda_gemv_norm" if op == "rms_norm_linear" else "cuda_gemv_mix"  # (no GLU form of the mix)
        assert sel.provider.name != prov, why
        assert any(why in r for r in sel.refused[prov]), sel.refused[prov]


def test_launches(launches):
    """One _mix launch: [q | k]'s blocks first (384 rows, 16 a block), then v's; each part's planes and group
    chunks, the first part's rows and blocks, then the norm's (or the join's) and the rotary's arguments."""
    a = _mixed_qkv_args(512, 4, 2, 64, 64)
    wa, wb = a[3].parts
    q, res = linear_fused_ops.rms_norm_qkv_rotary_cache_mix(*a)
    ((name, grid, args),) = launches
    assert name == "gemv_mix_q4_k_r4u1k2nw8_q6_k_r4u1k2nw8_rn_rope" and grid == (384 // 16 + 128 // 16, 1, 1)
    assert args[2] == wa.q.data_ptr() and args[6] == wb.q.data_ptr() and (args[5], args[9]) == (wa.group_size // 32, wb.group_size // 32)
    assert args[10:15] == (384, 384 // 16, 0, 512, 512) and args[15] == a[4].data_ptr() and args[17] == res.data_ptr()
    assert q.shape == (1, 256) and args[0] == q.data_ptr() and args[19] == a[6].data_ptr()
    launches.clear()
    b = _down_mixed_args(512, 1024, 4, 2, 64, 64)
    linear_norm_ops.linear_rms_norm_qkv_rotary_cache_mix(*b)
    assert [c[0] for c in launches] == ["gemv_r_q4_k_r4u1k1_norm", "gemv_mix_q4_k_r4u1k2nw8_q6_k_r4u1k2nw8_rs_rope"]
    assert launches[1][2][1] == launches[0][2][0] and launches[1][2][15:18] == (launches[0][2][12], 512 // 4, 1e-5)


# -- GPU ---------------------------------------------------------------------------------------------------------
@gpu
@pytest.mark.parametrize("kv,neox", [(torch.float16, False), (torch.float16, True), (torch.float8_e4m3fn, False)])
def test_norm_in_front_against_unfused(kv, neox):
    """llama3-8b's input norm -> qkv ([q | k] q4_k, v q6_k) -> rotary -> cache write in one launch: the unfused
    route's residual exactly; its rotated q and cache bytes, each part's rows summed as its plain GEMV sums them, but
    the norm's sum of squares is reduced in the block's order (8 warps, 2 items a thread) where rms_norm.cu's takes
    4 warps of 4: for some inputs the scale differs in its last bit. The q4_k rows' offset term takes sum(x) in
    FP32 (s37), so that bit reaches every row's sum, not a few: the outputs stay within a quarter of one FP16
    rounding of the unfused route (H200 s37: 4.8e-5 at seed 361220330; s34 with FP16 sums: 5 of 4096 q values
    one rounding apart at one seed of four)."""
    a = _mixed_qkv_args(4096, 32, 8, 128, 128, device="cuda", seed=SEED)
    a[9], a[10], a[11] = neox, a[10].to(kv), a[11].to(kv)
    assert ops.registry.select(ops.problem("rms_norm_qkv_rotary_cache", *a)).provider.name == "cuda_gemv_mix"
    kw, vw, k_before = a[10].clone(), a[11].clone(), a[10].clone()
    want, want_res = linear_fused_ops.rms_norm_qkv_rotary_cache_unfused(*a[:10], kw, vw, *a[12:])
    with cuda_ops.poison_outputs():
        got, got_res = linear_fused_ops.rms_norm_qkv_rotary_cache_mix(*a)
    what = f"{kv} neox={neox} seed={SEED}"
    assert bool(torch.isfinite(want).all()) and float(want.abs().max()) > 0, what
    assert torch.equal(got_res, want_res), what
    assert rel_err(got, want) < 2.5e-4, (what, rel_err(got, want))
    assert not torch.equal(kw.view(torch.uint8), k_before.view(torch.uint8)), what  # the slot was written
    _assert_caches_close((a[10], a[11]), (kw, vw), kv, _written(a[12]))


@gpu
@pytest.mark.parametrize("kind_in,kv", [("q4_k", torch.float16), ("q4_k", torch.float8_e5m2), ("q6_k", torch.float16)])
def test_joined_against_unfused(kind_in, kv):
    """llama3-8b's down (q4_k, or q6_k as a Q4_K_M file has it) -> the next input norm -> the two-format qkv, rotary
    and cache write on the joined GEMVs: the residual bit for bit; q and the FP16 cache's new rows within JOIN_ERR x
    the unfused route's distance to an FP32 reference (FP8: the rows within a tenth)."""
    b = _down_mixed_args(4096, 14336, 32, 8, 128, 128, kind_in=kind_in, device="cuda", seed=SEED)
    b[11], b[12] = b[11].to(kv), b[12].to(kv)
    assert ops.registry.select(ops.problem("linear_rms_norm_qkv_rotary_cache", *b)).provider.name == "cuda_gemv_mix"
    provs = ops.registry.providers["linear_rms_norm_qkv_rotary_cache"]
    kw, vw = b[11].clone(), b[12].clone()
    want, want_res = provs["unfused"].fn(*b[:11], kw, vw, *b[13:])
    with cuda_ops.poison_outputs():
        got, got_res = provs["cuda_gemv_mix"].fn(*b)
    assert bool(torch.isfinite(want).all()) and float(want.abs().max()) > 0, (kv, SEED)
    assert torch.equal(got_res, want_res), (kind_in, kv, SEED)
    q32, k32, v32 = _qkv_fp32(b, want_res)
    _assert_within_join_err(got, want, q32, (kind_in, kv, SEED))
    _assert_caches_close((b[11], b[12]), (kw, vw), kv, _written(b[13]), (k32, v32))
