"""Providers of the ops that join a projection into the residual stream to the normed projection behind it:
`linear_rms_norm_linear` (the decode layer's o_proj, then the post-attention norm and gate_up with the GLU) and
`linear_rms_norm_qkv_rotary_cache` (down, then the next layer's input norm, qkv, rotary and the cache write).
Semantics: reference.linear_rms_norm_linear / linear_rms_norm_qkv_rotary_cache, the two ops in sequence.

* `cuda_pack_gemm_rd` (3..64 rows, both weights q4_0 / q4_k / q6_k / awq on sm_80+: decode batches): the residual
  add and the RMSNorm leave their own launch. The projection in front (csrc/gemm_rd.cu / gemm_wg.cu _norm
  entries) writes r' = res + y, x~ = fp16(gamma r') and each of its tiles' sums of r'^2; the one behind (the _glu /
  _rope entries with a RowNorm) reads x~ as its x and scales each row's sums by rsqrt(sum / hidden + eps) in its
  epilogue, before the GLU or the rotary. Two launches where the unfused route takes three. The products differ
  from the unfused route's by one FP16 rounding: fp16(gamma r') inv against fp16(r' inv gamma). Where gate_up runs
  the wgmma tile w64b2, the front writes x~ in that tile's x-stage layout (gemm_ops.XStages) and gate_up copies each
  step's x whole (_glu_xb), with the same bits (gemm_ops.XB_ROUTE switches it). Given `feeds` (down) on the w64
  tile, gate_up writes its own output so for down (_glu_xb_xs, then _norm_xb behind: XB_FEEDS switches it).
* `cuda_gemv_norm` (one row, both weights q4_k or a q6_k down in front: batch-1 decode, every GPU from sm_70; q4_0
  measured slower; FRONT_SHAPES / BEHIND_SHAPES): the same split on the M = 1 GEMVs (csrc/gemv_packed.cu). The
  projection in front (_norm entries) writes r', x~ and each warp's sum of r'^2 over its 4 rows; the one behind
  (_rs_glu / _rs_rope) forms the row's scale in every block from those N / 4 sums while its first weight chunks
  load, multiplies x~ by fp16(inv) as it loads (the fp16 HFMA2 chains keep the normalized range) and its sums by
  inv / fp16(inv). No norm prologue (the NORM_IN kernels' K-wide reads, block reduction and shared x); the
  residual is bit-equal to the unfused route's.
* `cuda_gemv_mix` (linear_rms_norm_qkv_rotary_cache, one row, a front of FRONT_SHAPES, behind a weights.RowParts of
  two formats with an instance: linear_fused_ops.MIX_SHAPES): cuda_gemv_norm's join with the _mix..._rs_rope launch
  behind.
* `unfused` (every other problem, the CPU's too): ops.linear, then ops.rms_norm_linear /
  ops.rms_norm_qkv_rotary_cache, each through its own admitted provider (the route before s31, bit for bit; on the
  CPU the two references, so the runtime selections name each projection, as the admission report lists them).
* the torch reference: the same composition in one function (the generic tests' yardstick).
"""

from __future__ import annotations

import dataclasses

import torch

from . import cuda_ops, gemm_ops, linear_fused_ops
from .cuda_ops import _common, _empty, _need, _ptr, available, gemv_m1_dims, gemv_m1_shape
from .driver import Kernel
from .registry import KernelRegistry, Problem, Provider
from .weights import PackedWeight

# gate_up writes its output as down's x stages where `feeds` (down) takes them (linear_rms_norm_linear_gemm). Off
# until a GPU run has shown it bit-equal and faster: s53 built it and got no device time (its tests pass on the CPU;
# the GPU tests and the batch-64 step A/B, set:linear_norm_ops.XB_FEEDS=True in tools/gpu/switch_ab.py, are
# benchmarks/results/s53-no-device/scripts/_s53_xb_down.sh)
XB_FEEDS = False
IN_PREFIX = "in_"  # the projection in front: linear's facts under this prefix (ops._params_linear_rms_norm_linear)


