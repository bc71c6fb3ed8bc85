// gemm_packed.cu: y[M, N] = x[M, K] @ W[N, K]^T (+ bias) for M > 16 (prefill, batched decode) on
// prepacked quantized W (weights.PackedWeight: q4_0, q4_1, q8_0, q4_k, q6_k, awq), FP16 in/out, FP32
// accumulation on tensor cores. Written for Volta (sm_70: PTX wmma m16n16k16 = HMMA.884, inline PTX
// since NVRTC lacks mma.h), runs as is on newer GPUs: 128-bit loads, register prefetch, no cp.async /
// ldmatrix / TMA.
//
//  * Tiling: 128 threads (2 x 2 warps), a block owns BM rows of x x BN = 64 output features and walks
//    K in steps of BK = 64 (two 32-weight chunks per W row). Three shapes (gemm_ops.gemm_shape picks):
//    m32 (BM 32, M <= 32), m64 (BM 64), m128 (BM 128, prefill: W is dequantized once per 128 rows).
//    Warp tile (BM / 2) x 32: FM x 2 accumulator fragments. m32w / m64w: BN = 128. m32t: 256 threads
//    (2 x 4 warps) and BK = 128, an experiment (GEMM_PACKED_ALL).
//  * Per K-step every thread owns one (row, chunk) of the W tile: its packed bytes for the NEXT step
//    (16 B of nibbles / 32 B int8, + q6_k high bits, + scale words) and BM / 16 x 16-byte pieces of
//    the next x tile are loaded into registers while the current step's tiles are multiplied from
//    shared memory; then the chunk is dequantized (gemv_packed.cu's integer tricks: one LOP3 + one
//    HFMA2 per fp16 pair gives (q - z) / 16 exactly) and scaled to the fp16 weight a dense matmul
//    would use (q4_0 / q8_0 / awq: one HMUL2 by the fp16-exact scale, the correctly rounded product;
//    q4_1 / q4_k / q6_k: FP32 fma(scale, w, coef), then rounded), stored as 4 x 16 B into the W tile.
//    m32 / m64 double-buffer shared memory (one barrier per step); m128 (27 KB per stage) has one
//    stage and two barriers. The K loop has no bounds branches: rows of x >= M and W rows >= N
//    are clamped to the last one (their outputs are not written), x columns >= K clamped into the
//    row, and chunks >= K/32 loaded from the last chunk and dequantized with zero scales (exact
//    zeros); m64 / m128 skip fragments whose 16 rows all lie past M. Each thread's plane pointers,
//    x offsets and shared-memory offsets are computed once and pinned (common.cuh pin_pointer):
//    NVRTC otherwise re-derived them from threadIdx and the parameters in every K-step (sm_90 SASS
//    of the q4_0 m32 loop: 551 -> ~380 instructions per two steps). m32 tiles hold two k16 slices'
//    fragments (the next one's loaded before this one's MMAs); without that the 72-register m32
//    loop serialized each MMA behind its LDSM (ncu: short-scoreboard stalls 2 -> 8 per issue).
//  * Shared layouts padded to 72 halves per row: the 16-byte stores of a quarter warp (4 W rows x 2
//    chunks, or one x row) and the wmma fragment loads hit distinct banks.
//  * Split-K (gridDim.z = S > 1, when N / 64 x M tiles would leave SMs idle): split z runs K-steps
//    [z P, (z + 1) P), writes its FP32 tile to ws[z], and the last block of the tile to arrive
//    (a per-tile counter, zeroed by the caller) sums ws[0..S-1] in that fixed order (deterministic),
//    adds the bias and writes FP16. One launch.
#include "gemm_epilogue.cuh"
#include "packed_formats.cuh"
#include "wmma.cuh"

