"""Attention providers: paged attention (split-KV decode/verify `cuda_split_kv`, sm80+ decode
`cuda_decode_rd`, tensor-core prefill `cuda_flash_prefill`, torch SDPA prefill on sm80+) and the FP8
KV-cache write, registered into the op registry on import (ops.py imports this module last). The
Volta shapes run attention_flash.cuh, cuda_decode_rd csrc/attention_decode_rd.cu.

FP8 KV caches: a cache tensor of dtype torch.float8_e4m3fn or torch.float8_e5m2 (the format travels
with the tensor; kernels see bytes), one float scale per tensor passed as `k_scale` / `v_scale` to
`ops.reshape_and_cache` and `ops.paged_attention` (stored = fp8(x / scale), round to nearest even,
saturating; read = float(stored) * scale; reference.py holds the semantics).

Hot path per call: a Problem + dict lookup (ops), then here a few host ints from the metadata's
*_cpu mirrors (no device sync) and one launch (decode: the split-KV merge is fused into it) or two
(prefill with several partitions, or a captured decode whose counter array is too small: then
attn_reduce merges). Partition count is sized from `metadata.max_seq_len` and the GPU's SM count,
so a CUDA graph captured with the largest max_seq_len it will replay stays valid.
"""

from __future__ import annotations

import functools
import math

import torch

from . import reference as ref
from . import cuda_ops
from .attention_metadata import batch_bucket
from .cuda_ops import _aligned, _common, _empty, _need, available
from .driver import Kernel
from .registry import KernelRegistry, Problem, Provider

LOG2E = 1.4426950408889634
HEAD_DIMS = (64, 128, 256)
_KV = {str(d).removeprefix("torch."): kind for d, (_, kind) in cuda_ops.CACHE_ELEMENTS.items()}  # dtype name -> suffix
_FP8_UNIT = {"e4m3": 256.0, "e5m2": 1.0}  # E4M3 bytes decode to value * 2^-8 (attention_fp8.cuh)
WORKSPACE_LIMIT = 256 << 20  # bytes of FP32 partials before the partition count is cut
BLOCKS_PER_SM = 2  # resident 128-thread attention blocks per SM (registers; sm_70 and sm_90 alike)
MIN_PART = 64  # keys per partition at least (one 64-key step: short contexts are latency-bound)
REDUCE_MAX_PARTS = 1024  # attn_reduce weighs the partitions in shared memory (csrc/attention_decode.cu)

_SIG = "ppppppppp" "i" "q" "iiiiiiiiii" "fff"  # prefill: (out, part_o, part_ml, q, ..., qsl, meta_ready, ...)
_SIG_FUSED = "pppppppppp" "i" "q" "iiiiiiiiii" "fff"  # decode: (out, part_o, part_ml, counters, q, ...)
_KV_KINDS = tuple(_KV.values())
# Tile shapes of attention_flash.cuh per head dim, as attention_decode.cu / attention_prefill.cu
# instantiate them: (rows per block, keys per step).
DECODE_TILE = {64: (16, 64), 128: (16, 64), 256: (16, 32)}
PREFILL_TILE = {64: (64, 64), 128: (64, 32), 256: (32, 16)}
_DECODE = {(d, kv): Kernel("attention_decode.cu", f"attn_decode_d{d}_{kv}", _SIG_FUSED, pdl=True)
           for d in HEAD_DIMS for kv in _KV_KINDS}
_PREFILL = {(d, kv): Kernel("attention_prefill.cu", f"attn_prefill_d{d}_{kv}", _SIG) for d in HEAD_DIMS for kv in _KV_KINDS}
# sm_80+ decode with K / V straight into mma.sync fragments (csrc/attention_decode_rd.cu), GQA group <= 8.
# Its entries per (form, head dim), for FP16 / E4M3 / E5M2 caches: (keys per step of a block, threads,
# resident blocks per SM its registers are held to). w4: 4-warp blocks, one FP16 / two FP8 register sets
# of loads (D 256: one set, 2 per SM; FP16 with Q in shared memory, as its set is 128 registers); w1:
# one-warp blocks, the route when the (request, KV head) groups fill more than one wave of w4 blocks;
# deep: two FP16 / three FP8 sets (decode_rd_form says when each runs).
DECODE_RD_FORMS = {("w4", 64): (64, 128, 3), ("w4", 128): (64, 128, 3), ("w4", 256): (64, 128, 2),
                   ("w1", 64): (16, 32, 12), ("w1", 128): (16, 32, 12), ("deep", 128): (64, 128, 2)}