def in_problem(p: Problem) -> Problem:
    """The `linear` problem of the projection in front, from the composite op's in_ facts."""
    n = len(IN_PREFIX)
    return dataclasses.replace(p, op="linear", params=tuple(sorted(
        (k[n:], v) for k, v in p.params if k.startswith(IN_PREFIX))))


def _need_joined(r: list[str], p: Problem, q: Problem) -> None:
    """Every joined form's conditions on the pair (q: the projection in front): its N is the hidden size (the one
    behind's K), it has no bias, and the residual it is added to is FP16."""
    n = q.param("n")
    _need(r, n == p.param("k"), f"the projection in front gives {n} features, the one behind takes {p.param('k')}")
    _need(r, q.param("bias") is None, "a bias on the projection in front")
    _need(r, p.param("residual_dtype") == "float16", f"residual dtype {p.param('residual_dtype')} not float16")


def _need_norm_producer(r: list[str], p: Problem) -> None:
    """The _norm entries' conditions on the projection in front: a register-direct GEMM problem, joined (above),
    in whole 128-wide tiles (every tile gemm_shape may pick divides it)."""
    q = in_problem(p)
    r.extend(f"projection in front: {why}" for why in gemm_ops.supports_linear_packed_gemm_rd(q))
    _need_joined(r, p, q)
    n = q.param("n")
    _need(r, n is not None and n % 128 == 0, f"hidden size {n}: not whole 128-wide tiles (the _norm epilogue)")


# the (format, shape) pairs gemv_packed.cu instantiates joined: in front (_norm) the plain shapes gemv_m1_shape picks,
# behind (_rs_glu / _rs_rope) the normed ones. H200 s32 (benchmarks/results/h200-2026-12-03-s32), llama3-8b
# batch-1 steps against the normed GEMVs' prologue, in one process: q4_k -5.3% (plain shapes behind) / -12.3% (normed
# shapes behind); q4_0 +1.0% / +1.5% (plain) and +6.0% / +6.4% (normed: q4_0's 8-warp prologue kernels stay faster).
# q6_k in front (a Q4_K_M file's 16 q6_k downs, K 14336): its Q4_K_M batch-1 step 2,306.2 -> 2,259.1 us (-2.0%, 4 of 4
# rounds, s34 call 1).
FRONT_SHAPES = {"q4_k": ((4, 1, 2, ""), (4, 1, 1, "")), "q6_k": ((4, 1, 2, ""),)}
BEHIND_SHAPES = {"q4_k": ((4, 1, 2, "nw8"), (4, 1, 1, "n"))}
_GEMV = "ppppppiii"  # out, x, q, qh, meta, bias, N, K, gchunks


def _gemv_kernels(shapes: dict, suffix: str, args: str) -> dict:
    return {(f, s): Kernel("gemv_packed.cu", f"gemv_r_{f}_r{s[0]}u{s[1]}k{s[2]}{s[3]}_{suffix}", _GEMV + args, pdl=True)
            for f, fs in shapes.items() for s in fs}


_GEMV_NORM = _gemv_kernels(FRONT_SHAPES, "norm", "pppp")  # + res, res_out, gamma, ss
_GEMV_RS_GLU = _gemv_kernels(BEHIND_SHAPES, "rs_glu", "pif")  # + ss, ss_tiles, eps
_GEMV_RS_ROPE = _gemv_kernels(BEHIND_SHAPES, "rs_rope", "pif" + linear_fused_ops.ROPE_ARGS)  # + _rn_rope's rope ones
_MIX_RS_ROPE = linear_fused_ops.mix_kernels("rs_rope", "pif" + linear_fused_ops.ROPE_ARGS)  # a RowParts qkv behind


