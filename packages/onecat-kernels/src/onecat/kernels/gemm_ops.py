"""The packed GEMM providers (rows of x against a PackedWeight: prefill, batched decode): the tile /
K-split choice per problem and the launch. Registered for `linear`: `cuda_pack_gemm_rd` (csrc/gemm_rd.cu:
q4_0 / q4_k / q6_k / awq, 3..64 rows, sm_80+; on capability 9.0 q4_0's wide matrices past 32 rows on
csrc/gemm_wg.cu's wgmma tile), `cuda_pack_gemm` (csrc/gemm_packed.cu: every packed
format, from GEMM_MIN_ROWS rows, sm_70+), then the packed GEMV (`cuda_pack`, M <= 16) and the dense FMA
kernel."""

from __future__ import annotations

import ctypes
import functools
from typing import NamedTuple

import torch

from . import cuda_ops
from .cuda_ops import _PACKED_NAMES, _common, _empty, _need, _ptr, available, cuda_index, split_counters
from .driver import Kernel, libcuda
from .registry import KernelRegistry, Problem, Provider
from .weights import PACKED_FORMATS, PackedWeight
from .x_stages import WG_X_SLICE, XStages, wg_x_stages  # noqa: F401  (gemm_ops.XStages: the launch's x)


def _launch(*args, **kwargs):
    cuda_ops._launch(*args, **kwargs)  # looked up per call (tests intercept it)


class GemmTile(NamedTuple):
    """One packed-GEMM tile of csrc/gemm_packed.cu (its GEMM_PACKED_ALL line)."""
    bm: int  # rows of x per block
    bn: int  # output features per block
    stages: int  # shared-memory stages
    bk: int = 64  # K per step (two 32-weight chunks per W row; 128: four)
    threads: int = 128  # 4 warps (2 x 2); 256: 8 warps (2 x 4)


# GEMM_MIN_ROWS.. rows on packed weights (csrc/gemm_packed.cu)
GEMM_TILES = {"m32": GemmTile(32, 64, 2), "m64": GemmTile(64, 64, 2), "m128": GemmTile(128, 64, 1),
              # wide tiles (128 features: warp tiles of 16 x 64, a quarter fewer shared-memory bytes
              # per MAC): gemm_shape picks them for decode batches on matrices of >= WIDE_MIN_N rows
              "m32w": GemmTile(32, 128, 2), "m64w": GemmTile(64, 128, 1),
              # m32 in 8 warps, K-steps of 128: an experiment (gemm_bench times it; not picked)
              "m32t": GemmTile(32, 64, 1, 128, 256)}
# The H200 timed the wide tiles 3-9% faster than m32 / m64 on llama3-8b's 28672 x 4096 gate_up (q4_0,
# q4_k; M = 32, 64), and no better at N = 4096 / 6144 / 14336, where their halved tile count leaves
# slots empty (benchmarks/results/h200-2026-11-29-s5/gemm-wide-tiles.txt)
WIDE_MIN_N = 16384
GEMM_BK = 64  # K per step of the tiles gemm_shape picks (two 32-weight chunks)
_GEMM = {(f, t): Kernel("gemm_packed.cu", f"gemm_p_{f}_{t}", "ppppppppiiiii")
         for f in PACKED_FORMATS for t in GEMM_TILES}
# Register-direct tiles (csrc/gemm_rd.cu, sm_80+: W dequantized straight into m16n8k16 operands, only
# x through shared memory) for q4_0, q4_k, q6_k and awq (groups of a power of two chunks): rows x features
# per block, K per step (K % bk == 0; the k-quants' K is a multiple of their 256-weight super-block anyway).
RD_TILES = {"r16": GemmTile(16, 64, 2, 128), "r16w": GemmTile(16, 128, 2, 128),
            "r32": GemmTile(32, 64, 2, 128), "r32w": GemmTile(32, 128, 2, 128),
            "r64": GemmTile(64, 64, 2, 128)}  # r64: A/B since s16 (gemm_shape's note), timed by gemm_bench --rd-only
