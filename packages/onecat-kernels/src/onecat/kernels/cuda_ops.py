"""CUDA providers: the NVRTC-built csrc/ kernels behind the registry's ops.

Each provider has `available()` (GPU, driver, NVRTC present) and `supports(problem)` (reasons it
refuses one call shape); its function takes exactly the op's arguments, allocates outputs and
launches on torch's current stream. Variant choice inside a provider (128-bit vs narrow loads,
the M bound of the GEMV) depends only on alignment and sizes, never on semantics.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools

import torch

from . import build
from .driver import Kernel, driver_reasons, libcuda
from .registry import KernelRegistry, Problem, Provider
from .weights import PACKED_FORMATS, GGUFWeight, PackedWeight

POISON = False  # tests: fill fresh outputs with NaN so unwritten elements show up


@contextlib.contextmanager
def poison_outputs(enabled: bool = True):
    global POISON
    old, POISON = POISON, enabled
    try:
        yield
    finally:
        POISON = old


def _empty(shape, dtype, device) -> torch.Tensor:
    if POISON:
        return torch.full(shape, float("nan") if dtype.is_floating_point else -1, dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def _aligned(*ts, n: int = 16) -> bool:
    return all(t is None or t.data_ptr() % n == 0 for t in ts)


def _ptr(t) -> int:
    return 0 if t is None else t.data_ptr()


def trace_pointer(trace: torch.Tensor, blocks: int, device: torch.device, what: str) -> int:
    """The pointer a kernel's _trace entry takes (csrc common.cuh block_trace: 16 int64 per block of the
    launch's `blocks`), after checking `trace` can hold them; a ValueError naming `what` otherwise."""
    if not (trace.dtype == torch.int64 and trace.device == device and trace.is_contiguous()
            and trace.numel() >= 16 * blocks):
        raise ValueError(f"{what}: need a contiguous int64 tensor of >= {16 * blocks} elements on {device}, "
                         f"got {trace.dtype} {tuple(trace.shape)} on {trace.device}")
    return trace.data_ptr()


def cuda_index(device: torch.device) -> int:
    """The index of a CUDA device: its own, or the current device's for a bare 'cuda'."""
    return device.index if device.index is not None else torch.cuda.current_device()


def _launch(kernel: Kernel, grid, block, *args, device: torch.device, smem: int = 0) -> None:
    idx = cuda_index(device)
    if idx == torch.cuda.current_device():
        kernel(grid, block, *args, smem=smem, device=idx)
    else:
        with torch.cuda.device(idx):
            kernel(grid, block, *args, smem=smem, device=idx)


