"""Providers of the decode layer's normed projections, `rms_norm_linear` (semantics:
reference.rms_norm_linear: rms_norm (after the residual add), then linear, then optionally
silu_and_mul) and `rms_norm_qkv_rotary_cache` (rms_norm_linear onto [q | k | v], then
rotary_and_cache):

* `cuda_gemv_norm`: the packed M = 1 GEMV (csrc/gemv_packed.cu, the shape cuda_ops.gemv_m1_shape
  picks) with the RMSNorm in front: every block adds the residual, reduces the sum of squares and
  writes the normalized x into its shared memory while its first weight chunks load, block 0 writes
  the new residual stream; the gate_up form also has the GLU behind (a warp computes gate rows and the
  same rows of up and writes silu(gate) * up); the qkv form rotates q and k (a warp's rows hold whole
  rotation pairs: adjacent rows for GPT-J, rows j and j + rot / 2 for NeoX) and writes k and v into
  the FP16 paged cache. One launch where the unfused
  route takes two or three, and the projection that feeds the residual stream (o_proj / down) stays
  a plain GEMV.
* `cuda_gemv_mix` (rms_norm_qkv_rotary_cache, one row, a weights.RowParts of two formats with an instance,
  MIX_SHAPES: a Q4_K_M file's [q | k] q4_k + v q6_k): cuda_gemv_norm's qkv launch over both parts, each part's
  blocks on its own weight (gemv_packed.cu _mix entries); each part's rows summed as its plain GEMV sums them, but
  the norm's sum of squares in the 8-warp block's order (rms_norm.cu's differs), so for some inputs a few outputs
  are one FP16 rounding off the unfused route's (H200 s34).
* `cuda_pack_gemm_rd` (rms_norm_linear with the activation, 3..64 rows, q4_0 / q4_k / q6_k / awq on sm_80+: decode
  batches' gate_up): ops.rms_norm, then the register-direct GEMM with the GLU epilogue
  (csrc/gemm_rd.cu _glu entries: a tile's features half gate rows, half the same up rows), so no
  silu_and_mul launch and no [gate | up] activations in memory; the unfused route's bits.
* `cuda_pack_gemm_rd` (rms_norm_qkv_rotary_cache, 3..64 rows, the register-direct formats on sm_80+, GPT-J
  rotary, FP16 cache: decode batches' qkv on GGUF llama-family models): ops.rms_norm, then the register-direct
  GEMM with the rotary epilogue (csrc/gemm_rd.cu _rope entries: q rotated into its output, k rotated and v
  written into the paged cache), so no rotary_and_cache launch and no [q | k | v] in memory; the unfused
  route's bits. NeoX pairs (j, j + rot / 2) fall in different 8-column groups (and tiles): unfused.
* `cuda_gemv_glu` (rms_norm_linear with the activation, 2 rows of any packed format: a decode batch
  of two's gate_up): ops.rms_norm, then the two-row packed GEMV with the GLU behind (csrc/gemv_packed.cu
  _t2_glu entries), so no silu_and_mul launch; the unfused route's bits. (The norm fused in front as at
  one row was slower for two: every block's prologue normalizes both rows; H200 s18.)
* `unfused`: ops.rms_norm, ops.linear (and ops.silu_and_mul / ops.rotary_and_cache), each through
  its own admitted provider (the GPU route for batches, other formats and dense weights).
* the torch reference everywhere else (the CPU route).
"""

from __future__ import annotations

import os

from . import cuda_ops, gemm_ops
from .cuda_ops import (_PACKED_NAMES, _common, _empty, _need, _ptr, available, gemv_m1_block_rows, gemv_m1_dims,
                       gemv_m1_shape)
from .driver import Kernel, pdl_enabled
from .registry import KernelRegistry, Problem, Provider
from .weights import PACKED_FORMATS

# the (format, shape) pairs gemv_packed.cu instantiates with the norm in front: what gemv_m1_shape picks
NORM_SHAPES = {"q4_0": ((4, 1, 2, "nw8"), (4, 1, 1, "nw8")),
               "q4_1": ((4, 1, 2, "n"), (4, 1, 1, "n")), "awq": ((4, 1, 2, "n"), (4, 1, 1, "n")),
               "q8_0": ((4, 1, 2, "n"),), "q4_k": ((4, 1, 2, "nw8"), (4, 1, 1, "n")), "q6_k": ((2, 1, 1, ""),)}