// The 32 fp16 weights of chunk c (in order) as 4 x 16 bytes: the rounding of the exact value.
// `valid` false: 32 zeros (a chunk past K, loaded from a clamped index: its scale words zeroed).
template <int F>
ONECAT_DEVICE void dequant_chunk(const PChunk<F>& ck, int c, uint4 (&o)[4], bool valid = true) {
  // q4_0 / q8_0 / awq: scale (16 d, 128 d, 16 s) is exact in fp16 and wv is exact, so one HMUL2
  // rounds the exact product once (bit-identical to the fp32 path; |scale| must stay < 65504).
  constexpr bool HALF = F == F_Q4_0 || F == F_Q8_0 || F == F_AWQ;
  float scale, scale1, coef;
  __half2 nlo, nhi;
  chunk_consts<F>(ck, c, scale, scale1, coef, nlo, nhi);
  if (!valid) scale = scale1 = coef = 0.f;  // finite planes x 0: exact zeros
  const __half2 hs = __float2half2_rn(scale);
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    __half2 wv[4];
    dequant8<F>(ck, s, nlo, nhi, wv);
    Half8 h;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (HALF) {
        h.h2[i] = __hmul2(wv[i], hs);
      } else {
        const float sc = (F == F_Q6_K && s >= 2) ? scale1 : scale;
        const float2 f = __half22float2(wv[i]);
        h.h2[i] = __floats2half2_rn(fmaf(sc, f.x, coef), fmaf(sc, f.y, coef));
      }
    }
    o[s] = h.u;
  }
}

// ---- the GEMM -----------------------------------------------------------------------------------
// Padded shared rows: BK + 8 halves (a stride of 4 banks mod 32: the quarter-warp 16-byte stores and
// the fragment loads hit distinct banks).
template <int BM, int BN, int STAGES, int BK>
struct GemmSmem {
  static constexpr int LD = BK + 8;
  static constexpr int STAGE = (BM + BN) * LD;     // halves: x tile [BM][LD], then W tile [BN][LD]
  static constexpr int C_LD = BN + 4;              // fp32 output staging [BM][C_LD] (reuses the stages)
  static constexpr int AB = STAGES * STAGE * 2, C = BM * C_LD * 4;
  static constexpr int BYTES = AB > C ? AB : C;
};