def _round32(n: int, lo: int = 32, hi: int = 1024) -> int:
    return max(lo, min(hi, (n + 31) // 32 * 32))


# -- admission -----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def available() -> list[str]:
    reasons = driver_reasons()
    if not build.toolchains():
        reasons.append(f"NVRTC 12.9 not installed: pip install {build.NVRTC12_PIN}")
    return reasons


def _common(p: Problem, dtypes=("float16",)) -> list[str]:
    reasons = []
    if p.device != "cuda" or p.capability is None:
        reasons.append(f"device is {p.device}, not a CUDA GPU")
    elif p.capability < (7, 0):
        reasons.append(f"capability {p.capability[0]}.{p.capability[1]} < 7.0")
    else:
        reasons += build.toolchain_reasons(p.capability[0] * 10 + p.capability[1])
    if p.dtype not in dtypes:
        why = " (Volta has no BF16 math)" if p.dtype == "bfloat16" else ""
        reasons.append(f"dtype {p.dtype} not {'/'.join(dtypes)}{why}")
    return reasons


def _need(reasons: list[str], ok: bool, why: str) -> None:
    if not ok:
        reasons.append(why)


def supports_rms_norm(p: Problem) -> list[str]:
    r = _common(p)
    _need(r, p.param("weight_dtype") == "float16", f"weight dtype {p.param('weight_dtype')} not float16")
    _need(r, p.param("residual_dtype") in (None, "float16"), f"residual dtype {p.param('residual_dtype')} not float16")
    _need(r, p.param("hidden", 0) <= 16384, f"hidden {p.param('hidden')} > 16384")
    _need(r, p.param("contiguous", True), "x/weight/residual not contiguous")
    return r


def supports_rotary(p: Problem) -> list[str]:
    r = _common(p)
    d, rd, neox = p.param("head_dim"), p.param("rotary_dim"), p.param("neox")
    _need(r, d % 2 == 0 and rd <= d, f"head_dim {d} odd or rotary_dim {rd} > head_dim")
    _need(r, rd % (4 if neox else 2) == 0, f"rotary_dim {rd} not a multiple of {4 if neox else 2}")
    _need(r, p.param("cache_dtype") == "float32", f"cos_sin_cache dtype {p.param('cache_dtype')} not float32")
    _need(r, p.param("pos_dtype") == "int64", f"positions dtype {p.param('pos_dtype')} not int64")
    _need(r, p.param("k_dtype") == "float16", f"k dtype {p.param('k_dtype')} not float16")
    _need(r, p.param("layout_ok", True), "q/k not 2-D [T, H*D] rows with unit stride, even row strides")
    return r


def supports_act(p: Problem) -> list[str]:
    r = _common(p)
    _need(r, p.param("contiguous", True), "x not contiguous")
    _need(r, p.param("approximate", "tanh") in ("tanh", "none"), f"approximate={p.param('approximate')!r}")
    return r


def supports_linear(p: Problem) -> list[str]:
    r = _common(p)
    fmt = p.param("format")
    _need(r, fmt in ("dense", "gguf_q4_0", "gguf_q8_0"), f"weight format {fmt} not dense/gguf_q4_0/gguf_q8_0")
    _need(r, isinstance(p.param("rows"), int), f"M={p.param('rows')} rows: the GEMV covers M <= 16")
    if fmt == "dense":
        _need(r, p.param("weight_dtype") == "float16", f"weight dtype {p.param('weight_dtype')} not float16")
        _need(r, p.param("k") % 8 == 0, f"K={p.param('k')} not a multiple of 8")
    _need(r, p.param("bias") in (None, "float16"), f"bias dtype {p.param('bias')} not float16")
    _need(r, p.param("contiguous", True) and p.param("aligned16", True), "x/weight not contiguous and 16-byte aligned")
    return r


def supports_linear_hmma(p: Problem) -> list[str]:
    r = supports_linear(p)
    rows = p.param("rows")
    _need(r, p.param("format") == "dense", f"format {p.param('format')}: tensor-core GEMV is dense-only")
    _need(r, not isinstance(rows, int) or rows >= 8, f"M={rows}: tensor cores only pay from M >= 8")
    _need(r, p.param("n") % 32 == 0, f"N={p.param('n')} not a multiple of 32")
    _need(r, p.param("k") % 16 == 0, f"K={p.param('k')} not a multiple of 16")
    _need(r, p.param("weight_aligned32") is not False, "weight not 32-byte aligned (wmma fragment loads)")
    return r


def supports_linear_packed(p: Problem) -> list[str]:
    r = _common(p)
    fmt = p.param("format")
    _need(r, fmt in _PACKED_NAMES, f"weight format {fmt} not a PackedWeight ({'/'.join(_PACKED_NAMES)})")
    _need(r, isinstance(p.param("rows"), int), f"M={p.param('rows')} rows: the packed GEMV covers M <= 16")
    _need(r, p.param("k") % 32 == 0, f"K={p.param('k')} not a multiple of 32")
    _need(r, p.param("bias") in (None, "float16"), f"bias dtype {p.param('bias')} not float16")
    _need(r, p.param("contiguous", True) and p.param("aligned16", True), "x not contiguous and 16-byte aligned")
    return r


def supports_cache(p: Problem) -> list[str]:
    r = _common(p)
    _need(r, p.param("kv_dtype") == "float16", f"KV cache dtype {p.param('kv_dtype')} not float16")
    _need(r, p.param("value_dtype") == "float16", f"value dtype {p.param('value_dtype')} not float16")
    _need(r, p.param("slot_dtype") == "int64", f"slot_mapping dtype {p.param('slot_dtype')} not int64")
    _need(r, p.param("layout_ok", True), "key/value not [T, Hk, D] with contiguous heads, or caches not contiguous")
    return r


def supports_argmax(p: Problem) -> list[str]:
    r = _common(p, dtypes=("float16", "float32"))
    _need(r, p.param("row_contiguous", True), "logits rows not contiguous")
    return r


# -- kernels and provider functions --------------------------------------------------------------
_RMS = {(v, res): Kernel("rms_norm.cu", f"rms_norm{'_add' if res else ''}_v{v}", "pppppif", pdl=True)
        for v in (8, 1) for res in (False, True)}
_ROT = {(neox, v): Kernel("rotary.cu", f"rotary_{'neox' if neox else 'gptj'}_v{v}", "ppppppqqiiii")
        for neox in (True, False) for v in (8, 2)}
_ACT = {(a, v): Kernel("activation.cu", f"{a}_and_mul_v{v}", "ppi", pdl=True)
        for a in ("silu", "gelu_tanh", "gelu_erf") for v in (8, 1)}
_CACHE = {v: Kernel("cache.cu", f"reshape_and_cache_v{v}", "pppppqqi") for v in (8, 1)}
# The paged KV cache elements the CUDA kernels read and write: torch dtype -> (the runtime code of
# csrc/attention_fp8.cuh's KV_F16 / KV_E4M3 / KV_E5M2, the attention entries' name suffix). The attention,
# GEMM and GEMV epilogue tables derive theirs from this one.
CACHE_ELEMENTS = {torch.float16: (0, "f16"), torch.float8_e4m3fn: (1, "e4m3"), torch.float8_e5m2: (2, "e5m2")}
_MT = (1, 2, 4, 8, 16)
_GEMV = {(f, mt): Kernel("gemv.cu", f"gemv_{f}_m{mt}", "ppppiii") for f in ("f16", "q4_0", "q8_0") for mt in _MT}
_PACKED_NAMES = tuple(f"packed_{f}" for f in PACKED_FORMATS)
_PMT = (1, 4, 16)
_PR = {4: 4, 16: 4}  # M = 2..16: rows of W per 128-thread block (csrc/gemv_packed.cu)
# (R rows per warp, U chunks per lane and row in flight, KS warps splitting K, "n" where the kernel
# does not prefetch and relies on more resident warps instead): gemv_r_<fmt>_r<R>u<U>k<KS><n>.
GEMV_M1_SHAPES = ((2, 1, 1, ""), (4, 1, 1, ""), (4, 1, 1, "n"), (8, 1, 1, "n"), (4, 1, 2, ""), (4, 1, 2, "n"),
                  (4, 2, 2, "n"))


def gemv_m1_shape(fmt: str, n: int, k: int, normed: bool = False) -> tuple[int, int, int, str]:
    """The M = 1 kernel shape per format and matrix (`normed`: the RMSNorm-in-front instances of
    linear_fused_ops, whose prologue changes what pays). Timed where decode runs them: chains of
    dependent GEMVs in one CUDA graph under programmatic dependent launch (tools/gpu/gemv_chain.py,
    benchmarks/results/h200-2026-11-30-s9/, us per GEMV):
    * few rows (N <= 8192) need K split across warps to fill the GPU; with K >= 4096 two chunks per
      row in flight (q4_0 4096 x 4096 5.5 -> 4.3, 4096 x 14336 15.3 -> 12.8) or the register
      prefetch, whose second step also loads before the wait (q4_k 4096 x 4096 6.4 -> 4.9; q6_k
      4096 x 14336 22.1 -> 16.0);
    * many rows want more resident warps and no prefetch (the LM head: one K-warp);
    * normed: one chunk in flight (their prologue holds the first loads: two per row cost q4_0's
      6144 x 4096 qkv 9.4 -> 12.2) and 8-warp blocks ("w8"), half the blocks re-reading x, the
      residual and the norm weight (q4_0 qkv 9.4 -> 8.1, gate_up 28672 x 4096 24.0 -> 22.6; q4_k
      qkv 8.8 -> 7.5, its gate_up no better). 16-warp blocks timed faster still in a chain of
      their own (q4_0 qkv 7.0) but slower in the decode step, behind the down projection (busy
      1,980 vs 1,886-1,890 us per llama3-8b step, s9 call 10): the chain is a filter, the step
      A/B decides;
    * short rows (K <= 1024: at most 32 chunks, one per lane) leave a second K-warp idle: many of them
      (SmolLM2's 49152 x 576 LM head) take 8 rows per warp and no split
      (benchmarks/results/h200-2026-11-30-s7/gemv-variants-smollm2-call4.txt)."""
    if k <= 1024 and n >= 16384 and fmt in ("q4_0", "q4_1", "q8_0", "awq"):
        return (8, 1, 1, "n")
    if fmt == "awq" and n >= 65536 and not normed:  # the LM head: 81.4 -> 78.8 us (128256 x 4096, H200 s19)
        return (8, 1, 1, "n")
    if fmt == "q8_0":
        return (4, 1, 2, "n")
    # a K split with U chunks in flight steps over 64 U chunks: rows of fewer leave the second
    # K-warp idle (SmolLM2's 576 x 1536 down: 48 chunks)
    long_rows = k >= 4096
    if fmt == "q6_k":
        if normed or not long_rows:
            return (2, 1, 1, "")
        if n >= 65536:  # the LM head: 113 -> 106 us (128256 x 4096)
            return (4, 2, 2, "n")
        return (4, 1, 2, "") if k >= 8192 else (4, 1, 2, "n")
    if fmt == "q4_k":
        if normed:
            return (4, 1, 2, "nw8") if n <= 8192 else (4, 1, 1, "n")
        if n <= 8192 and long_rows:
            return (4, 1, 2, "")
        return (4, 1, 1, "n") if n >= 65536 else (4, 1, 1, "")
    if normed:  # q4_0, q4_1, awq (8-warp instances: q4_0's)
        sfx = "nw8" if fmt == "q4_0" else "n"
        return (4, 1, 2, sfx) if n <= 8192 else (4, 1, 1, sfx)
    if n <= 8192:
        return (4, 2, 2, "n") if long_rows else (4, 1, 2, "n")
    return (4, 1, 1, "n")


def gemv_m1_kernel(fmt: str, r: int, u: int, ks: int = 1, sfx: str = "") -> Kernel:
    return Kernel("gemv_packed.cu", f"gemv_r_{fmt}_r{r}u{u}k{ks}{sfx}", "ppppppiiii", pdl=True)


def gemv_m1_dims(n_out: int, shape: tuple[int, int, int, str], rows_per_out: int = 1):
    """(grid, block) of an M = 1 kernel of `shape` (R, U, KS, SFX) writing n_out outputs, each from
    `rows_per_out` weight rows (2 with the GLU): a warp owns R weight rows, KS warps of a block share
    them, and a block has 8 warps in the "...w8" instances, 4 in the others."""
    warps = 8 if shape[3].endswith("w8") else 4
    return (-(-n_out // (gemv_m1_block_rows(shape) // rows_per_out)), 1, 1), (32 * warps, 1, 1)


def gemv_m1_block_rows(shape: tuple[int, int, int, str]) -> int:
    """Weight rows one block of an M = 1 kernel of `shape` owns: R a warp, (its warps / KS) row groups."""
    r, _, ks, sfx = shape
    return r * ((8 if sfx.endswith("w8") else 4) // ks)


def gemv_m1_launch(out, x, weight: PackedWeight, shape: tuple[int, int, int, str], bias=None) -> None:
    """One launch of the plain M = 1 kernel of `shape` (one of GEMV_M1_SHAPES): out[1, N] = x[1, K] W^T
    (+ bias)."""
    n, k = weight.shape
    _launch(_GEMV_M1[(weight.kind, tuple(shape))], *gemv_m1_dims(n, shape), out.data_ptr(), x.data_ptr(),
            weight.q.data_ptr(), _ptr(weight.qh), weight.meta.data_ptr(), _ptr(bias), 1, n, k,
            weight.group_size // 32, device=x.device)


_GEMV_PACKED = {(f, mt): Kernel("gemv_packed.cu", f"gemv_p_{f}_m{mt}", "ppppppiiii")
                for f in PACKED_FORMATS for mt in _PMT if mt > 1}
_GEMV_M1 = {(f, shape): gemv_m1_kernel(f, *shape) for f in PACKED_FORMATS for shape in GEMV_M1_SHAPES}
GEMV_MT_ROWS = (2, 4)  # M = 2..4 on the M = 1 walk: gemv_r_<fmt>_r4u1k<KS>n_t<MT> (MT = 2, 4; M = 3 runs MT 4)
_GEMV_MT = {(f, ks, mt): Kernel("gemv_packed.cu", f"gemv_r_{f}_r4u1k{ks}n_t{mt}", "ppppppiiii", pdl=True)
            for f in PACKED_FORMATS for ks in (1, 2) for mt in GEMV_MT_ROWS}
# ... with the GLU epilogue, two rows (gemv_r_<fmt>_r4u1k<KS>n_t2_glu: linear_fused_ops.cuda_gemv_glu)
_GEMV_MT_GLU = {(f, ks, 2): Kernel("gemv_packed.cu", f"gemv_r_{f}_r4u1k{ks}n_t2_glu", "ppppppiiii", pdl=True)
                for f in PACKED_FORMATS for ks in (1, 2)}
GEMV_MT_MAX = max(GEMV_MT_ROWS)  # rows up to which linear_packed takes them


def gemv_mt_shape(n: int) -> tuple[int, int, int, str]:
    """The M = 2..4 kernels' shape (R, U, KS, SFX): 4 rows per warp, one chunk in flight, no register
    prefetch (the rows of x hold the registers), K split over two warps where the rows are few (as
    gemv_m1_shape does for N <= 8192)."""
    return (4, 1, 2 if n <= 8192 else 1, "n")


def gemv_mt_launch(out, x, weight: PackedWeight, bias=None, glu: bool = False) -> None:
    """out[M, N] = x[M, K] W^T (+ bias) for M = 2..4 rows: the M = 1 kernel's walk with each weight chunk
    dequantized once for all rows (csrc/gemv_packed.cu gemv_rows MT > 1): the weights read once. glu
    (2 rows, no bias): W = [gate | up] and out[M, N / 2] = silu(gate) * up, the bits of the plain kernel
    then silu_and_mul."""
    m, k = x.shape[0], x.shape[-1]
    n = weight.shape[0]
    if not 2 <= m <= (2 if glu else GEMV_MT_MAX):
        raise ValueError(f"gemv_mt_launch: {m} rows of x; the{' GLU' if glu else ''} kernels take 2.."
                         f"{2 if glu else GEMV_MT_MAX}")
    shape = gemv_mt_shape(n)
    mt = next(v for v in GEMV_MT_ROWS if v >= m)
    kern = (_GEMV_MT_GLU if glu else _GEMV_MT)[(weight.kind, shape[2], mt)]
    _launch(kern, *gemv_m1_dims(n // 2 if glu else n, shape, 2 if glu else 1), out.data_ptr(), x.data_ptr(),
            weight.q.data_ptr(), _ptr(weight.qh), weight.meta.data_ptr(), _ptr(bias), m, n, k,
            weight.group_size // 32, device=x.device)
_HMMA = Kernel("gemv.cu", "gemv_f16_hmma", "ppppiii")
_ARGMAX = {k: Kernel("argmax.cu", f"argmax_{k}", "ppqi", pdl=True) for k in ("f16_v8", "f16_v1", "f32_v4", "f32_v1")}
_ARGMAX_SPLIT = {k: Kernel("argmax.cu", f"argmax_split_{k}", "ppppqii", pdl=True) for k in ("f16_v8", "f16_v1", "f32_v4", "f32_v1")}
ARGMAX_SPLIT_ROWS = 64  # up to this many rows the vocabulary is split over blocks (decode batches)
ARGMAX_CHUNK_LOADS = 512  # logits' 128-bit loads per split block: 256 threads x 2 (4K FP16 / 2K FP32)


def rms_norm(x, weight, eps, residual=None):
    h = x.shape[-1]
    rows = x.numel() // h if h else 0
    out = _empty(x.shape, x.dtype, x.device)
    res_out = _empty(x.shape, x.dtype, x.device) if residual is not None else None
    if rows:
        vec = 8 if h % 8 == 0 and _aligned(x, weight, residual, out, res_out) else 1
        threads = _round32(-(-(h // vec) // (4 if vec == 8 else 16)))
        _launch(_RMS[(vec, residual is not None)], (rows, 1, 1), (threads, 1, 1), out.data_ptr(),
                _ptr(res_out), x.data_ptr(), _ptr(residual), weight.data_ptr(), h, float(eps), device=x.device)
    return (out, res_out) if residual is not None else out


def rotary_embedding(positions, q, k, head_dim, cos_sin_cache, is_neox=True):
    t, r = q.shape[0], cos_sin_cache.shape[-1]
    nq, nk = q.shape[1] // head_dim, k.shape[1] // head_dim
    q_out = _empty((t, nq * head_dim), q.dtype, q.device)
    k_out = _empty((t, nk * head_dim), k.dtype, k.device)
    if t:
        unit = r // 2 if is_neox else r
        vec = 8 if (unit % 8 == 0 and head_dim % 8 == 0 and q.stride(0) % 8 == 0 and k.stride(0) % 8 == 0
                    and _aligned(q, k)) else 2
        per_head = unit // vec + (head_dim - r) // vec
        threads = _round32((nq + nk) * per_head, hi=256)
        _launch(_ROT[(bool(is_neox), vec)], (t, 1, 1), (threads, 1, 1), q_out.data_ptr(), k_out.data_ptr(),
                positions.data_ptr(), q.data_ptr(), k.data_ptr(), cos_sin_cache.data_ptr(), q.stride(0),
                k.stride(0), nq, nk, head_dim, r, device=q.device)
    return q_out, k_out


def _act_and_mul(kind: str, x):
    d = x.shape[-1] // 2
    out = _empty((*x.shape[:-1], d), x.dtype, x.device)
    rows = out.numel() // d if d else 0
    if rows:
        vec = 8 if d % 8 == 0 and _aligned(x) else 1
        chunks = -(-d // vec)
        threads = _round32(chunks, hi=256)
        _launch(_ACT[(kind, vec)], (rows, -(-chunks // threads), 1), (threads, 1, 1), out.data_ptr(),
                x.data_ptr(), d, device=x.device)
    return out


def silu_and_mul(x):
    return _act_and_mul("silu", x)


def gelu_and_mul(x, approximate="tanh"):
    return _act_and_mul("gelu_tanh" if approximate == "tanh" else "gelu_erf", x)


def linear(x, weight, bias=None):
    k = x.shape[-1]
    m, n = x.numel() // k, weight.shape[0]
    out = _empty((*x.shape[:-1], n), x.dtype, x.device)
    if m:
        mt = next(v for v in _MT if v >= m)
        if isinstance(weight, GGUFWeight):
            kern, wptr, block, per_block = _GEMV[(weight.ggml_type, mt)], weight.raw.data_ptr(), 256, 8
        else:
            kern, wptr, block, per_block = _GEMV[("f16", mt)], weight.data_ptr(), 128, 4 * (4 if mt <= 2 else 2)
        _launch(kern, (-(-n // per_block), 1, 1), (block, 1, 1), out.data_ptr(), x.data_ptr(), wptr,
                _ptr(bias), m, n, k, device=x.device)
    return out


def linear_hmma(x, weight, bias=None):
    k = x.shape[-1]
    m, n = x.numel() // k, weight.shape[0]
    out = _empty((*x.shape[:-1], n), x.dtype, x.device)
    _launch(_HMMA, (n // 32, 1, 1), (128, 1, 1), out.data_ptr(), x.data_ptr(), weight.data_ptr(),
            _ptr(bias), m, n, k, device=x.device)
    return out


def linear_packed(x, weight: PackedWeight, bias=None):
    """M <= 16 rows of x against a PackedWeight: one pass over the packed planes."""
    k = x.shape[-1]
    m, n = x.numel() // k, weight.shape[0]
    out = _empty((*x.shape[:-1], n), x.dtype, x.device)
    if m:
        mt = next(v for v in _PMT if v >= m)
        if mt == 1:
            gemv_m1_launch(out, x, weight, gemv_m1_shape(weight.kind, n, k), bias)
        elif m <= GEMV_MT_MAX:  # (an A/B sets GEMV_MT_MAX = 1 for the older M = 2..16 kernel)
            gemv_mt_launch(out, x.reshape(m, k), weight, bias)
        else:
            _launch(_GEMV_PACKED[(weight.kind, mt)], (-(-n // _PR[mt]), 1, 1), (128, 1, 1), out.data_ptr(),
                    x.data_ptr(), weight.q.data_ptr(), _ptr(weight.qh), weight.meta.data_ptr(), _ptr(bias), m, n, k,
                    weight.group_size // 32, device=x.device)
    return out


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping):
    t = key.shape[0]
    row = key.shape[1] * key.shape[2]
    if t:
        vec = 8 if (row % 8 == 0 and key.stride(0) % 8 == 0 and value.stride(0) % 8 == 0
                    and _aligned(key, value, key_cache, value_cache)) else 1
        _launch(_CACHE[vec], (t, 1, 1), (_round32(row // vec, hi=256), 1, 1), key_cache.data_ptr(),
                value_cache.data_ptr(), key.data_ptr(), value.data_ptr(), slot_mapping.data_ptr(),
                key.stride(0), value.stride(0), row, device=key.device)


# -- counters of the last-block merges (split argmax, fused split-KV attention, split-K GEMM) -----
COUNTERS_MIN = 4096  # int32 counters allocated at least (16 KB)


@functools.lru_cache(maxsize=None)
def _counter_arrays(device: torch.device) -> list[torch.Tensor]:
    """The int32 counter arrays of the last-block merges on one device, newest last. Invariant: every
    counter is 0 before and after each launch that uses it (the last block of each group re-arms its
    counter: csrc/attention_merge.cuh flash_split_merge, csrc/argmax.cu, csrc/gemm_packed.cu's split-K
    merge), so one array serves every launch issued in order on one stream, CUDA graph replays
    included, whichever kernel it is.
    Launches that could run concurrently (on other streams) must not share it. Arrays are never
    freed: a graph captured with an older, smaller one keeps its address valid."""
    return []


def _device_key(dev: torch.device) -> torch.device:
    """One counter list per physical device, whether it is named 'cuda' or 'cuda:N' (CPU devices pass
    through for the host-side tests)."""
    return dev if dev.type != "cuda" else torch.device("cuda", cuda_index(dev))


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def split_counters(device: torch.device, need: int) -> torch.Tensor | None:
    """A zeroed counter array of >= `need` int32 (one per merge group of the launch's grid). Grows (a
    new array, zeroed on the current stream) only outside graph capture; None under capture when the
    current one is too small: the caller falls back to its unsplit / two-launch path."""
    key = _device_key(device)
    arrays = _counter_arrays(key)
    if arrays and arrays[-1].numel() >= need:
        return arrays[-1]
    if _capturing(key):
        return None
    n = max(need, COUNTERS_MIN, 2 * arrays[-1].numel() if arrays else 0)
    arrays.append(torch.zeros(n, dtype=torch.int32, device=key))
    return arrays[-1]


def argmax(logits):
    """One block per row for batches; for <= ARGMAX_SPLIT_ROWS rows the vocabulary is split over
    blocks and merged by the last one (a single row otherwise streams through one SM)."""
    v = logits.shape[-1]
    rows = logits.numel() // v if v else 0
    out = _empty(logits.shape[:-1], torch.int64, logits.device)
    if rows:
        stride = logits.stride(-2) if logits.dim() >= 2 else v
        if logits.dtype == torch.float16:
            vec = 8 if v % 8 == 0 and stride % 8 == 0 and _aligned(logits) else 1
        else:
            vec = 4 if v % 4 == 0 and stride % 4 == 0 and _aligned(logits) else 1
        name = f"{'f16' if logits.dtype == torch.float16 else 'f32'}_v{vec}"
        chunk = ARGMAX_CHUNK_LOADS * 16 // logits.element_size()  # a multiple of every VEC
        chunks = -(-v // chunk)
        counters = split_counters(logits.device, rows) if rows <= ARGMAX_SPLIT_ROWS and chunks > 1 else None
        if counters is None:
            _launch(_ARGMAX[name], (rows, 1, 1), (1024, 1, 1), out.data_ptr(), logits.data_ptr(), stride, v,
                    device=logits.device)
        else:
            part = torch.empty((rows, chunks, 2), dtype=torch.float32, device=logits.device)
            _launch(_ARGMAX_SPLIT[name], (chunks, rows, 1), (256, 1, 1), out.data_ptr(), part.data_ptr(),
                    counters.data_ptr(), logits.data_ptr(), stride, v, chunk, device=logits.device)
    return out


def register(reg: KernelRegistry) -> None:
    """Register the CUDA providers; for `linear` the tensor-core GEMV ahead of the FMA one, the packed
    GEMMs (gemm_ops: from RD_MIN_ROWS / GEMM_MIN_ROWS rows) and the packed GEMV (M <= 16) in between."""
    for op, fn, sup in [("rms_norm", rms_norm, supports_rms_norm),
                        ("rotary_embedding", rotary_embedding, supports_rotary),
                        ("silu_and_mul", silu_and_mul, supports_act),
                        ("gelu_and_mul", gelu_and_mul, supports_act),
                        ("linear", linear, supports_linear),
                        ("linear", linear_hmma, supports_linear_hmma),
                        ("linear", linear_packed, supports_linear_packed),
                        ("reshape_and_cache", reshape_and_cache, supports_cache),
                        ("argmax", argmax, supports_argmax)]:
        name = {linear_hmma: "cuda_hmma", linear_packed: "cuda_pack"}.get(fn, "cuda")
        reg.register(Provider(name, op, fn, available=available, supports=sup))
    # the GEMMs ahead of the GEMV: the register-direct one (sm_80+, q4_0 / q4_k / q6_k / awq) from 3 rows,
    # the shared-memory one from 5 (gemm_ops.RD_MIN_ROWS, GEMM_MIN_ROWS); fewer rows, or no GEMM admitted,
    # the GEMV. Appended to what is there (row_parts_ops may have put its provider first already).
    order = reg.priority.setdefault("linear", [])
    order += [n for n in ("cuda_hmma", "cuda_pack_gemm_rd", "cuda_pack_gemm", "cuda_pack", "cuda") if n not in order]