_ARGS = "ppppppiiipppf"
ROPE_ARGS = "pppppiiiiii"  # positions, slots, cos_sin, k_cache, v_cache, q_size, kv_size, head_dim, rot, neox, kv
_PLAIN = {(f, s): Kernel("gemv_packed.cu", f"gemv_r_{f}_r{s[0]}u{s[1]}k{s[2]}{s[3]}_rn", _ARGS, pdl=True)
          for f in PACKED_FORMATS for s in NORM_SHAPES[f]}
_GLU = {(f, s): Kernel("gemv_packed.cu", f"gemv_r_{f}_r{s[0]}u{s[1]}k{s[2]}{s[3]}_rn_glu", _ARGS, pdl=True)
        for f in PACKED_FORMATS for s in NORM_SHAPES[f]}
_ROPE = {(f, s): Kernel("gemv_packed.cu", f"gemv_r_{f}_r{s[0]}u{s[1]}k{s[2]}{s[3]}_rn_rope",
                        _ARGS + ROPE_ARGS, pdl=True)
         for f in PACKED_FORMATS for s in NORM_SHAPES[f]}
# ... with the norm weight loaded before the wait and one barrier in the prologue's reduction (gemv_packed.cu
# GEMV_ROWS_RN_GP; the route's bits): the route where they hold the shape and PDL runs (sm_90+: without it there is no
# wait to load before, and on sm_70 they take 77-80 registers, 3 blocks an SM, against the route's 64 and 4, which no
# V100 measured). NORM_WEIGHT_FIRST: None = where PDL runs; True / False ($ONECAT_GEMV_GP=1 / 0) = everywhere / never
# (A/Bs and tests force either form on any GPU). H100 s48
# (benchmarks/results/h100-2026-12-07-s48/): q4_0 gate_up chain links 26.9 -> 24.9 us (the plain GEMV's 24.8), with
# the GLU 27.7 -> 25.1; qkv level (7.9); llama3-8b q4_0 batch-1 step 2,246.8 -> 2,137.9 us (-4.8%, control +0.03%).
GP_SHAPES = {"q4_0": ((4, 1, 2, "nw8"), (4, 1, 1, "nw8"))}
_GP = {sfx: {(f, s): Kernel("gemv_packed.cu", "gemv_r_{}_r{}u{}k{}{}".format(f, *s) + f"_{sfx}_gp",
                            _ARGS + (ROPE_ARGS if sfx == "rn_rope" else ""), pdl=True)
             for f, shapes in GP_SHAPES.items() for s in shapes}
       for sfx in ("rn", "rn_glu", "rn_rope")}
_GP_ENV = os.environ.get("ONECAT_GEMV_GP")
NORM_WEIGHT_FIRST: bool | None = None if _GP_ENV is None else _GP_ENV != "0"

# One projection held in two formats (weights.RowParts: Q4_K_M files keep v in q6_k in half the layers, q and k in
# q4_k) as one normed qkv launch: (format A, format B) -> their shapes, 8 warps a block for both (gemv_packed.cu
# GEMV_MIX_ROPE; rows [0, n_A) from A, the rest from B).
MIX_SHAPES = {("q4_k", "q6_k"): ((4, 1, 2, "nw8"), (4, 1, 2, "nw8"))}
_MIX_ARGS = "pppppipppiiipii"  # out, x, A's q, qh, meta, gchunks, B's, n_A, A's blocks, bias, N, K


def mix_kernels(suffix: str, args: str) -> dict:
    """The _mix entries of `suffix` (rn_rope / rs_rope) per format pair; `args`: what follows _MIX_ARGS."""
    tag = lambda f, s: f"{f}_r{s[0]}u{s[1]}k{s[2]}{s[3]}"  # noqa: E731
    return {pair: Kernel("gemv_packed.cu", f"gemv_mix_{tag(pair[0], sa)}_{tag(pair[1], sb)}_{suffix}", _MIX_ARGS + args,
                         pdl=True) for pair, (sa, sb) in MIX_SHAPES.items()}


def mix_refusals(p: Problem) -> list[str]:
    """Why a RowParts weight does not fit the _mix entries (none: it does): two PackedWeight parts whose formats have
    an instance, the first part's rows whole blocks of its shape (no block straddles the two)."""
    r: list[str] = []
    parts = p.param("parts") or ()
    kinds = tuple(f.removeprefix("packed_") for f, _ in parts)
    _need(r, len(parts) == 2 and all(f in _PACKED_NAMES for f, _ in parts) and kinds in MIX_SHAPES,
          f"weight parts {'+'.join(f for f, _ in parts)}: no two-format instance "
          f"({', '.join('packed_' + a + '+packed_' + b for a, b in MIX_SHAPES)})")
    if kinds in MIX_SHAPES:
        rows_a, block_rows = parts[0][1], gemv_m1_block_rows(MIX_SHAPES[kinds][0])
        _need(r, rows_a % block_rows == 0, f"first part's {rows_a} rows not whole blocks of {block_rows}")
    return r