RD_MIN_CAPABILITY = (8, 0)
# From 3 rows (linear's priority puts cuda_pack_gemm_rd before the GEMV): the GEMV's M = 2..16 kernels
# (csrc/gemv_packed.cu gemv_packed: CUDA-core FMAs per row of x, dequantized per 4-row block) against
# these tiles (ragged rows), llama3-8b q4_0 decode step at context 512 on the H200 (s17 calls 7-8, CUDA
# events, median of 30): batch 2 3.56-3.74 -> 3.41 ms, 3 4.72 -> 3.45, 4 4.62 -> 3.48, 8 11.83 -> 3.67,
# 16 16.25 -> 3.70 (benchmarks/results/h200-2026-11-30-s17/). One and two rows stay on the GEMV: two on
# the M = 1 walk with each chunk dequantized once for both rows (cuda_ops.gemv_mt_launch; s18 calls 1-2:
# batch 2 3.19-3.26 -> 2.48-2.74 ms), while its 4-row form (168 registers) loses to these tiles at 3 / 4
# rows (4.45 / 4.52 against 3.26 / 3.58 ms).
RD_MIN_ROWS = 3
# Up to 16 rows the one-row-tile twins r16 / r16w (gemm_rd.cu MT 1: half r32's MMAs and x staging, 128 /
# 160 registers for 4 / 3 blocks per SM instead of 3 / 2): llama3-8b q4_0 decode step on the H200 (s18
# call 4, same call, CUDA events, median of 30; steps vary ~5% between processes) batch 3 3.25 -> 3.13
# ms, 4 3.46 -> 3.20 (3.41 on a second run), 8 3.48 -> 3.23, 16 3.65 -> 3.62.
RD16_MAX_ROWS = 16
# The shared-memory tiles (every packed format, sm_70+) from 5 rows, ahead of the GEMV in linear's
# priority: the GEMV's M = 5..16 kernel (gemv_packed MT 16) is the one that made q4_0 batch 8 / 16
# steps 11.8 / 16.3 ms (above); on llama3-8b q4_k batch 5 15.03 -> 6.05 ms, batch 16 6.66 ms on the tiles
# (H200 s17 call 9), where since s19 its register-direct tiles take 3..64 rows (batch 4 / 8 / 16 / 32 / 64
# 4.47 / 6.32 / 6.39 / 6.92 / 9.34 -> 3.32 / 3.61 / 3.73 / 4.67 / 7.94 ms, s19 call 2; awq's alike, call 4:
# 4.34 / 5.77 / 6.27 / 7.11 / 9.63 -> 3.20 / 3.53 / 3.56 / 4.42 / 7.66). 2 rows stay on the
# GEMV (cuda_ops.gemv_mt_launch: q4_k batch 2 3.76-3.97 -> 2.74-2.79 ms, s18). V100: the same tiles, not
# timed there.
GEMM_MIN_ROWS = 5
RD_MAX_SPLITS = 4  # the H200 timed every split up to 16: 4 was the best or within 5% on the llama3-8b matrices
# ... except the long-K down projection (4096 x 14336): r32w split up to 8 ways beat r32 x 4 by 6-7%
# (H200: 27.2 / 29.0 us in s11, 27.3 / 29.4 in s12), so from RD_LONG_K take r32w there (up to 64 rows since
# s16: 38.5 vs r64 40.5 us at M 64)
RD_LONG_K, RD_LONG_K_SPLITS = 8192, 8
RD_FORMATS = ("q4_0", "q4_k", "q6_k", "awq")
_RD_ENTRIES = [(f, t) for f in RD_FORMATS for t in RD_TILES if f == "q4_0" or t != "r64"]  # r64: q4_0's A/B only
_ARGS = "ppppppppiiiii"  # out, x, q, qh, meta, bias, ws, counters, M, N, K, gchunks, steps_per_split
_ROW_NORM_ARGS = "pif"  # the _glu / _rope entries' RowNorm: ss, its tiles, eps (ss 0: unscaled)
_RD = {(f, t): Kernel("gemm_rd.cu", f"gemm_rd_{f}_{t}", _ARGS, pdl=True) for f, t in _RD_ENTRIES}
# the same tiles with the GLU epilogue: W = [gate | up], out = silu(gate) * up (gemm_launch(glu=True))
_RD_GLU = {(f, t): Kernel("gemm_rd.cu", f"gemm_rd_{f}_{t}_glu", _ARGS + _ROW_NORM_ARGS, pdl=True)
           for f, t in _RD_ENTRIES}
# ... with the rotary + cache-write epilogue: W = [q | k | v], out = rotated q, k / v into the FP16 or FP8 paged
# cache (gemm_launch(rope=RopeCache(...)): the GEMM's arguments, the RowNorm, then RopeCache's fields in order, then
# its kv_code)
_RD_ROPE = {(f, t): Kernel("gemm_rd.cu", f"gemm_rd_{f}_{t}_rope", _ARGS + _ROW_NORM_ARGS + "pppppiiiii", pdl=True)
            for f, t in _RD_ENTRIES}
# ... with the residual add and the next RMSNorm's first half behind (gemm_launch(norm=NormIn(...))): out = x~ =
# gamma (res + y), the new residual stream and each tile's sums of squares (csrc/gemm_epilogue.cuh NormOut)
_NORM_ARGS = "ppppp"  # res, res_out, gamma, ss, xs (x~ as wgmma x stages, or 0: NormIn.stages)
_RD_NORM = {(f, t): Kernel("gemm_rd.cu", f"gemm_rd_{f}_{t}_norm", _ARGS + _NORM_ARGS, pdl=True)
            for f, t in _RD_ENTRIES}


# the _rope entries' cache elements, numbered as csrc/attention_fp8.cuh's KV_F16 / KV_E4M3 / KV_E5M2
ROPE_KV_CODES = {d: code for d, (code, _) in cuda_ops.CACHE_ELEMENTS.items()}
ROPE_KV_DTYPES = tuple(str(d).removeprefix("torch.") for d in ROPE_KV_CODES)  # as problems name them


class RopeCache(NamedTuple):
    """The _rope entries' operands: GPT-J rotary of q and k (int64 positions, float32 cos_sin [max_pos][rot]),
    k and v written into paged caches [blocks, block_size, Hk, D] at int64 slots (< 0: padding), FP16 or FP8
    (E4M3 / E5M2 with scale 1: kv_code)."""
    positions: torch.Tensor
    slots: torch.Tensor
    cos_sin: torch.Tensor
    key_cache: torch.Tensor
    value_cache: torch.Tensor
    q_size: int
    kv_size: int
    head_dim: int
    rot: int

    @property
    def kv_code(self) -> int:
        """The caches' element as csrc/attention_fp8.cuh numbers it: KV_F16 0, KV_E4M3 1, KV_E5M2 2."""
        return ROPE_KV_CODES[self.key_cache.dtype]