DECODE_RD_DIMS, DECODE_RD_MAX_GROUP, DECODE_RD_ROWS = sorted({d for _, d in DECODE_RD_FORMS}), 8, 16
_RD_SUFFIX = {"w4": "", "w1": "_w1", "deep": "_deep"}
_DECODE_RD = {(form, d, kv): Kernel("attention_decode_rd.cu", f"attn_decode_rd_d{d}_{kv}{_RD_SUFFIX[form]}",
                                    _SIG_FUSED, pdl=True) for form, d in DECODE_RD_FORMS for kv in _KV_KINDS}
# D 128, w4 with per-block timestamps, not routed (tools/gpu/decode_trace.py)
_DECODE_RD_TRACE = {("w4", 128, kv): Kernel("attention_decode_rd.cu", f"attn_decode_rd_d128_{kv}_trace",
                                            _SIG_FUSED + "p", pdl=True) for kv in _KV_KINDS}
_REDUCE = Kernel("attention_decode.cu", "attn_reduce", "pppiiiif")
_CACHE_FP8 = {kv: Kernel("attention_cache.cu", f"reshape_and_cache_{kv}", "pppppqqiff") for kv in ("e4m3", "e5m2")}


@functools.lru_cache(maxsize=None)
def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":  # host-side tests with intercepted launches: a V100's 80 SMs
        return 80
    return torch.cuda.get_device_properties(cuda_ops.cuda_index(device)).multi_processor_count


def _launch(*args, **kwargs):
    cuda_ops._launch(*args, **kwargs)  # looked up per call (tests intercept it)


def _kv_kind(cache: torch.Tensor) -> str:
    return _KV[str(cache.dtype).removeprefix("torch.")]


# -- admission -----------------------------------------------------------------------------------
def supports_paged(p: Problem) -> list[str]:
    r = _common(p)
    d, kv, bs = p.param("head_dim"), p.param("kv_dtype"), p.param("block_size", 16)
    _need(r, d in HEAD_DIMS, f"head_dim {d} not in {HEAD_DIMS}")
    _need(r, kv in _KV, f"KV cache dtype {kv} not float16/float8_e4m3fn/float8_e5m2")
    _need(r, isinstance(bs, int) and bs >= 8 and bs & (bs - 1) == 0,
          f"block_size {bs} not a power of 2 >= 8 (page ids are staged per 512 keys; no upper limit)")
    _need(r, (p.param("gqa") or 0) >= 1, "fewer query heads than KV heads")
    _need(r, p.param("layout_ok", True), "query not [T, Hq, D] with contiguous heads, or caches not contiguous/same dtype")
    return r


def supports_flash_prefill(p: Problem) -> list[str]:
    """The tensor-core prefill tiles (64 query rows x 64/32/16 keys); decode and verify (<= 16 query
    tokens per request) go to cuda_split_kv, whose warps split the keys of 16-row tiles instead."""
    r = supports_paged(p)
    _need(r, p.param("phase") == "prefill", f"phase {p.param('phase')}: prefill tiles are for > 16 query tokens")
    return r