def launch_mix(kernels: dict, out, x, weight, bias, *extra, smem: int = 0) -> None:
    """One _mix launch of `kernels` for a RowParts weight of two PackedWeights (mix_refusals found none)."""
    a, b = weight.parts
    sa, sb = MIX_SHAPES[(a.kind, b.kind)]
    (ga, _, _), block = gemv_m1_dims(a.shape[0], sa)
    (gb, _, _), _ = gemv_m1_dims(b.shape[0], sb)
    cuda_ops._launch(kernels[(a.kind, b.kind)], (ga + gb, 1, 1), block, out.data_ptr(), x.data_ptr(),
                     a.q.data_ptr(), _ptr(a.qh), a.meta.data_ptr(), a.group_size // 32, b.q.data_ptr(), _ptr(b.qh),
                     b.meta.data_ptr(), b.group_size // 32, a.shape[0], ga, _ptr(bias), weight.shape[0],
                     weight.shape[1], *extra, device=x.device, smem=smem)


def rope_args(positions, head_dim, cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads,
              num_kv_heads) -> tuple:
    """The _rope entries' rotary + cache-write arguments (ROPE_ARGS)."""
    return (positions.data_ptr(), slot_mapping.data_ptr(), cos_sin_cache.data_ptr(), key_cache.data_ptr(),
            value_cache.data_ptr(), num_heads * head_dim, num_kv_heads * head_dim, head_dim, cos_sin_cache.shape[-1],
            int(is_neox), gemm_ops.ROPE_KV_CODES[key_cache.dtype])


_MIX_RN_ROPE = mix_kernels("rn_rope", "pppf" + ROPE_ARGS)  # + res, norm_w, res_out, eps
ACTIVATIONS = (None, "silu_and_mul")
MAX_SMEM = 48 * 1024  # dynamic shared memory without the opt-in attribute: the normalized x, K * 2 bytes


def supports_gemv_norm(p: Problem, mixed: bool = False) -> list[str]:
    """mixed: a RowParts weight of a two-format instance (mix_refusals) is admitted too (the qkv form's _mix
    entries)."""
    r = _common(p)
    fmt, n, k, act = p.param("format"), p.param("n"), p.param("k"), p.param("act")
    if mixed and fmt == "row_parts":
        r.extend(mix_refusals(p))
    else:
        _need(r, fmt in _PACKED_NAMES, f"weight format {fmt} not a PackedWeight ({'/'.join(_PACKED_NAMES)})")
    _need(r, p.param("rows") == 1, f"M={p.param('rows')}: the normed-input GEMV is for one row (decode, batch 1)")
    _need(r, k % 32 == 0, f"K={k} not a multiple of 32")
    _need(r, k * 2 <= MAX_SMEM, f"K={k}: the normalized x ({k * 2} bytes) exceeds {MAX_SMEM} of shared memory")
    _need(r, act in ACTIVATIONS, f"activation {act} not one of {ACTIVATIONS}")
    _need(r, act is None or n % 2 == 0, f"N={n} odd: not [gate | up]")
    _need(r, act is None or p.param("bias") is None, "bias with an activation: the GLU kernel takes none")
    _need(r, p.param("contiguous", True) and p.param("aligned16", True), "x not contiguous and 16-byte aligned")
    _need_norm_dtypes(r, p)
    _need(r, p.param("norm_layout_ok", True), "x / residual / norm weight not contiguous, 16-byte aligned, of K elements")
    if fmt in _PACKED_NAMES and k % 32 == 0:
        shape = gemv_m1_shape(fmt.removeprefix("packed_"), n, k, normed=True)
        _need(r, (fmt.removeprefix("packed_"), shape) in _PLAIN,
              f"M = 1 kernel shape {shape} of {fmt} has no normed-input instance")
    return r