# The wgmma tile (csrc/gemm_wg.cu, sm_90a: built and admitted on capability 9.0 only): 64 rows of x per
# block, 128 features, 192 threads (a consumer warpgroup, two producer warps for x), one block per SM; q4_0.
# gemm_shape takes it for 33..64 rows of the wide matrices (as r32w: N >= WIDE_MIN_N or K >= RD_LONG_K)
# where gemm_slots lists it: each weight dequantized once for all rows instead of twice (two 32-row tiles).
# H200 s23 (benchmarks/results/h200-2026-12-01-s23, call 13; llama3-8b q4_0, us): gate_up M 64 72.3 ->
# 63.3, M 48 72.1 -> 61.1; down 38.3 -> 37.4 / 38.4 -> 35.8; qkv / o 10-11% slower (they keep r32); decode
# steps (call 14, one process each) batch 64 7,093 -> 6,449 us, batch 48 6,827 -> 6,093. s24 (x loaded 64
# bytes a row): gate_up GLU M 64 65.9 -> 58.9 us, steps batch 64 7,178-7,219 -> 6,451-6,561, 48 6,429 -> 6,069.
# Measured and not kept (s24, the diffs in benchmarks/results/h200-2026-12-01-s24): two consumer
# warpgroups on alternate K steps 7-13% slower; two over 256 features sharing x (168 registers, small
# spills) gate_up 5-8% faster but down 18-51% slower; four x stages 1-4% faster.
# w64b2: the same tile held to 168 registers (W one step ahead instead of three) so that two blocks share an SM.
# gemm_shape takes it where w64's grid needs more than one wave at one block per SM: gate_up (224 tiles on 132 SMs),
# the LM head. s39 (benchmarks/results/h200-2026-12-06-s39, H100): gate_up GLU M 64 59.0 -> 48.8 us, M 48 57.6 ->
# 47.4; s40 (h100-2026-12-06-s40): q4_0 LM head 128256 x 4096 at M 64 216.6 -> 176.3; down (32 tiles x 4 splits,
# one wave already) 35.6 -> 38.6 (x4) / 36.5 (x8), so it keeps w64. Two consumer warpgroups per block instead (the
# same 64 rows, one 64-feature half each; wg-forms.diff in s39's results) were level with w64, or 2-5% faster with
# four x stages and four producer warps in 66 KB of dynamic shared memory.
# Tried and removed (s49-s50; benchmarks/results/h200-2026-12-07-s50): w64b2 with W through a cp.async ring in
# dynamic shared memory (w64b2s, e, q): level or slower. The bare consumer loop is throughput-bound (s50).
WG_TILES = {"w64": GemmTile(64, 128, 2, 128, threads=192), "w64b2": GemmTile(64, 128, 2, 128, threads=192)}
WG_CAPABILITY = (9, 0)
_WG = {t: Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{t}", _ARGS, pdl=True) for t in WG_TILES}
_WG_GLU = {t: Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{t}_glu", _ARGS + _ROW_NORM_ARGS, pdl=True) for t in WG_TILES}
_WG_NORM = {t: Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{t}_norm", _ARGS + _NORM_ARGS, pdl=True) for t in WG_TILES}
# w64b2's diagnostics (csrc DIAG; not routed, outputs wrong by design): _nw no W loads, _nx no x staging, _nwx neither,
# _nwxb neither and no stage barriers (the consumer loop alone), _nwxbh that with half the dequantization; _qd / _nwxbq
# the route / _nwxb with the one-HFMA2 dequantization (q x d, the -8 d offset left out).
# Timed against the route (s49's scripts/_s49_diag.py; s50) they say what W's loads and x's staging cost the tile.
WG_DIAG = {d: Kernel("gemm_wg.cu", f"gemm_wg_q4_0_w64b2_{d}", _ARGS, pdl=True)
           for d in ("nw", "nx", "nwx", "nwxb", "nwxbh", "qd", "nwxbq")}
# The XB entries: x's stages by one bulk copy a step (csrc XB; x_stages.XStages), the same bits as the producer warps'
# staging. x's staging by the producer warps cost up to 8 us of gate_up's 48 (s50's _nx); XB saves 4 of them (s51,
# H100: gate_up M 64 48.8 -> 44.7 us). Forms by tile: w64b2's plain and GLU (gate_up behind o's _norm entry:
# linear_norm_ops), the GLU writing its output as stages too (glu_xs: gate_up in front of down), and w64's plain and
# _norm (down behind gate_up, in front of the next layer's norm) (s53). takes_x_stages says where a route can use them.
WG_XB_FORMS = {("w64b2", "plain"): "w64b2_xb", ("w64b2", "glu"): "w64b2_glu_xb", ("w64b2", "glu_xs"): "w64b2_glu_xb_xs",
               ("w64", "plain"): "w64_xb", ("w64", "norm"): "w64_norm_xb"}
_XB_ARGS = {"plain": _ARGS, "glu": _ARGS + _ROW_NORM_ARGS, "glu_xs": _ARGS + _ROW_NORM_ARGS, "norm": _ARGS + _NORM_ARGS}
WG_XB = {tf: Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{e}", _XB_ARGS[tf[1]], pdl=True) for tf, e in WG_XB_FORMS.items()}
XB_ROUTE = True  # takes_x_stages says yes where it can (False: x~ row-major, w64b2_glu; tools/gpu/switch_ab.py A/Bs it)
# the wgmma tiles recording per-block timestamps (not routed; tools/gpu/gemm_trace.py)
_WG_TRACE = {t: Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{t}_trace", _ARGS + "p", pdl=True) for t in WG_TILES}
# the wgmma tiles' XL1 diagnostic (not routed; tools/gpu/gemm_xl1.py swaps one in for _WG's entry): every step
# stages the x of the split's first step, so x comes from L1 after it; outputs wrong unless a split has one step
WG_XL1 = {t: Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{t}_xl1", _ARGS, pdl=True) for t in WG_TILES}


class NormIn(NamedTuple):
    """The _norm entries' operands: the residual stream the GEMM's output is added to ([M, N] FP16) and the next
    RMSNorm's weight ([N] FP16). gemm_launch(norm=...) returns (x~ = fp16(gamma r'), r' = fp16(res + y), ss [M][tiles]
    float32: each N tile's sums of r'^2), the operands of a RowNorm. stages: x~ comes back as XStages (written in the
    wgmma tile's x-stage layout, for a _glu_xb entry behind; N % 128 == 0), not row-major."""
    residual: torch.Tensor
    weight: torch.Tensor
    stages: bool = False


def _x_dims(x: "torch.Tensor | XStages") -> tuple[int, int, torch.device]:
    """A packed GEMM's x as (rows, columns, device): a tensor [..., k] or XStages (which answers the same facts)."""
    k = x.shape[-1]
    return x.numel() // k, k, x.device


class RowNorm(NamedTuple):
    """A _glu / _rope entry reading x~ (a _norm entry's out) as x: each row's sums are scaled by
    rsqrt(sum of ss's row / K + eps) before bias, GLU or rotary (RMSNorm's scale, applied after the projection)."""
    ss: torch.Tensor
    eps: float


def wg_fits(kind: str, k: int, device: torch.device) -> bool:
    """Whether the wgmma tile takes this matrix on this device (q4_0, K % 128, capability 9.0: sm_90a)."""
    return (kind == "q4_0" and k % 128 == 0 and device.type == "cuda"
            and _capability(cuda_index(device)) == WG_CAPABILITY)


def rd_tiles(kind: str) -> list[str]:
    """The register-direct tiles gemm_rd.cu has for a packed format (none for one it does not take)."""
    return [t for f, t in _RD_ENTRIES if f == kind]


# the q4_0 tiles recording per-block timestamps (not routed; tools/gpu/gemm_trace.py)
_RD_TRACE = {t: Kernel("gemm_rd.cu", f"gemm_rd_q4_0_{t}_trace", "ppppppppiiiiip", pdl=True) for t in RD_TILES}


@functools.lru_cache(maxsize=None)
def _capability(idx: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(idx)


def rd_group_ok(group: int) -> bool:
    """AWQ: gemm_rd.cu finds a chunk's group by a shift (groups of 32, 64, 128, ... weights)."""
    return group >= 32 and group & (group - 1) == 0


def rd_fits(kind: str, k: int, device: torch.device) -> bool:
    """Whether the register-direct kernels take this matrix on this device (q4_0 / awq with K % 128, q4_k /
    q6_k with K % 256; sm_80+; AWQ's group size: rd_group_ok)."""
    return (kind in RD_FORMATS and k % (256 if kind in ("q4_k", "q6_k") else 128) == 0 and device.type == "cuda"
            and _capability(cuda_index(device)) >= RD_MIN_CAPABILITY)


# The decode tiles on the GEMM-tiled q4_0 layout (tile_q4_0): an experiment gemm_bench --tiled times
GEMM_TL_TILES = ("m32", "m64", "m32w", "m32t")
_GEMM_TL = {t: Kernel("gemm_packed.cu", f"gemm_p_q4_0_{t}_tl", "ppppppppiiiii") for t in GEMM_TL_TILES}


def tile_q4_0(w: PackedWeight) -> PackedWeight:
    """A q4_0 PackedWeight's planes re-laid out so each 64-row tile's 64-weight K-step is contiguous:
    q [N/64][K/64][64][32 B], meta [N/64][K/64][64][4 B] (csrc/gemm_packed.cu, TL = 1). Only
    gemm_launch(..., tiled=True) reads it."""
    n, k = w.shape
    if w.kind != "q4_0" or n % 64 or k % 64:
        raise ValueError(f"tile_q4_0: {w.kind} [{n}, {k}]: needs q4_0 with N and K multiples of 64")
    q = w.q.view(n // 64, 64, k // 64, 32).permute(0, 2, 1, 3).contiguous().view(n, k // 2)
    meta = w.meta.view(n // 64, 64, k // 64, 4).permute(0, 2, 1, 3).contiguous().view(n, k // 16)
    return PackedWeight("q4_0", w.shape, q, meta, None, w.group_size)


# Blocks of each GEMM tile resident per SM on a V100 (96 KB shared memory, 64K registers): the
# assumption for host-side tests on fake devices; a real GPU is asked (cuOccupancy...).
GEMM_V100_RESIDENT = {"m32": 3, "m64": 2, "m128": 2, "m32w": 2, "m64w": 2, "m32t": 2}


def slot_kernels(kind: str, rd: bool, wg: bool = False) -> dict[str, Kernel]:
    """The kernels gemm_slots asks the occupancy of, under the names gemm_shape reads (_tile(name) gives
    each one's block shape); wg: the wgmma tile too (gemm_shape routes to it only where it is listed)."""
    kernels = {t: _GEMM[(kind, t)] for t in GEMM_TILES}
    if rd:
        kernels.update({t: kern for (f, t), kern in _RD.items() if f == kind})
    if wg:
        kernels.update(_WG)
    return kernels


@functools.lru_cache(maxsize=None)
def gemm_slots(kind: str, device: torch.device) -> tuple[int, dict[str, int]]:
    """(SM count, {tile: resident blocks per SM}) of the packed GEMM kernels of `kind` on `device`."""
    if device.type != "cuda":
        return 80, dict(GEMM_V100_RESIDENT)
    idx = cuda_index(device)
    sms = torch.cuda.get_device_properties(idx).multi_processor_count
    resident = {}
    for tile, kern in slot_kernels(kind, rd_fits(kind, 256, device), wg_fits(kind, 256, device)).items():
        n = ctypes.c_int()
        with torch.cuda.device(idx):
            fn = kern.function(idx)  # compiles / loads the module once
            res = libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), fn, _tile(tile).threads, 0)
        resident[tile] = n.value if res == 0 and n.value > 0 else GEMM_V100_RESIDENT.get(tile, 2)
    return sms, resident


def gemm_shape(m: int, n: int, k: int, sms: int, resident: dict[str, int] | None = None,
               rd: bool = False) -> tuple[str, int]:
    """(tile, K splits) of the packed GEMM for x[m, k] @ W[n, k]^T on `sms` SMs holding
    `resident[tile]` blocks each (tools/gpu/gemm_bench.py times every tile x split on the llama3-8b
    matrices; on the H200 this pick was within ~5% of the best one timed, all but one shape).
    Tile: m32 up to 32 rows, m64 up to 64, and up to 128 while the N tiles fill under half of
    m128's slots (more blocks beat fewer dequantizations there), m128 beyond; up to 64 rows on
    matrices of >= WIDE_MIN_N rows, their 128-feature twins m32w / m64w. Splits: a block's K
    walk is a chain of dependent loads, so when the tiles leave resident slots empty (decode
    batches, 4096-row matrices) K is split to fill them without starting a second wave:
    slots // tiles, at most 8, each split keeping >= 4 K-steps.
    rd (q4_0 / q4_k / q6_k / awq on sm_80+: rd_fits): up to 64 rows the register-direct tiles r32 / r32w
    (N >= WIDE_MIN_N or K >= RD_LONG_K; their one-row-tile twins r16 / r16w up to RD16_MAX_ROWS), two
    row tiles high past 32 rows, splits as above but at most RD_MAX_SPLITS (RD_LONG_K_SPLITS for r32w
    on K >= RD_LONG_K) (H200, s11: q4_0 30-43% below the shared-memory tiles at M = 32, 11-20% at M =
    64 on the llama3-8b matrices; s19: q4_k / q6_k / awq alike). Past 32 rows the 32-row
    tiles beat r64 (s16, M 48 / 64: qkv 22.7 vs 26.8 us, o 17.7 vs 18.9, down 39.4 vs 40.7, gate_up
    level): the finer grid fills 3 blocks per SM where r64's left SMs with one block beside SMs with
    two (an r64 block alone on its SM ran its K loop in 9.0 us, paired 14.5: SM-bound, so the lone
    ones wasted half an SM), for the same tensor work per SM. Where `resident` lists the wgmma tile
    w64 (gemm_slots: q4_0 on capability 9.0), 33..64 rows of the wide matrices take it instead of r32w
    two high (WG_TILES: one dequantization for 64 rows; s23), or its two-per-SM twin w64b2 unsplit where
    w64's tiles pass one wave at one block per SM (H100: gate_up GLU at M 64 59.0 -> 48.8 us, s39; the q4_0
    LM head 128256 x 4096, 7.6 waves of w64, 216.6 -> 176.3 us, s40); a grid of one wave keeps w64 (down
    at 4 splits: w64b2 35.6 -> 38.6 us)."""
    res = resident or GEMM_V100_RESIDENT
    if rd and m <= 64:
        long_k = k >= RD_LONG_K
        wide = n >= WIDE_MIN_N or long_k
        tile = ("r16w" if wide else "r16") if m <= RD16_MAX_ROWS else ("r32w" if wide else "r32")
        if tile == "r32w" and m > 32 and "w64" in res:  # sm_90 q4_0 (gemm_slots lists it there only)
            tile = "w64"
        blocks = -(-n // _tile(tile).bn) * -(-m // _tile(tile).bm)
        if tile == "w64" and res.get("w64b2") and blocks > sms * res["w64"]:  # past one wave at one per SM
            tile = "w64b2"  # (the same tile shape: its splits below come out 1)
        slots = sms * res.get(tile, 2)
        cap = RD_LONG_K_SPLITS if long_k else RD_MAX_SPLITS
        return tile, max(1, min(cap, (k // _tile(tile).bk) // 4, slots // blocks))
    ntiles = -(-n // 64)
    if m <= 32:
        tile = "m32"
    elif m <= 64 or (m <= 128 and 2 * ntiles < sms * res["m128"]):
        tile = "m64"
    else:
        tile = "m128"
    if m <= 64 and n >= WIDE_MIN_N:
        tile += "w"
    blocks = -(-n // GEMM_TILES[tile].bn) * -(-m // GEMM_TILES[tile].bm)
    steps = -(-k // GEMM_BK)
    splits = max(1, min(8, steps // 4, sms * res[tile] // blocks))
    return tile, splits


def _tile(name: str) -> GemmTile:
    return RD_TILES[name] if name in RD_TILES else WG_TILES[name] if name in WG_TILES else GEMM_TILES[name]


def glu_fits(tile: str, n: int) -> bool:
    """Whether the _glu entry of a register-direct (or wgmma) tile takes a [gate | up] matrix of n rows: each tile
    holds BN / 2 rows of each half."""
    return (tile in RD_TILES or tile in WG_TILES) and n % 2 == 0 and (n // 2) % (_tile(tile).bn // 2) == 0


def gemm_launch(x, weight: PackedWeight, bias, tile: str, splits: int, tiled: bool = False, trace=None,
                glu: bool = False, rope: RopeCache | None = None, norm: NormIn | None = None,
                row_norm: RowNorm | None = None, out_stages: bool = False):
    """One launch of gemm_p_<fmt>_<tile> with K split `splits` ways (clamped so no split is empty);
    tiled: `weight` came from tile_q4_0 (gemm_p_q4_0_<tile>_tl). trace (q4_0's register-direct and wgmma tiles): a
    contiguous int64 CUDA tensor of >= 16 per block, where the _trace entry records its blocks'
    timestamps (csrc common.cuh block_trace; tools/gpu/gemm_trace.py reads them). glu (register-direct
    tiles, no bias): `weight` is [gate | up] and the result silu(gate) * up, half as wide (the _glu
    entries: as linear then silu_and_mul, bit for bit). rope (register-direct tiles): `weight` is [q | k | v]
    and the result q rotated, k rotated and v written into the caches (the _rope entries: as linear then
    rotary_and_cache, bit for bit). norm (register-direct and wgmma tiles, N a multiple of the tile's width, no GLU /
    rope): returns (x~, new residual, ss) for the projection behind (NormIn). row_norm (with glu or rope): x is x~, each
    row's outputs scaled by its RMSNorm scale from ss (RowNorm); with norm.stages x~ comes back as XStages. x as
    XStages: an XB entry (WG_XB_FORMS: the tile and epilogue must have one) copies x's stages whole. out_stages (GLU
    on x stages, N / 2 % 128 == 0): the output comes back as XStages, for an XB entry behind."""
    staged_x = isinstance(x, XStages)
    m, k, dev = _x_dims(x)
    form = xb_form(glu, norm is not None, out_stages)
    if out_stages and not (staged_x and form == "glu_xs" and (weight.shape[0] // 2) % 128 == 0):
        raise ValueError(f"packed GEMM output as x stages: GLU {glu}, x stages {staged_x}, N={weight.shape[0]}: needs "
                         "the GLU epilogue on x stages (an XB entry) and N / 2 % 128 == 0")
    if staged_x:
        if not ((tile, form) in WG_XB and rope is None and not (norm is not None and norm.stages) and not tiled
                and trace is None and x.stages.dtype == torch.uint8 and x.stages.is_contiguous()
                and tuple(x.stages.shape) == XStages.layout(m, k)):
            raise ValueError(f"packed GEMM on x stages: tile {tile}, {form} (needs one of WG_XB_FORMS "
                             f"{sorted(WG_XB_FORMS)}, no rope / trace / stages out of a norm), stages "
                             f"{tuple(x.stages.shape)} {x.stages.dtype} for {m} x {k}")
    n = weight.shape[0]
    lead, dtype = x.shape[:-1], x.dtype  # XStages: (m,), float16
    if norm is not None and (
            tile not in RD_TILES and tile not in WG_TILES or glu or rope is not None or tiled or trace is not None
            or n % _tile(tile).bn
            or norm.residual.shape != (*lead, n) or norm.weight.shape != (n,)
            or norm.residual.dtype != dtype or norm.weight.dtype != dtype or norm.stages and n % 128):
        raise ValueError(f"packed GEMM norm epilogue: tile {tile}, N={n}: needs a register-direct or wgmma tile whose "
                         "width divides N, no GLU / rope / trace, a residual [.., N] and a norm weight [N] of x's dtype "
                         "(x stages: N % 128 == 0)")
    if row_norm is not None and not ((glu or rope is not None) and row_norm.ss.dtype == torch.float32
                                     and row_norm.ss.shape[0] == m and row_norm.ss.is_contiguous()):
        raise ValueError(f"packed GEMM row norm: glu {glu}, rope {rope is not None}, ss {tuple(row_norm.ss.shape)} "
                         f"{row_norm.ss.dtype}: needs the GLU or rotary epilogue and a contiguous float32 ss of {m} rows")
    if m * k >= 1 << 31:  # the kernel offsets x in int32
        raise ValueError(f"packed GEMM: x of {m} x {k} has >= 2^31 elements; split the rows")
    if glu and not (glu_fits(tile, n) and bias is None and not tiled and trace is None):
        raise ValueError(f"packed GEMM GLU: tile {tile}, N={n}, bias {bias is not None}: needs a register-direct "
                         "tile whose half width divides N / 2, no bias, no trace")
    if rope is not None and not (tile in RD_TILES and not glu and not tiled and trace is None and n % 8 == 0):
        raise ValueError(f"packed GEMM rotary epilogue: tile {tile}, N={n}: needs a register-direct tile, N % 8 == 0, "
                         "no GLU, no trace")
    if rope is not None and not (rope.key_cache.dtype in ROPE_KV_CODES
                                 and rope.value_cache.dtype == rope.key_cache.dtype):
        raise ValueError(f"packed GEMM rotary epilogue: caches {rope.key_cache.dtype} / {rope.value_cache.dtype} "
                         "(needs both float16, float8_e4m3fn or float8_e5m2)")
    xs = (XStages.empty(m, n, dev) if norm is not None and norm.stages else XStages.empty(m, n // 2, dev) if out_stages
          else None)
    out = None if xs is not None else _empty((*lead, rope.q_size if rope is not None else n // 2 if glu else n), dtype,
                                             dev)
    if norm is not None:
        res_out = _empty(norm.residual.shape, dtype, dev)
        ss = _empty((m, -(-n // _tile(tile).bn)), torch.float32, dev)
    if tile in RD_TILES and not (rd_fits(weight.kind, k, dev) and k % RD_TILES[tile].bk == 0
                                 and (weight.kind, tile) in _RD
                                 and (weight.kind != "awq" or rd_group_ok(weight.group_size))):
        raise ValueError(f"packed GEMM tile {tile}: {weight.kind} K={k} group {weight.group_size} on {dev} "
                         f"(needs sm_80+ and q4_0 / awq with K % {RD_TILES[tile].bk} == 0 (awq: groups of a "
                         "power of two >= 32), or q4_k / q6_k with K % 256 == 0, on a tile other than r64)")
    if tile in WG_TILES and not wg_fits(weight.kind, k, dev):
        raise ValueError(f"packed GEMM tile {tile}: {weight.kind} K={k} on {dev} (needs q4_0 with K % 128 == 0 "
                         f"on capability {WG_CAPABILITY[0]}.{WG_CAPABILITY[1]}: wgmma, sm_90a)")
    if m:
        t = _tile(tile)
        steps = -(-k // t.bk)
        per = -(-steps // max(1, min(splits, steps)))
        splits = -(-steps // per)
        gx, gy = -(-n // t.bn), -(-m // t.bm)
        ws = cnt = None
        if splits > 1:  # FP32 partials per split, one arrival counter per output tile
            ws = torch.empty((splits, m, n), dtype=torch.float32, device=dev)
            # the shared zeroed counters (the tile's last block re-arms its counter), so no memset
            # kernel runs per launch; a fresh zeroed array under a capture that outgrew them
            cnt = split_counters(dev, gx * gy)
            if cnt is None:
                cnt = torch.zeros(gx * gy, dtype=torch.int32, device=dev)
        if tiled:
            kern = _GEMM_TL[tile]
        elif tile in RD_TILES:
            kern = (_RD_ROPE if rope is not None else _RD_GLU if glu else _RD_NORM if norm else _RD)[(weight.kind, tile)]
        elif staged_x:
            kern = WG_XB[(tile, form)]
        elif tile in WG_TILES:
            kern = (_WG_GLU if glu else _WG_NORM if norm else _WG)[tile]
        else:
            kern = _GEMM[(weight.kind, tile)]
        extra = ()
        if glu or rope is not None:  # the RowNorm (ss 0: unscaled)
            extra = ((row_norm.ss.data_ptr(), row_norm.ss.shape[1], float(row_norm.eps)) if row_norm is not None
                     else (0, 0, 0.0))
        if rope is not None:
            extra = (*extra, *(a.data_ptr() for a in rope[:5]), *(int(a) for a in rope[5:]), rope.kv_code)
        if norm is not None:
            extra = (norm.residual.data_ptr(), res_out.data_ptr(), norm.weight.data_ptr(), ss.data_ptr(),
                     0 if xs is None else xs.stages.data_ptr())
        if trace is not None:
            if tile not in RD_TILES and tile not in WG_TILES or tiled or weight.kind != "q4_0":
                raise ValueError(f"packed GEMM trace: only the register-direct and wgmma q4_0 tiles "
                                 f"{sorted(RD_TILES) + sorted(WG_TILES)} have one")
            kern = _RD_TRACE[tile] if tile in RD_TILES else _WG_TRACE[tile]
            extra = (cuda_ops.trace_pointer(trace, gx * gy * splits, dev, "packed GEMM trace"),)
        _launch(kern, (gx, gy, splits), (t.threads, 1, 1), _ptr(out if not out_stages else xs.stages), x.data_ptr(),
                weight.q.data_ptr(), _ptr(weight.qh), weight.meta.data_ptr(), _ptr(bias), _ptr(ws), _ptr(cnt),
                m, n, k, weight.group_size // 32, per, *extra, device=dev)
    return (out if xs is None else xs, res_out, ss) if norm is not None else xs if out_stages else out


def xb_form(glu: bool, norm: bool, out_stages: bool = False) -> str:
    """The epilogue's name in WG_XB_FORMS."""
    return "glu_xs" if glu and out_stages else "glu" if glu else "norm" if norm else "plain"


def linear_packed_gemm(x, weight: PackedWeight, bias=None):
    """GEMM_MIN_ROWS or more rows of x against a PackedWeight: dequantize tiles into shared memory,
    tensor cores."""
    k = x.shape[-1]
    m = x.numel() // k
    tile, splits = gemm_shape(m, weight.shape[0], k, *gemm_slots(weight.kind, x.device))
    return gemm_launch(x, weight, bias, tile, splits)


def linear_packed_gemm_rd(x, weight: PackedWeight, bias=None, glu: bool = False, rope: RopeCache | None = None,
                          norm: NormIn | None = None, row_norm: RowNorm | None = None, out_stages: bool = False):
    """3..64 rows of x against a q4_0 / q4_k / q6_k / awq PackedWeight on sm_80+: weights dequantized
    straight into the MMA operands (csrc/gemm_rd.cu); glu: silu(gate) * up of a [gate | up] weight, rope:
    rotary and the cache write of a [q | k | v] weight (gemm_launch). The rotary epilogue is on the
    register-direct tiles only: where the wgmma tile would take the matrix (a wide qkv past 32 rows), r32w
    two high does (the same tile and splits as linear everywhere else, so the same bits). norm / row_norm: the
    residual add and RMSNorm split over a projection's epilogue and the next one's (gemm_launch). x as XStages: the
    XB entry of the tile gemm_shape picks where it has one for this epilogue, else x row-major (XStages.tensor);
    out_stages: the GLU output as XStages (takes_x_stages(weight, m, device, "glu_xs") says where)."""
    m, _, dev = _x_dims(x)
    tile, splits = _rd_shape(m, weight, dev, rope is not None)
    if isinstance(x, XStages) and (tile, xb_form(glu, norm is not None, out_stages)) not in WG_XB:
        x = x.tensor()
    return gemm_launch(x, weight, bias, tile, splits, glu=glu, rope=rope, norm=norm, row_norm=row_norm,
                       out_stages=out_stages)


def _rd_shape(m: int, weight: PackedWeight, device: torch.device, rope: bool) -> tuple[str, int]:
    sms, res = gemm_slots(weight.kind, device)
    if rope:
        res = {t: r for t, r in res.items() if t not in WG_TILES}
    return gemm_shape(m, weight.shape[0], weight.shape[1], sms, res, rd=True)


def takes_x_stages(weight: PackedWeight, m: int, device: torch.device, form: str = "glu") -> bool:
    """Whether linear_packed_gemm_rd of m rows on `weight` with the epilogue `form` (xb_form) runs a tile with an XB
    entry for it (WG_XB_FORMS), so that x can come as XStages, copied whole a step instead of staged by the producer
    warps. A projection in front writes its output so only where this says yes for the one behind."""
    return (XB_ROUTE and 0 < m and weight.kind == "q4_0" and weight.shape[1] % 128 == 0
            and (_rd_shape(m, weight, device, False)[0], form) in WG_XB)


def supports_linear_packed_gemm(p: Problem) -> list[str]:
    r = _packed_common(p)
    rows = p.param("rows")
    _need(r, rows in ("17-64", "65+") or (isinstance(rows, int) and rows >= GEMM_MIN_ROWS),
          f"M={rows} < {GEMM_MIN_ROWS}: the packed GEMV (cuda_pack) covers it")
    return r


def _packed_common(p: Problem) -> list[str]:
    """The packed GEMMs' conditions other than the row count: device, dtype, format, K, bias, layout."""
    r = _common(p)
    fmt, k = p.param("format"), p.param("k")
    _need(r, fmt in _PACKED_NAMES, f"weight format {fmt} not a PackedWeight ({'/'.join(_PACKED_NAMES)})")
    _need(r, k % 32 == 0, f"K={k} not a multiple of 32")
    if fmt in ("packed_q4_k", "packed_q6_k"):
        _need(r, k % 256 == 0, f"K={k} not a multiple of the 256-weight {fmt[7:]} block")
    _need(r, p.param("bias") in (None, "float16"), f"bias dtype {p.param('bias')} not float16")
    _need(r, p.param("contiguous", True) and p.param("aligned16", True), "x not contiguous and 16-byte aligned")
    return r


def supports_linear_packed_gemm_rd(p: Problem) -> list[str]:
    """cuda_pack_gemm's conditions other than M (device, dtype, packed format, bias, layout) plus the
    register-direct tiles' own: sm_80+, q4_0 / q4_k / q6_k / awq (groups of a power of two), RD_MIN_ROWS..64
    rows, K a multiple of the 128-wide K-step (the k-quants: of their 256-weight super-block, _packed_common)."""
    r = _packed_common(p)
    fmt, k, cap, rows = p.param("format"), p.param("k"), p.capability, p.param("rows")
    major, minor = RD_MIN_CAPABILITY
    _need(r, cap is None or cap >= RD_MIN_CAPABILITY,
          f"capability {cap[0]}.{cap[1]} < {major}.{minor} (mma.sync m16n8k16)" if cap else "")
    _need(r, fmt.removeprefix("packed_") in RD_FORMATS,
          f"weight format {fmt} not {' / '.join('packed_' + f for f in RD_FORMATS)}")
    group = p.param("group")
    _need(r, fmt != "packed_awq" or group is None or rd_group_ok(group),
          f"AWQ group size {group} not a power of two >= 32")
    _need(r, rows == "17-64" or (isinstance(rows, int) and rows >= RD_MIN_ROWS),
          f"M={rows} rows: the register-direct tiles take {RD_MIN_ROWS}..64")
    _need(r, k % 128 == 0, f"K={k} not a multiple of 128 (the K-step)")
    return r


def register(reg: KernelRegistry) -> None:
    reg.register(Provider("cuda_pack_gemm_rd", "linear", linear_packed_gemm_rd, available=available,
                          supports=supports_linear_packed_gemm_rd, takes_x_stages=True))
    reg.register(Provider("cuda_pack_gemm", "linear", linear_packed_gemm, available=available,
                          supports=supports_linear_packed_gemm))
