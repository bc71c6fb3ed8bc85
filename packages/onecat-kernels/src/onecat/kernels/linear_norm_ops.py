"""Providers of the ops that join a projection into the residual stream to the normed projection behind it:
`linear_rms_norm_linear` (the decode layer's o_proj, then the post-attention norm and gate_up with the GLU) and
`linear_rms_norm_qkv_rotary_cache` (down, then the next layer's input norm, qkv, rotary and the cache write).
Semantics: reference.linear_rms_norm_linear / linear_rms_norm_qkv_rotary_cache, the two ops in sequence.

* `cuda_pack_gemm_rd` (3..64 rows, both weights q4_0 / q4_k / q6_k / awq on sm_80+: decode batches): the residual
  add and the RMSNorm leave their own launch. The projection in front (csrc/gemm_rd.cu / gemm_wg.cu _norm
  entries) writes r' = res + y, x~ = fp16(gamma r') and each of its tiles' sums of r'^2; the one behind (the _glu /
  _rope entries with a RowNorm) reads x~ as its x and scales each row's sums by rsqrt(sum / hidden + eps) in its
  epilogue, before the GLU or the rotary. Two launches where the unfused route takes three. The products differ
  from the unfused route's by one FP16 rounding: fp16(gamma r') inv against fp16(r' inv gamma).
* `unfused` (every other problem, the CPU's too): ops.linear, then ops.rms_norm_linear /
  ops.rms_norm_qkv_rotary_cache, each through its own admitted provider (the route before s31, bit for bit; on the
  CPU the two references, so the runtime selections name each projection, as the admission report lists them).
* the torch reference: the same composition in one function (the generic tests' yardstick).
"""

from __future__ import annotations

import dataclasses

from . import gemm_ops, linear_fused_ops
from .cuda_ops import _need, available
from .registry import KernelRegistry, Problem, Provider

IN_PREFIX = "in_"  # the projection in front: linear's facts under this prefix (ops._params_linear_rms_norm_linear)


def in_problem(p: Problem) -> Problem:
    """The `linear` problem of the projection in front, from the composite op's in_ facts."""
    n = len(IN_PREFIX)
    return dataclasses.replace(p, op="linear", params=tuple(sorted(
        (k[n:], v) for k, v in p.params if k.startswith(IN_PREFIX))))


def _need_norm_producer(r: list[str], p: Problem) -> None:
    """The _norm entries' conditions on the projection in front: a register-direct GEMM problem whose N is the
    hidden size (the next projection's K), whole 128-wide tiles (every tile gemm_shape may pick divides it), and
    an FP16 residual and norm weight."""
    q = in_problem(p)
    r.extend(f"projection in front: {why}" for why in gemm_ops.supports_linear_packed_gemm_rd(q))
    n = q.param("n")
    _need(r, n == p.param("k"), f"the projection in front gives {n} features, the one behind takes {p.param('k')}")
    _need(r, n is not None and n % 128 == 0, f"hidden size {n}: not whole 128-wide tiles (the _norm epilogue)")
    _need(r, q.param("bias") is None, "a bias on the projection in front")
    _need(r, p.param("residual_dtype") == "float16", f"residual dtype {p.param('residual_dtype')} not float16")


def supports_gemm_glu(p: Problem) -> list[str]:
    r = linear_fused_ops.supports_gemm_glu(p)
    _need_norm_producer(r, p)
    return r


def supports_gemm_rope(p: Problem) -> list[str]:
    r = linear_fused_ops.supports_gemm_rope(p)
    _need_norm_producer(r, p)
    return r


def linear_rms_norm_linear_gemm(x, weight_in, residual, norm_weight, eps, weight, bias=None, act=None):
    xt, res_out, ss = gemm_ops.linear_packed_gemm_rd(x, weight_in, norm=gemm_ops.NormIn(residual, norm_weight))
    return gemm_ops.linear_packed_gemm_rd(xt, weight, glu=True, row_norm=gemm_ops.RowNorm(ss, eps)), res_out


def linear_rms_norm_qkv_rotary_cache_gemm(x, weight_in, residual, norm_weight, eps, weight, bias, positions, head_dim,
                                          cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads,
                                          num_kv_heads):
    xt, res_out, ss = gemm_ops.linear_packed_gemm_rd(x, weight_in, norm=gemm_ops.NormIn(residual, norm_weight))
    rope = gemm_ops.RopeCache(positions, slot_mapping, cos_sin_cache, key_cache, value_cache, num_heads * head_dim,
                              num_kv_heads * head_dim, head_dim, cos_sin_cache.shape[-1])
    return gemm_ops.linear_packed_gemm_rd(xt, weight, bias, rope=rope, row_norm=gemm_ops.RowNorm(ss, eps)), res_out


def linear_rms_norm_linear_unfused(x, weight_in, residual, norm_weight, eps, weight, bias=None, act=None):
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
    for op, fused, unfused, supports in (
            ("linear_rms_norm_linear", linear_rms_norm_linear_gemm, linear_rms_norm_linear_unfused,
             supports_gemm_glu),
            ("linear_rms_norm_qkv_rotary_cache", linear_rms_norm_qkv_rotary_cache_gemm,
             linear_rms_norm_qkv_rotary_cache_unfused, supports_gemm_rope)):
        reg.register(Provider("cuda_pack_gemm_rd", op, fused, available=available, supports=supports))
        reg.register(Provider("unfused", op, unfused))
        reg.priority.setdefault(op, ["cuda_pack_gemm_rd", "unfused"])