def supports_gemv_norm_rope(p: Problem, mixed: bool = False) -> list[str]:
    """The normed-input GEMV's conditions, plus rotary and the cache write in its epilogue (FP16 or FP8 E4M3 /
    E5M2 caches, scale 1 as the op's): a warp's R (<= 4) rows hold whole rotation pairs, so head_dim and
    rotary_dim are multiples of 4."""
    r = supports_gemv_norm(p, mixed)
    d, rd = p.param("head_dim"), p.param("rotary_dim")
    _need(r, d % 4 == 0 and rd % 4 == 0 and rd <= d,
          f"head_dim {d} / rotary_dim {rd}: not multiples of 4 (a warp's rows), or rotary_dim > head_dim")
    _need_rope_cache(r, p)
    return r


def supports_gemv_mix_rope(p: Problem) -> list[str]:
    """cuda_gemv_mix: the normed qkv GEMV's conditions on a RowParts of a two-format instance (mix_refusals)."""
    r = supports_gemv_norm_rope(p, mixed=True)
    _need(r, p.param("format") == "row_parts", f"weight format {p.param('format')} not row_parts (one format: "
          "cuda_gemv_norm)")
    return r


def _need_norm_dtypes(r: list[str], p: Problem) -> None:
    """The norm's inputs as every fused kernel here takes them: FP16 norm weight and residual (or none)."""
    _need(r, p.param("norm_dtype") == "float16" and p.param("residual_dtype") in (None, "float16"),
          f"norm weight / residual dtype {p.param('norm_dtype')} / {p.param('residual_dtype')} not float16")


def _need_rope_cache(r: list[str], p: Problem) -> None:
    """The rotary + cache-write epilogues' inputs (the GEMV's and the GEMM's): dtypes and layouts."""
    _need(r, p.param("cache_dtype") == "float32", f"cos_sin_cache dtype {p.param('cache_dtype')} not float32")
    _need(r, p.param("pos_dtype") == "int64" and p.param("slot_dtype") == "int64",
          f"positions / slot_mapping dtype {p.param('pos_dtype')} / {p.param('slot_dtype')} not int64")
    _need(r, p.param("kv_dtype") in gemm_ops.ROPE_KV_DTYPES,
          f"KV cache dtype {p.param('kv_dtype')} not {' / '.join(gemm_ops.ROPE_KV_DTYPES)}")
    _need(r, p.param("cache_layout_ok", True), "caches not contiguous [blocks, block_size, Hk, D] of one dtype, "
          "or the weight's rows not (Hq + 2 Hk) x D")


def supports_gemm_glu(p: Problem) -> list[str]:
    """The register-direct GEMM's conditions (sm_80+, q4_0 / q4_k / q6_k / awq, 3..64 rows, K % 128), the GLU epilogue's
    (silu_and_mul, no bias, [gate | up] halves in whole tiles: N / 2 % 64) and the norm's dtypes."""
    r = gemm_ops.supports_linear_packed_gemm_rd(p)
    n = p.param("n")
    _need_glu_after_norm(r, p, "the GEMM epilogue", "the GLU epilogue")
    _need(r, all(gemm_ops.glu_fits(t, n) for t in ("r32", "r32w")),  # the tiles gemm_shape routes
          f"N={n}: the [gate | up] halves are not whole tiles (N / 2 % 64)")
    return r


def supports_gemm_rope(p: Problem) -> list[str]:
    """The register-direct GEMM's conditions, the norm's dtypes, and the rotary epilogue's: GPT-J pairs on
    whole 8-column groups (head_dim and rotary_dim multiples of 8), int64 positions / slots, a float32
    cos / sin cache and a paged cache of the kernel's layout, FP16 or FP8 (E4M3 / E5M2, scale 1 as the op's)."""
    r = gemm_ops.supports_linear_packed_gemm_rd(p)
    d, rd = p.param("head_dim"), p.param("rotary_dim")
    _need(r, not p.param("neox"), "NeoX rotary: pairs (j, j + rot / 2) span column groups (the epilogue is GPT-J)")
    _need(r, d % 8 == 0 and rd % 8 == 0 and rd <= d,
          f"head_dim {d} / rotary_dim {rd}: not multiples of 8 (a thread's column group), or rotary_dim > head_dim")
    _need_norm_dtypes(r, p)
    _need_rope_cache(r, p)
    return r


def rms_norm_qkv_rotary_cache_gemm(x, norm_weight, eps, weight, residual, bias, positions, head_dim, cos_sin_cache,
                                   is_neox, key_cache, value_cache, slot_mapping, num_heads, num_kv_heads):
    h, res_out = _norm(x, norm_weight, eps, residual)
    rope = gemm_ops.RopeCache(positions, slot_mapping, cos_sin_cache, key_cache, value_cache, num_heads * head_dim,
                              num_kv_heads * head_dim, head_dim, cos_sin_cache.shape[-1])
    return gemm_ops.linear_packed_gemm_rd(h, weight, bias, rope=rope), res_out