def _need_join_shape(r: list[str], what: str, fmt: str | None, n: int, k: int, behind: bool) -> None:
    kind, shapes = (fmt or "").removeprefix("packed_"), BEHIND_SHAPES if behind else FRONT_SHAPES
    if kind not in shapes:
        r.append(f"{what}: weight format {fmt} not {' / '.join('packed_' + f for f in shapes)}")
    elif k % 32:
        r.append(f"{what}: K={k} not a multiple of 32")
    elif gemv_m1_shape(kind, n, k, normed=behind) not in shapes[kind]:
        r.append(f"{what}: M = 1 shape {gemv_m1_shape(kind, n, k, normed=behind)} of {fmt} has no joined instance")


def _supports_gemv_join(p: Problem, mixed: bool = False) -> list[str]:
    """Both M = 1 GEMVs joined: one row, FP16, both weights of a joined shape, joined (_need_joined) with the hidden
    size a multiple of the front's 4 rows a warp, x contiguous and aligned, the residual and norm weight K wide (their
    dtypes: the GLU / rotary forms' checks)."""
    r = _common(p)
    q = in_problem(p)
    n_in = q.param("n")
    _need(r, p.param("rows") == 1, f"M={p.param('rows')}: the joined GEMVs take one row (decode, batch 1)")
    _need_join_shape(r, "projection in front", q.param("format"), n_in, q.param("k"), False)
    if p.param("format") == "row_parts" and mixed:
        r.extend(f"projection behind: {why}" for why in linear_fused_ops.mix_refusals(p))
    else:
        _need_join_shape(r, "projection behind", p.param("format"), p.param("n"), p.param("k"), True)
    _need_joined(r, p, q)
    _need(r, n_in % 4 == 0, f"hidden size {n_in}: not a multiple of 4 (a warp's rows in front)")
    _need(r, q.param("contiguous", True) and q.param("aligned16", True), "x not contiguous and 16-byte aligned")
    _need(r, p.param("norm_layout_ok", True), "residual / norm weight not contiguous, 16-byte aligned, of K elements")
    return r


def supports_gemv_glu(p: Problem) -> list[str]:
    r = _supports_gemv_join(p)
    linear_fused_ops._need_glu_after_norm(r, p, "the GLU epilogue", "the GLU kernel")
    _need(r, p.param("n") % 2 == 0, f"N={p.param('n')} odd: not [gate | up]")
    return r


def supports_gemv_rope(p: Problem, mixed: bool = False) -> list[str]:
    r = _supports_gemv_join(p, mixed)
    d, rd = p.param("head_dim"), p.param("rotary_dim")
    _need(r, d % 4 == 0 and rd % 4 == 0 and rd <= d,
          f"head_dim {d} / rotary_dim {rd}: not multiples of 4 (a warp's rows), or rotary_dim > head_dim")
    linear_fused_ops._need_norm_dtypes(r, p)
    linear_fused_ops._need_rope_cache(r, p)
    return r


def supports_gemv_mix_rope(p: Problem) -> list[str]:
    """cuda_gemv_mix: the joined GEMVs' conditions with a RowParts qkv of a two-format instance behind."""
    r = supports_gemv_rope(p, mixed=True)
    _need(r, p.param("format") == "row_parts", f"projection behind: weight format {p.param('format')} not row_parts "
          "(one format: cuda_gemv_norm)")
    return r