// WARPS_M x WARPS_N warps; K-steps of BK (64: two 32-weight chunks per W row, 128: four).
// TL = 1: W in the GEMM-tiled layout (q4_0 only, N % 64 == 0, K % 64 == 0; gemm_ops.tile_q4_0):
// q [N/64][K/64][64 rows][2 chunks][16 B], meta [N/64][K/64][64][2] fp16, so one 64-row tile's
// K-step is 2 KB (+ 256 B of scales) of consecutive bytes instead of 64 rows x 32 B scattered 2 KB
// apart (an experiment: is the row-major walk's DRAM locality what holds the GEMM at 12-21% of copy?).
template <int F, int BM, int BN, int STAGES, int PD, int WARPS_M, int WARPS_N, int BK, int TL = 0>
__device__ void gemm_packed(__half* __restrict__ out, const __half* __restrict__ x,
                            const unsigned char* __restrict__ q, const unsigned char* __restrict__ qh,
                            const unsigned char* __restrict__ meta, const __half* __restrict__ bias,
                            float* __restrict__ ws, unsigned* __restrict__ counters, int M, int N, int K,
                            int gchunks, int steps_per_split) {
  constexpr int THREADS = 32 * WARPS_M * WARPS_N, CPR = BK / 32, PPR = BK / 8;  // chunks / x pieces per row and step
  constexpr int WPT = BN * BK / 32 / THREADS;  // W chunks per thread and K-step (1 or 2)
  static_assert(WPT * THREADS * 32 == BN * BK && (WPT == 1 || WPT == 2), "whole W chunks per thread");
  static_assert(BM % (16 * WARPS_M) == 0 && BN % (16 * WARPS_N) == 0, "warp tiles of 16-row / 16-column fragments");
  static_assert((BK == 64 || BK == 128) && (PD == 1 || PD == 2), "K-step of 2 or 4 chunks; prefetch depth 1 or 2");
  static_assert(TL == 0 || F == F_Q4_0, "the tiled layout is a q4_0 experiment");
  using SM = GemmSmem<BM, BN, STAGES, BK>;
  constexpr int GM_LD = SM::LD;
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N, FM = WTM / 16, FN = WTN / 16;
  constexpr int XV = BM * BK / 8 / THREADS;  // 16-byte pieces of x per thread and step
  __shared__ __align__(128) unsigned char smem[SM::BYTES];
  __shared__ unsigned last_block;
  __half* sh = reinterpret_cast<__half*>(smem);

  const int t = threadIdx.x, warp = t >> 5, wm = (unsigned)warp / WARPS_N, wn = (unsigned)warp % WARPS_N;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const int nch = K >> 5, nsteps = (unsigned)(nch + CPR - 1) / CPR;
  const int s_begin = blockIdx.z * steps_per_split, s_end = min(nsteps, s_begin + steps_per_split);
  // this thread's W rows (wr + THREADS / CPR j) and chunk of every step (unsigned: shifts, masks)
  const int wr = (unsigned)t / CPR, wj = (unsigned)t % CPR;
  const unsigned char *rq[WPT], *rqh[WPT], *rmeta[WPT];  // their planes (row offsets applied once)
#pragma unroll
  for (int j = 0; j < WPT; ++j)
  {
    const i64 row = min(n0 + wr + j * (THREADS / CPR), N - 1);
    if constexpr (TL) {  // the row's place in its 64-row tile's K-steps (2 KB of q, 256 B of meta each)
      rq[j] = q + (row >> 6) * (nch >> 1) * 2048 + (row & 63) * 32;
      rmeta[j] = meta + (row >> 6) * (nch >> 1) * 256 + (row & 63) * 4;
      rqh[j] = qh;
    } else {
      row_planes<F>(q, qh, meta, row, nch, gchunks, rq[j], rqh[j], rmeta[j]);
    }
    pin_pointer(rq[j]);
    pin_pointer(rmeta[j]);
    if constexpr (F == F_Q6_K) pin_pointer(rqh[j]);
  }
  // This thread's x pieces: row m0 + idx / PPR, columns (idx % PPR) * 8 of each step. Rows past M
  // read row M - 1 (they only feed accumulator rows that are never written) and columns past K are
  // clamped into the row (they meet the zeroed weights of chunks >= K / 32): no branch in the loop.
  int xo[XV], xcap[XV];  // element offset of a piece in x (M * K < 2^31: the host checks), its last one in-row
#pragma unroll
  for (int i = 0; i < XV; ++i) {
    const int idx = t + i * THREADS;
    xo[i] = min(m0 + (int)((unsigned)idx / PPR), M - 1) * K + (int)((unsigned)idx % PPR) * 8;
    xcap[i] = K - 8 - (int)((unsigned)idx % PPR) * 8;
    pin_int(xo[i]);
  }
  // Shared-memory offsets (halves, stage 0) of this thread's stores and this warp's fragments,
  // pinned: NVRTC would rebuild them from threadIdx every step.
  int xs_st[XV], ws_st[WPT];
#pragma unroll
  for (int i = 0; i < XV; ++i) {
    const int idx = t + i * THREADS;
    xs_st[i] = (int)((unsigned)idx / PPR) * GM_LD + (int)((unsigned)idx % PPR) * 8;
    pin_int(xs_st[i]);
  }
#pragma unroll
  for (int j = 0; j < WPT; ++j) {
    ws_st[j] = (BM + wr + j * (THREADS / CPR)) * GM_LD + wj * 32;
    pin_int(ws_st[j]);
  }
  int a_ld = wm * WTM * GM_LD, b_ld = (BM + wn * WTN) * GM_LD;
  pin_int(a_ld);
  pin_int(b_ld);
  // Fragments with at least one row < M: m64 / m128 skip the others. A fragment past M would only
  // multiply row M - 1's copies into outputs that are never written, so the 32-row tiles (decode)
  // multiply all: the warp-uniform branch cost their loop its hoisted shared-memory addresses.
  bool live[FM];
#pragma unroll
  for (int fm = 0; fm < FM; ++fm) live[fm] = BM <= 32 || m0 + wm * WTM + fm * 16 < M;

  struct Regs {  // one K-step's global data of this thread, in flight in registers
    PChunk<F> ck[WPT];
    uint4 xr[XV];
  };
  auto fetch = [&](Regs& r, int st) {  // packed W chunks and x pieces of step st -> registers
    const int c = min(CPR * st + wj, nch - 1);  // past the last chunk: loaded, then zeroed by stash
    if constexpr (TL) {  // chunk c of the row: K-step c / 2, half c % 2
      const unsigned off = ((unsigned)c >> 1) << 11 | ((unsigned)c & 1u) << 4;
#pragma unroll
      for (int j = 0; j < WPT; ++j) {
        r.ck[j].w[0] = __ldg(reinterpret_cast<const uint4*>(rq[j] + off));
        r.ck[j].meta.x = __ldg(reinterpret_cast<const unsigned short*>(rmeta[j] + (off >> 3)));
      }
    } else {
#pragma unroll
      for (int j = 0; j < WPT; ++j) load_chunk<F>(r.ck[j], rq[j], rqh[j], rmeta[j], 0, c, nch, gchunks);
    }
#pragma unroll
    for (int i = 0; i < XV; ++i)
      r.xr[i] = __ldg(reinterpret_cast<const uint4*>(x + xo[i] + min(st * BK, xcap[i])));
  };
  auto stash = [&](const Regs& r, int st, int buf) {  // registers -> shared: x as is, W dequantized
#pragma unroll
    for (int i = 0; i < XV; ++i) *reinterpret_cast<uint4*>(sh + xs_st[i] + buf * SM::STAGE) = r.xr[i];
    const int c = CPR * st + wj;
#pragma unroll
    for (int j = 0; j < WPT; ++j) {
      uint4 o[4];
      dequant_chunk<F>(r.ck[j], c, o, c < nch);
      uint4* dst = reinterpret_cast<uint4*>(sh + ws_st[j] + buf * SM::STAGE);
#pragma unroll
      for (int s = 0; s < 4; ++s) dst[s] = o[s];
    }
  };

  FragC acc[FM][FN];
#pragma unroll
  for (int fm = 0; fm < FM; ++fm)
#pragma unroll
    for (int fn = 0; fn < FN; ++fn)
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[fm][fn].r[i] = 0.f;
  auto load_frags = [&](int buf, int kk, FragAB (&a)[FM], FragAB (&b)[FN]) {
#pragma unroll
    for (int fn = 0; fn < FN; ++fn)
      wmma_load_b_col_shared(b[fn], sh + b_ld + buf * SM::STAGE + fn * 16 * GM_LD + kk * 16, GM_LD);
#pragma unroll
    for (int fm = 0; fm < FM; ++fm)
      if (live[fm]) wmma_load_a_row_shared(a[fm], sh + a_ld + buf * SM::STAGE + fm * 16 * GM_LD + kk * 16, GM_LD);
  };
  auto mma_frags = [&](const FragAB (&a)[FM], const FragAB (&b)[FN]) {
#pragma unroll
    for (int fm = 0; fm < FM; ++fm)
      if (live[fm])  // warp-uniform
#pragma unroll
        for (int fn = 0; fn < FN; ++fn) wmma_mma(acc[fm][fn], a[fm], b[fn]);
  };
  // The step's four k16 slices. Small warp tiles (m32: 3 fragments) hold two slices' fragments, the
  // next slice's loaded before this one's MMAs (each MMA otherwise waits on its own LDSM); larger
  // ones load and multiply slice by slice (their registers are spoken for).
  constexpr bool FRAG_PF = FM + FN <= 3;
  auto mma = [&](int buf) {
    if constexpr (FRAG_PF) {
      FragAB a[2][FM], b[2][FN];
      load_frags(buf, 0, a[0], b[0]);
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        if (kk + 1 < BK / 16) load_frags(buf, kk + 1, a[(kk + 1) & 1], b[(kk + 1) & 1]);
        mma_frags(a[kk & 1], b[kk & 1]);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        FragAB a[FM], b[FN];
        load_frags(buf, kk, a, b);
        mma_frags(a, b);
      }
    }
  };
  // One K-step: fetch step st + PD into `inc`, multiply step st, stash step st + 1 (held in `hold`
  // when PD = 2: two register sets alternate, so two steps of loads are in flight).
  // `parity`: (st - s_begin) & 1, a constant in the two-step loop (the stages' addresses fold).
  auto step = [&](int st, Regs& hold, Regs& inc, int parity) {
    const int buf = STAGES == 2 ? parity : 0;
    if (st + PD < s_end) fetch(inc, st + PD);
    mma(buf);
    if (STAGES == 1) __syncthreads();  // one stage: everyone is done reading it
    if (st + 1 < s_end) stash(PD == 2 ? hold : inc, st + 1, STAGES == 2 ? buf ^ 1 : 0);
    __syncthreads();
  };
  Regs ra, rb;
  fetch(ra, s_begin);
  stash(ra, s_begin, 0);
  if (PD == 2 && s_begin + 1 < s_end) fetch(ra, s_begin + 1);
  __syncthreads();
  if constexpr (PD == 1) {
    for (int st = s_begin; st < s_end; ++st) step(st, ra, ra, (st - s_begin) & 1);
  } else {
    for (int st = s_begin; st < s_end; st += 2) {
      step(st, ra, rb, 0);
      if (st + 1 < s_end) step(st + 1, rb, ra, 1);
    }
  }

  // epilogue: accumulators -> fp32 staging (the stages are free after the loop's last barrier)
  float* cs = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int fm = 0; fm < FM; ++fm)
    if (live[fm])