def _need_glu_after_norm(r: list[str], p: Problem, epilogue: str, kernel: str) -> None:
    """The conditions of an rms_norm launch followed by a projection with the GLU behind."""
    _need(r, p.param("act") == "silu_and_mul", f"activation {p.param('act')}: {epilogue} is silu_and_mul only")
    _need(r, p.param("bias") is None, f"bias with an activation: {kernel} takes none")
    _need_norm_dtypes(r, p)


def _norm(x, norm_weight, eps, residual):
    """ops.rms_norm (after the residual add): (the normalized x, the new residual stream; x without one)."""
    from . import ops
    return (ops.rms_norm(x, norm_weight, eps), x) if residual is None else ops.rms_norm(x, norm_weight, eps, residual)


def rms_norm_linear_gemm_glu(x, norm_weight, eps, weight, residual=None, bias=None, act=None):
    h, res_out = _norm(x, norm_weight, eps, residual)
    return gemm_ops.linear_packed_gemm_rd(h, weight, glu=True), res_out


def supports_gemv_glu(p: Problem) -> list[str]:
    r = _common(p)
    fmt, n, k = p.param("format"), p.param("n"), p.param("k")
    _need(r, fmt in _PACKED_NAMES, f"weight format {fmt} not a PackedWeight ({'/'.join(_PACKED_NAMES)})")
    _need(r, p.param("rows") == 2, f"M={p.param('rows')}: the two-row GLU GEMV takes 2 rows (decode, batch 2)")
    _need_glu_after_norm(r, p, "the GLU epilogue", "the GLU kernel")
    _need(r, n % 2 == 0, f"N={n} odd: not [gate | up]")
    _need(r, k % 32 == 0, f"K={k} not a multiple of 32")
    return r