def supports_decode_rd(p: Problem) -> list[str]:
    """The register-direct decode kernel: one query token per request, sm_80+ (mma.sync m16n8k16),
    head dim 64 / 128 / 256, GQA group <= 8; otherwise cuda_split_kv (the Volta kernel) runs. H200,
    graphed, against it: D 256 E4M3 / E5M2 batch 8 x 16K 32/4 heads 37.9 / 36.9 -> 80.6 / 80.9% of copy,
    batch 4 x 8K 16/8 heads 38.5 -> 75.3% (s21 call 10); FP16 8 x 16K 71.2 -> 94.2%, 4 x 8K 16/8 70.3 ->
    87.5% (s22 call 1)."""
    r = supports_paged(p)
    _need(r, p.device == "cuda" and p.capability is not None and p.capability >= (8, 0),
          f"{p.device} {p.capability}: mma.sync m16n8k16 needs sm_80+ (Volta runs cuda_split_kv)")
    _need(r, p.param("phase") == "decode", f"phase {p.param('phase')}: one query token per request only")
    _need(r, p.param("head_dim") in DECODE_RD_DIMS, f"head_dim {p.param('head_dim')} not in {tuple(DECODE_RD_DIMS)}")
    _need(r, (p.param("gqa") or 0) <= DECODE_RD_MAX_GROUP,
          f"GQA group {p.param('gqa')} > {DECODE_RD_MAX_GROUP} (the fragment's 8 head columns)")
    return r


def supports_cache_fp8(p: Problem) -> list[str]:
    r = _common(p)
    kv = p.param("kv_dtype")
    _need(r, kv in ("float8_e4m3fn", "float8_e5m2"), f"KV cache dtype {kv} not FP8 (float8_e4m3fn/float8_e5m2)")
    _need(r, p.param("value_dtype") == "float16", f"value dtype {p.param('value_dtype')} not float16")
    _need(r, p.param("slot_dtype") == "int64", f"slot_mapping dtype {p.param('slot_dtype')} not int64")
    _need(r, p.param("layout_ok", True), "key/value not [T, Hk, D] with contiguous heads, or caches not contiguous")
    return r