#pragma unroll
      for (int fn = 0; fn < FN; ++fn)
        wmma_store_d_row_shared(cs + (wm * WTM + fm * 16) * SM::C_LD + wn * WTN + fn * 16, acc[fm][fn], SM::C_LD);
  __syncthreads();
  gemm_epilogue<BM, BN, SM::C_LD, THREADS>(cs, out, bias, ws, counters, M, N, m0, n0, t, last_block);
}

// gemm_p_<fmt>_<tile>: tile m32 / m64 / m128 = BM rows of x per block (gemm_ops.GEMM_TILES: BM, BN,
// stages, BK, threads); WM x WN warps.
#define GEMM_PACKED(NAME, F, TILE, BM, BN, ST, PD, WM, WN, BK)                                          \
  extern "C" __global__ void __launch_bounds__(32 * WM * WN) gemm_p_##NAME##_##TILE(                 \
      __half* out, const __half* x, const unsigned char* q, const unsigned char* qh,                 \
      const unsigned char* meta, const __half* bias, float* ws, unsigned* counters, int M, int N,    \
      int K, int gchunks, int steps_per_split) {                                                      \
    gemm_packed<F, BM, BN, ST, PD, WM, WN, BK>(out, x, q, qh, meta, bias, ws, counters, M, N, K, gchunks, \
                                               steps_per_split);                                      \
  }