def _gemv_front(x, weight_in, residual, norm_weight):
    """The _norm GEMV: (x~, the new residual stream, the warps' sums of squares)."""
    n, k = weight_in.shape
    shape = gemv_m1_shape(weight_in.kind, n, k)
    xt, res_out = _empty(residual.shape, x.dtype, x.device), _empty(residual.shape, x.dtype, x.device)
    ss = _empty((n // shape[0],), torch.float32, x.device)
    cuda_ops._launch(_GEMV_NORM[(weight_in.kind, shape)], *gemv_m1_dims(n, shape), xt.data_ptr(), x.data_ptr(),
                     weight_in.q.data_ptr(), _ptr(weight_in.qh), weight_in.meta.data_ptr(), 0, n, k,
                     weight_in.group_size // 32, residual.data_ptr(), res_out.data_ptr(), norm_weight.data_ptr(),
                     ss.data_ptr(), device=x.device)
    return xt, res_out, ss


def _gemv_behind(kernels, out, xt, ss, eps, weight, bias, rows_per_out, *extra):
    n, k = weight.shape
    shape = gemv_m1_shape(weight.kind, n, k, normed=True)
    cuda_ops._launch(kernels[(weight.kind, shape)], *gemv_m1_dims(n // rows_per_out, shape, rows_per_out),
                     out.data_ptr(), xt.data_ptr(), weight.q.data_ptr(), _ptr(weight.qh), weight.meta.data_ptr(),
                     _ptr(bias), n, k, weight.group_size // 32, ss.data_ptr(), ss.numel(), float(eps), *extra,
                     device=xt.device)
    return out


def linear_rms_norm_linear_gemv(x, weight_in, residual, norm_weight, eps, weight, bias=None, act=None, feeds=None):
    xt, res_out, ss = _gemv_front(x, weight_in, residual, norm_weight)
    out = _empty((*xt.shape[:-1], weight.shape[0] // 2), xt.dtype, xt.device)
    return _gemv_behind(_GEMV_RS_GLU, out, xt, ss, eps, weight, None, 2), res_out


def linear_rms_norm_qkv_rotary_cache_gemv(x, weight_in, residual, norm_weight, eps, weight, bias, positions, head_dim,
                                          cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads,
                                          num_kv_heads):
    xt, res_out, ss = _gemv_front(x, weight_in, residual, norm_weight)
    q = _empty((*xt.shape[:-1], num_heads * head_dim), xt.dtype, xt.device)
    rope = linear_fused_ops.rope_args(positions, head_dim, cos_sin_cache, is_neox, key_cache, value_cache,
                                      slot_mapping, num_heads, num_kv_heads)
    return _gemv_behind(_GEMV_RS_ROPE, q, xt, ss, eps, weight, bias, 1, *rope), res_out


def linear_rms_norm_qkv_rotary_cache_mix(x, weight_in, residual, norm_weight, eps, weight, bias, positions, head_dim,
                                         cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads,
                                         num_kv_heads):
    xt, res_out, ss = _gemv_front(x, weight_in, residual, norm_weight)
    q = _empty((*xt.shape[:-1], num_heads * head_dim), xt.dtype, xt.device)
    linear_fused_ops.launch_mix(_MIX_RS_ROPE, q, xt, weight, bias, ss.data_ptr(), ss.numel(), float(eps),
                                *linear_fused_ops.rope_args(positions, head_dim, cos_sin_cache, is_neox, key_cache,
                                                            value_cache, slot_mapping, num_heads, num_kv_heads))
    return q, res_out


def supports_gemm_glu(p: Problem) -> list[str]:
    r = linear_fused_ops.supports_gemm_glu(p)
    _need_norm_producer(r, p)
    return r


def supports_gemm_rope(p: Problem) -> list[str]:
    r = linear_fused_ops.supports_gemm_rope(p)
    _need_norm_producer(r, p)
    return r


def linear_rms_norm_linear_gemm(x, weight_in, residual, norm_weight, eps, weight, bias=None, act=None, feeds=None):
    """Where gate_up runs the wgmma tile (33..64 rows on sm_90a), o's epilogue writes x~ as that tile's x stages and
    gate_up copies them whole (gemm_ops.XStages, the _glu_xb entry): the same bits, without the tile's producer warps
    staging x (s51, H100: gate_up M 64 48.8 -> 44.7 us). Where `feeds` (the projection the output goes to: down) runs
    the w64 tile too, gate_up writes its output as x stages for it (_glu_xb_xs; the op behind copies them whole, or
    any other provider gets x row-major: ops._dispatch)."""
    m, dev = x.numel() // x.shape[-1], x.device
    stages = gemm_ops.takes_x_stages(weight, m, dev)
    out_stages = (XB_FEEDS and stages and isinstance(feeds, PackedWeight)
                  and gemm_ops.takes_x_stages(weight, m, dev, "glu_xs")
                  and gemm_ops.takes_x_stages(feeds, m, dev, "norm"))
    xt, res_out, ss = gemm_ops.linear_packed_gemm_rd(x, weight_in, norm=gemm_ops.NormIn(residual, norm_weight, stages))
    out = gemm_ops.linear_packed_gemm_rd(xt, weight, glu=True, row_norm=gemm_ops.RowNorm(ss, eps),
                                         out_stages=out_stages)
    return out if out_stages else out.view(*x.shape[:-1], out.shape[-1]), res_out


def linear_rms_norm_qkv_rotary_cache_gemm(x, weight_in, residual, norm_weight, eps, weight, bias, positions, head_dim,
                                          cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads,
                                          num_kv_heads):
    xt, res_out, ss = gemm_ops.linear_packed_gemm_rd(x, weight_in, norm=gemm_ops.NormIn(residual, norm_weight))
    rope = gemm_ops.RopeCache(positions, slot_mapping, cos_sin_cache, key_cache, value_cache, num_heads * head_dim,
                              num_kv_heads * head_dim, head_dim, cos_sin_cache.shape[-1])
    return gemm_ops.linear_packed_gemm_rd(xt, weight, bias, rope=rope, row_norm=gemm_ops.RowNorm(ss, eps)), res_out


def linear_rms_norm_linear_unfused(x, weight_in, residual, norm_weight, eps, weight, bias=None, act=None,
                                   feeds=None):
    from . import ops
    return ops.rms_norm_linear(ops.linear(x, weight_in), norm_weight, eps, weight, residual, bias, act)


def linear_rms_norm_qkv_rotary_cache_unfused(x, weight_in, residual, norm_weight, eps, weight, bias, positions,
                                             head_dim, cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping,
                                             num_heads, num_kv_heads):
    from . import ops
    return ops.rms_norm_qkv_rotary_cache(ops.linear(x, weight_in), norm_weight, eps, weight, residual, bias, positions,
                                         head_dim, cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping,
                                         num_heads, num_kv_heads)


def register(reg: KernelRegistry) -> None:
    for op, gemv, gemv_supports, gemm, gemm_supports, unfused in (
            ("linear_rms_norm_linear", linear_rms_norm_linear_gemv, supports_gemv_glu, linear_rms_norm_linear_gemm,
             supports_gemm_glu, linear_rms_norm_linear_unfused),
            ("linear_rms_norm_qkv_rotary_cache", linear_rms_norm_qkv_rotary_cache_gemv, supports_gemv_rope,
             linear_rms_norm_qkv_rotary_cache_gemm, supports_gemm_rope, linear_rms_norm_qkv_rotary_cache_unfused)):
        reg.register(Provider("cuda_gemv_norm", op, gemv, available=available, supports=gemv_supports))
        # x may come as XStages (gate_up's output for down: linear_rms_norm_linear_gemm's feeds)
        reg.register(Provider("cuda_pack_gemm_rd", op, gemm, available=available, supports=gemm_supports,
                              takes_x_stages=op == "linear_rms_norm_qkv_rotary_cache"))
        reg.register(Provider("unfused", op, unfused))
        reg.priority.setdefault(op, ["cuda_gemv_norm", "cuda_gemv_mix", "cuda_pack_gemm_rd", "unfused"])
    reg.register(Provider("cuda_gemv_mix", "linear_rms_norm_qkv_rotary_cache", linear_rms_norm_qkv_rotary_cache_mix,
                          available=available, supports=supports_gemv_mix_rope))