def rms_norm_linear_gemv_glu(x, norm_weight, eps, weight, residual=None, bias=None, act=None):
    h, res_out = _norm(x, norm_weight, eps, residual)
    k = h.shape[-1]
    out = _empty((*h.shape[:-1], weight.shape[0] // 2), h.dtype, h.device)
    cuda_ops.gemv_mt_launch(out, h.reshape(-1, k), weight, glu=True)
    return out, res_out


def supports_unfused(p: Problem) -> list[str]:
    return [] if p.device == "cuda" else [f"device is {p.device}: the reference is the same composition"]


def _launch_norm_gemv(kernels, out, x, norm_weight, eps, weight, residual, bias, rows_per_out, *extra, gp=None):
    """One normed-input GEMV launch of `kernels`' instance for the weight's format and shape (the
    arguments every _rn kernel takes, then `extra`); returns the new residual stream (x without a
    residual). rows_per_out: weight rows per output row (2 with the GLU). gp: the norm-weight-first
    entries, taken under NORM_WEIGHT_FIRST where they hold the format and shape."""
    n, k = weight.shape[0], x.shape[-1]
    shape = gemv_m1_shape(weight.kind, n, k, normed=True)
    res_out, norm = _norm_in_args(x, norm_weight, eps, residual)
    kernel = kernels[(weight.kind, shape)]
    first = _pdl_runs(x.device) if NORM_WEIGHT_FIRST is None else NORM_WEIGHT_FIRST
    if first and gp and (weight.kind, shape) in gp:
        kernel = gp[(weight.kind, shape)]
    cuda_ops._launch(kernel, *gemv_m1_dims(n // rows_per_out, shape, rows_per_out),
                     out.data_ptr(), x.data_ptr(), weight.q.data_ptr(), _ptr(weight.qh), weight.meta.data_ptr(),
                     _ptr(bias), n, k, weight.group_size // 32, *norm, *extra, device=x.device, smem=k * 2)
    return res_out


def _pdl_runs(device: torch.device) -> bool:
    """Whether launches on `device` take PDL (False for the CPU tensors the host-side tests launch with)."""
    return device.type == "cuda" and pdl_enabled(cuda_ops.cuda_index(device))


def _norm_in_args(x, norm_weight, eps, residual) -> tuple:
    """(the new residual stream: x without a residual, the norm prologue's arguments: res, norm_w, res_out, eps)."""
    res_out = _empty(x.shape, x.dtype, x.device) if residual is not None else x
    return res_out, (_ptr(residual), norm_weight.data_ptr(), _ptr(res_out) if residual is not None else 0, float(eps))


def rms_norm_linear_cuda(x, norm_weight, eps, weight, residual=None, bias=None, act=None):
    out = _empty((*x.shape[:-1], weight.shape[0] // (2 if act else 1)), x.dtype, x.device)
    return out, _launch_norm_gemv(_GLU if act else _PLAIN, out, x, norm_weight, eps, weight, residual, bias,
                                  2 if act else 1, gp=_GP["rn_glu" if act else "rn"])


def rms_norm_qkv_rotary_cache_cuda(x, norm_weight, eps, weight, residual, bias, positions, head_dim, cos_sin_cache,
                                   is_neox, key_cache, value_cache, slot_mapping, num_heads, num_kv_heads):
    q = _empty((*x.shape[:-1], num_heads * head_dim), x.dtype, x.device)
    return q, _launch_norm_gemv(_ROPE, q, x, norm_weight, eps, weight, residual, bias, 1, *rope_args(
        positions, head_dim, cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads, num_kv_heads),
        gp=_GP["rn_rope"])


def rms_norm_qkv_rotary_cache_mix(x, norm_weight, eps, weight, residual, bias, positions, head_dim, cos_sin_cache,
                                  is_neox, key_cache, value_cache, slot_mapping, num_heads, num_kv_heads):
    q = _empty((*x.shape[:-1], num_heads * head_dim), x.dtype, x.device)
    res_out, norm = _norm_in_args(x, norm_weight, eps, residual)
    launch_mix(_MIX_RN_ROPE, q, x, weight, bias, *norm, *rope_args(positions, head_dim, cos_sin_cache, is_neox,
                                                                   key_cache, value_cache, slot_mapping, num_heads,
                                                                   num_kv_heads), smem=x.shape[-1] * 2)
    return q, res_out


def rms_norm_qkv_rotary_cache_unfused(x, norm_weight, eps, weight, residual, bias, positions, head_dim,
                                      cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads,
                                      num_kv_heads):
    from . import ops
    y, res_out = ops.rms_norm_linear(x, norm_weight, eps, weight, residual, bias)
    q, k, v = y.split([num_heads * head_dim, num_kv_heads * head_dim, num_kv_heads * head_dim], dim=-1)
    return ops.rotary_and_cache(positions, q, k, v, head_dim, cos_sin_cache, is_neox, key_cache, value_cache,
                                slot_mapping), res_out


def rms_norm_linear_unfused(x, norm_weight, eps, weight, residual=None, bias=None, act=None):
    from . import ops
    h, res_out = _norm(x, norm_weight, eps, residual)
    y = ops.linear(h, weight, bias)
    return (ops.silu_and_mul(y) if act else y), res_out


def register(reg: KernelRegistry) -> None:
    for op, fused, unfused, supports in (
            ("rms_norm_linear", rms_norm_linear_cuda, rms_norm_linear_unfused, supports_gemv_norm),
            ("rms_norm_qkv_rotary_cache", rms_norm_qkv_rotary_cache_cuda, rms_norm_qkv_rotary_cache_unfused,
             supports_gemv_norm_rope)):
        reg.register(Provider("cuda_gemv_norm", op, fused, available=available, supports=supports))
        reg.register(Provider("unfused", op, unfused, supports=supports_unfused))
        # rms_norm_linear: between the one-row GEMV and the unfused route, the GLU forms for batches (the
        # register-direct GEMM's from 3 rows, the two-row GEMV's at 2)
        reg.priority.setdefault(op, ["cuda_gemv_norm", "cuda_gemv_mix", "cuda_pack_gemm_rd",
                                     *(["cuda_gemv_glu"] if op == "rms_norm_linear" else []), "unfused"])
    reg.register(Provider("cuda_gemv_mix", "rms_norm_qkv_rotary_cache", rms_norm_qkv_rotary_cache_mix,
                          available=available, supports=supports_gemv_mix_rope))
    reg.register(Provider("cuda_pack_gemm_rd", "rms_norm_linear", rms_norm_linear_gemm_glu, available=available,
                          supports=supports_gemm_glu))
    reg.register(Provider("cuda_pack_gemm_rd", "rms_norm_qkv_rotary_cache", rms_norm_qkv_rotary_cache_gemm,
                          available=available, supports=supports_gemm_rope))
    reg.register(Provider("cuda_gemv_glu", "rms_norm_linear", rms_norm_linear_gemv_glu, available=available,
                          supports=supports_gemv_glu))