# -- provider functions --------------------------------------------------------------------------
def split_kv_plan(batch: int, hk: int, nchunks: int, span: int, key_tile: int, sms: int,
                  n_tokens: int, hq: int, head_dim: int, blocks_per_sm: int = BLOCKS_PER_SM) -> tuple[int, int]:
    """(nparts, part): partitions of the key span so that the blocks fill one wave of
    BLOCKS_PER_SM x sms resident blocks, each a multiple of the key tile and >= MIN_PART keys, the
    FP32 partials within WORKSPACE_LIMIT. `span` is the longest the launch may see (a CUDA graph is
    captured once for every context up to it); the kernel spreads a shorter request's keys over
    fewer of the partitions (flash_request_part); those past its keys write empty partials. One wave:
    blocks beyond it would only queue behind the first (each partition streams its keys with
    prefetch, so longer partitions cost no efficiency). H200 s26 (tools/gpu/decode_rd_ab.py rd_<form>p<N>,
    graphed): planned for 2 / 4 / 6 / 8 blocks per SM instead of the 4-warp form's 3, E4M3 4 x 8K went
    22.3 -> 26.8 / 30.6 / 28.1 / 32.3 us, FP16 4 x 16K 65.5 -> 86.0 / 78.0 / 69.8 / 75.0; the deep form
    at 2 -> 8 / 16, FP16 64 x 512 34.9 -> 45.2 / 57.3."""
    span = max(span, 1)
    per, slots = max(1, batch * hk * nchunks), blocks_per_sm * sms
    if per >= slots:  # the row chunks alone fill the GPU (prefill): no partials to merge
        return 1, -(-span // key_tile) * key_tile
    nparts = max(1, slots // per)
    part = max(MIN_PART, -(-span // nparts))
    while True:
        part = -(-part // key_tile) * key_tile
        nparts = -(-span // part)
        if nparts == 1 or (nparts <= REDUCE_MAX_PARTS and nparts * n_tokens * hq * head_dim * 4 <= WORKSPACE_LIMIT):
            return nparts, part
        part *= 2


def _flash(kernels, tiles, query, key_cache, value_cache, metadata, scale, sliding_window, logit_soft_cap,
           k_scale, v_scale, fused=False, blocks_per_sm=BLOCKS_PER_SM, threads=128, trace=None):
    """One launch of `kernels` (FLASH_ENTRY_FUSED ones when `fused`: decode), plus attn_reduce when
    the keys are split (nparts > 1) and the merge is not fused into that launch."""
    t, hq, d = query.shape
    _, bs, hk, _ = key_cache.shape
    out = _empty(query.shape, query.dtype, query.device)
    b = metadata.num_requests
    if t == 0 or b == 0:
        return out
    kv = _kv_kind(key_cache)
    assert value_cache.dtype == key_cache.dtype, "key and value caches must share a dtype"
    unit = _FP8_UNIT.get(kv, 1.0)
    k_mul, v_mul = (k_scale * unit, v_scale * unit) if kv != "f16" else (1.0, 1.0)
    cap = float(logit_soft_cap or 0.0)
    window = int(sliding_window or 0)
    group = hq // hk
    rows, key_tile = tiles[d]
    nchunks = -(-metadata.max_query_len * group // rows)
    span = metadata.max_seq_len if window <= 0 else min(metadata.max_seq_len, window + metadata.max_query_len - 1)
    # planned for the batch bucket (a CUDA graph's batch), so eager and captured decode split alike
    planned_t = t if metadata.max_query_len > 1 else batch_bucket(t)
    nparts, part = split_kv_plan(batch_bucket(b), hk, nchunks, span, key_tile, _sm_count(query.device), planned_t,
                                 hq, d, blocks_per_sm)
    part_o = part_ml = None
    if nparts > 1:
        part_o = torch.empty((nparts, t, hq, d), dtype=torch.float32, device=query.device)
        part_ml = torch.empty((nparts, t, hq, 2), dtype=torch.float32, device=query.device)
    if query.stride(0) % 8 or not _aligned(query):  # 128-bit query loads
        query = query.contiguous()
    bt = metadata.block_tables.int().contiguous()  # no-ops for the int32 metadata; kept alive to the launch
    seq_lens, qsl = metadata.seq_lens.int(), metadata.query_start_loc.int()
    qk = scale * k_mul * (1.0 if cap > 0 else LOG2E)
    # fused merge: one counter per (request, KV head, row chunk); none (null) -> attn_reduce below
    counters = cuda_ops.split_counters(query.device, b * hk * nchunks) if fused and nparts > 1 else None
    extra = () if trace is None else (cuda_ops.trace_pointer(trace, nchunks * hk * b * nparts, query.device, "trace"),)
    _launch(kernels[(d, kv)], (nchunks, hk, b * nparts), (threads, 1, 1), out.data_ptr(),
            0 if part_o is None else part_o.data_ptr(), 0 if part_ml is None else part_ml.data_ptr(),
            *((0 if counters is None else counters.data_ptr(),) if fused else ()),
            query.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(), bt.data_ptr(),
            seq_lens.data_ptr(), qsl.data_ptr(), int(fused and metadata.host_written), query.stride(0),
            t, hq, hk, group, bs.bit_length() - 1, bt.stride(0), window, nparts, part, nchunks,
            float(qk), cap, float(v_mul), *extra, device=query.device)
    if nparts > 1 and counters is None:
        _launch(_REDUCE, (t, hq, 1), (d, 1, 1), out.data_ptr(), part_o.data_ptr(), part_ml.data_ptr(),
                t, hq, d, nparts, float(v_mul), device=query.device)
    return out


def paged_attention(query, key_cache, value_cache, metadata, scale, sliding_window=None, logit_soft_cap=None,
                    k_scale=1.0, v_scale=1.0):
    """Split-KV paged attention in the decode shape (16-row tiles, warps split the keys)."""
    return _flash(_DECODE, DECODE_TILE, query, key_cache, value_cache, metadata, scale, sliding_window,
                  logit_soft_cap, k_scale, v_scale, fused=True)


def decode_rd_form(batch: int, hk: int, sms: int, head_dim: int) -> str:
    """The register-direct decode's block form for the batch bucket's (request, KV head) groups:
    "deep" (D 128: 4-warp blocks, 2 per SM, two FP16 / three FP8 register sets of loads per warp) for
    more than one and up to four groups per SM; else "w4" (4-warp blocks, 3 per SM, one FP16 / two FP8
    sets) while the groups fit one wave of them, "w1" (12 one-warp blocks per SM) past it.
    H200, 32/8 heads D 128, graphed (s20 calls 7-9): deep FP16 batch 32 / 64 x 512 21.1 / 42.2 ->
    19.7 / 38.9 us (64 against w1), x 1024 37.3 / 74.9 -> 36.2 / 71.5, batch 128 x 512 (1,024 groups)
    68.7 -> 73.4 (w1 stays); deep FP8 batch 32 / 64 x 512 13.8 / 27.0 -> 12.7 / 24.7 us. Few groups
    (batch <= 16) keep w4: deep FP8 batch 4 / 16 x 8K-16K 1.5-2.5% slower, and deep FP16 at batch 1
    took the llama3-8b q4_0 decode step from 2,004 / 2,026 to 2,058 / 2,129 us (two rounds), though
    batch 1 x 512 alone is level and 1 x 4K 11% faster. s14: one-warp blocks 3-10% faster than 4-warp
    ones past one wave, 6-45% slower within it."""
    groups = batch_bucket(batch) * hk
    if ("deep", head_dim) in DECODE_RD_FORMS and sms < groups <= 4 * sms:
        return "deep"
    if ("w1", head_dim) in DECODE_RD_FORMS and groups > DECODE_RD_FORMS[("w4", head_dim)][2] * sms:
        return "w1"
    return "w4"  # (D 256: the only form)


def paged_attention_rd(query, key_cache, value_cache, metadata, scale, sliding_window=None, logit_soft_cap=None,
                       k_scale=1.0, v_scale=1.0, form=None, trace=None):
    """Split-KV paged decode, K / V register-direct (csrc/attention_decode_rd.cu), merge fused. `form`:
    decode_rd_form's pick by default; one of DECODE_RD_FORMS' for the head dim to force it.
    `trace`: an int64 CUDA tensor of 16 per block: the 4-warp kernel (D 128) records its blocks'
    timestamps there (csrc common.cuh block_trace; tools/gpu/decode_trace.py reads them)."""
    d = query.shape[-1]
    entries = _DECODE_RD
    if trace is not None:
        if d != 128:
            raise ValueError(f"paged_attention_rd: trace entries are D 128 only, got head dim {d}")
        form, entries = "w4", _DECODE_RD_TRACE
    elif form is None:
        form = decode_rd_form(metadata.num_requests, key_cache.shape[2], _sm_count(query.device), d)
    elif (form, d) not in DECODE_RD_FORMS:
        have = ", ".join(f"{f} D {'/'.join(str(e) for f2, e in DECODE_RD_FORMS if f2 == f)}" for f in _RD_SUFFIX)
        raise ValueError(f"paged_attention_rd: no form {form!r} for head dim {d} (entries: {have})")
    key_tile, threads, per_sm = DECODE_RD_FORMS[(form, d)]
    kernels = {(d, kv): entries[(form, d, kv)] for kv in _KV_KINDS}
    return _flash(kernels, {d: (DECODE_RD_ROWS, key_tile)}, query, key_cache, value_cache, metadata, scale,
                  sliding_window, logit_soft_cap, k_scale, v_scale, fused=True, blocks_per_sm=per_sm, threads=threads,
                  trace=trace)


def flash_prefill(query, key_cache, value_cache, metadata, scale, sliding_window=None, logit_soft_cap=None,
                  k_scale=1.0, v_scale=1.0):
    """Paged causal prefill in the prefill shape (64/32-row tiles sharing each K/V tile)."""
    return _flash(_PREFILL, PREFILL_TILE, query, key_cache, value_cache, metadata, scale, sliding_window,
                  logit_soft_cap, k_scale, v_scale)


def reshape_and_cache_fp8(key, value, key_cache, value_cache, slot_mapping, k_scale=1.0, v_scale=1.0):
    t = key.shape[0]
    row = key.shape[1] * key.shape[2]
    if not t:
        return
    vec = (row % 8 == 0 and key.stride(0) % 8 == 0 and value.stride(0) % 8 == 0 and _aligned(key, value)
           and _aligned(key_cache, value_cache, n=8) and value_cache.dtype == key_cache.dtype)
    if not vec:  # odd rows or unaligned views: the reference (same bit rules)
        return ref.reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, k_scale, v_scale)
    _launch(_CACHE_FP8[_kv_kind(key_cache)], (t, 1, 1), (max(32, min(256, (row // 8 + 31) // 32 * 32)), 1, 1),
            key_cache.data_ptr(), value_cache.data_ptr(), key.data_ptr(), value.data_ptr(), slot_mapping.data_ptr(),
            key.stride(0), value.stride(0), row, float(k_scale), float(v_scale), device=key.device)


def supports_sdpa_prefill(p: Problem) -> list[str]:
    """torch SDPA for prefill on GPUs newer than Volta (flash kernels need sm80+), FP16/BF16 caches."""
    r = []
    _need(r, p.device == "cuda" and p.capability is not None and p.capability >= (8, 0),
          f"{p.device} {p.capability}: SDPA route is for sm80+ (Volta uses the NVRTC kernels)")
    _need(r, p.param("phase") == "prefill", f"phase {p.param('phase')}: SDPA route is for prefill (> 16 queries)")
    _need(r, p.dtype in ("float16", "bfloat16") and p.param("kv_dtype") == p.dtype,
          f"dtype {p.dtype} / KV {p.param('kv_dtype')}: needs FP16/BF16 query and cache of the same dtype")
    _need(r, not p.param("soft_cap"), "logit soft-cap: SDPA has none")
    _need(r, not p.graph_capture, "per-request host loop: not for graph capture")
    return r


def sdpa_prefill(query, key_cache, value_cache, metadata, scale, sliding_window=None, logit_soft_cap=None):
    """Per request: gather its pages, one SDPA call (causal from the top-left when the whole sequence
    is new, else an explicit bottom-right causal/window mask)."""
    import torch.nn.functional as F

    t, hq, d = query.shape
    bs, hk = key_cache.shape[1], key_cache.shape[2]
    out = torch.empty_like(query)
    qsl, lens = metadata.query_start_loc_cpu, metadata.seq_lens_cpu
    for i, ctx in enumerate(lens):
        qs, qe = qsl[i], qsl[i + 1]
        if qe == qs:
            continue
        nblk = -(-ctx // bs)
        blocks = metadata.block_tables[i, :nblk].long()
        k = key_cache[blocks].reshape(nblk * bs, hk, d)[:ctx].transpose(0, 1)[None]
        v = value_cache[blocks].reshape(nblk * bs, hk, d)[:ctx].transpose(0, 1)[None]
        q = query[qs:qe].transpose(0, 1)[None]
        n = qe - qs
        mask, causal = None, False
        if n == ctx and not sliding_window:
            causal = True
        else:
            qpos = torch.arange(ctx - n, ctx, device=query.device)[:, None]
            kpos = torch.arange(ctx, device=query.device)[None, :]
            mask = kpos <= qpos
            if sliding_window:
                mask &= kpos > qpos - sliding_window
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale,
                                           enable_gqa=hq != hk)
        out[qs:qe] = o[0].transpose(0, 1)
    return out


def register(reg: KernelRegistry) -> None:
    reg.register(Provider("cuda_split_kv", "paged_attention", paged_attention, available=available,
                          supports=supports_paged))
    reg.register(Provider("cuda_decode_rd", "paged_attention", paged_attention_rd, available=available,
                          supports=supports_decode_rd))
    reg.register(Provider("cuda_flash_prefill", "paged_attention", flash_prefill, available=available,
                          supports=supports_flash_prefill))
    reg.register(Provider("torch_sdpa", "paged_attention", sdpa_prefill, supports=supports_sdpa_prefill))
    # sm80+: torch SDPA first for FP16/BF16 prefill (faster there: its flash kernels use sm80+ MMA;
    # ours are Volta's); it refuses sm70, FP8 caches, soft-cap and graph capture, where
    # cuda_flash_prefill runs. Decode: cuda_decode_rd on sm_80+ (group <= 8, D 64 / 128), else and for
    # verify cuda_split_kv.
    reg.priority.setdefault("paged_attention", ["torch_sdpa", "cuda_flash_prefill", "cuda_decode_rd",
                                                "cuda_split_kv"])
    reg.register(Provider("cuda_fp8", "reshape_and_cache", reshape_and_cache_fp8, available=available,
                          supports=supports_cache_fp8))


def _register_default() -> None:
    from .registry import registry
    register(registry)


_register_default()