// gemm_p_q4_0_<tile>_tl: the decode tiles on the GEMM-tiled q4_0 layout (TL above; gemm_bench --tiled).
#define GEMM_PACKED_TL(TILE, BM, BN, ST, PD, WM, WN, BK)                                                 \
  extern "C" __global__ void __launch_bounds__(32 * WM * WN) gemm_p_q4_0_##TILE##_tl(                \
      __half* out, const __half* x, const unsigned char* q, const unsigned char* qh,                 \
      const unsigned char* meta, const __half* bias, float* ws, unsigned* counters, int M, int N,    \
      int K, int gchunks, int steps_per_split) {                                                      \
    gemm_packed<F_Q4_0, BM, BN, ST, PD, WM, WN, BK, 1>(out, x, q, qh, meta, bias, ws, counters, M, N, K, \
                                                       gchunks, steps_per_split);                     \
  }
// m32t: the m32 tile in 8 warps (2 x 4, one 16 x 16 fragment each) walking K in steps of 128, one
// chunk per thread as in m32, one stage (two stages of 128-wide steps exceed 48 KB of static shared
// memory): twice the warps per block to hide the K walk's latency. An experiment for the
// latency-bound batched-decode GEMM (gemm_shape does not pick it; gemm_bench times it).
#define GEMM_PACKED_ALL(NAME, F)                        \
  GEMM_PACKED(NAME, F, m32, 32, 64, 2, 2, 2, 2, 64)     \
  GEMM_PACKED(NAME, F, m64, 64, 64, 2, 2, 2, 2, 64)     \
  GEMM_PACKED(NAME, F, m128, 128, 64, 1, 1, 2, 2, 64)   \
  GEMM_PACKED(NAME, F, m32w, 32, 128, 2, 2, 2, 2, 64)   \
  GEMM_PACKED(NAME, F, m64w, 64, 128, 1, 2, 2, 2, 64)   \
  GEMM_PACKED(NAME, F, m32t, 32, 64, 1, 2, 2, 4, 128)

GEMM_PACKED_ALL(q4_0, F_Q4_0)
GEMM_PACKED_ALL(q4_1, F_Q4_1)
GEMM_PACKED_ALL(q8_0, F_Q8_0)
GEMM_PACKED_ALL(q4_k, F_Q4_K)
GEMM_PACKED_ALL(q6_k, F_Q6_K)
GEMM_PACKED_ALL(awq, F_AWQ)
GEMM_PACKED_TL(m32, 32, 64, 2, 2, 2, 2, 64)
GEMM_PACKED_TL(m64, 64, 64, 2, 2, 2, 2, 64)
GEMM_PACKED_TL(m32w, 32, 128, 2, 2, 2, 2, 64)
GEMM_PACKED_TL(m32t, 32, 64, 1, 2, 2, 4, 128)
