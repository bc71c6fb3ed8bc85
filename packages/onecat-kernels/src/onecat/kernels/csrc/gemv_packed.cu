// gemv_packed.cu: y[M, N] = x[M, K] @ W[N, K]^T (+ bias) for M = 1..16 on prepacked quantized W
// (weights.PackedWeight: q4_0, q4_1, q8_0, q4_k, q6_k, awq). Written for Volta (sm_70), runs as is
// on newer GPUs: 128-bit loads, register prefetch, no cp.async / ldmatrix / TMA.
//
//  * M = 1 (gemv_rows, the decode case): a warp owns R whole rows; lane l takes the 32-weight
//    chunks l + 32 i of each, U chunks per row in flight and the next U prefetched into registers
//    (one warp-wide load reads 512 contiguous bytes, LDG.E.128). No shared memory, no barrier: the
//    warp reduces with shuffles and writes its R outputs. Small register footprint (48-96) keeps
//    many warps resident, which is what hides DRAM latency on a GEMV.
//  * M = 2..4 (gemv_rows with MT = 2 / 4, the _t<MT> entries): the M = 1 walk with every chunk's
//    words dequantized once for all rows of x (packed_formats.cuh chunk_dot_mt; per row the M = 1
//    kernel's bits). H200 s18, llama3-8b decode step at batch 2: q4_0 3.19 -> 2.48 ms (against the
//    register-direct GEMM, which keeps 3+ rows), q4_k 3.76 -> 2.74 (against gemv_packed below).
//  * M = 2..16 (gemv_packed, now for 5..16 rows where no GEMM is admitted): a block (4 warps) owns R
//    rows and the 4 warps split K (chunks c = w*32 + l + 128 i); every weight byte is read once per
//    launch for all M rows of x (x is tiny and comes through L1); partials meet in shared memory.
//  * Dequantization with integer tricks: a 32-bit word holds 8 nibbles laid out so that
//    (v & 0x000F000F) | 0x64006400 is the fp16 pair (1024 + q0, 1024 + q1) and
//    (v & 0x00F000F0) | 0x64006400 is (1024 + 16 q2, 1024 + 16 q3) (one LOP3 each; v >> 8 gives
//    weights 4..7); one HFMA2 each turns them into (q - z) / 16, exact in fp16 and |.| <= 1 (q8_0:
//    PRMT of bytes under 0x64, (q / 128); q6_k: two more bits OR-ed in, (q - 32) / 64). The
//    1/16 (1/128, 1/64) is folded into the fp32 scale.
//  * Math (M = 1): per chunk and row, two fp16 chains of 8 HFMA2 (|partial| <= 8 |x| for 4-bit,
//    16 |x| for q8_0: finite below |x| = 4K), one convert, one FFMA with the fp32 block scale.
//    M > 1: 4 HFMA2 per 8 weights and row of x, then fp32. Formats with a min/offset (q4_1, q4_k)
//    add coef * sum(x) per chunk.
//  * RMSNorm in front, GLU behind (M = 1 kernels; the decode layer's normed projections): NORM_IN
//    kernels take the un-normed x (plus the residual) and build the normalized vector in shared
//    memory in every block (gemv_norm_input: a K-wide read and one block reduction, while the first
//    weight chunks load), so the norm costs no launch of its own and the projection into the
//    residual stream (o_proj / down) stays a plain GEMV; EPI_GLU computes [gate | up] rows in pairs
//    (a warp's first R / 2 rows from the gate half, the rest the same rows of the up half) and
//    writes silu(gate) * up; EPI_ROPE rotates the q and k rows of [q | k | v] (a warp's rows hold
//    whole rotation pairs: adjacent rows for GPT-J, rows j and j + rot / 2 for NeoX) and writes k and
//    v into their paged-cache rows, FP16 or FP8 (E4M3 / E5M2 of the FP16 value, scale 1).
//    The prologue costs the q4_0 gate_up ~2.7 us a chain link (27.4 vs 24.7 us plain; qkv 0.3; H100 s47). Lost
//    there: one resident wave with warps walking row groups, the prologue once a block (28.6 us, 0d5e05d), and
//    each warp forming its chunks' normalized x in the K loop with no shared memory or barrier (43.2 us: the
//    loop's extra loads and FP32 math, 912951f).
//  * Two formats in one launch (the _mix entries: a Q4_K_M qkv, [q | k] q4_k and v q6_k): the blocks of each
//    part walk its own weight (gemv_rows' row0 / blk0), the prologue and the rotary epilogue are the one-format
//    kernels'.
#include "gemv_epilogue.cuh"
#include "gemv_norm_in.cuh"
#include "packed_formats.cuh"

// M = 1: a warp owns R whole rows (no shared memory, no block barrier, except NORM_IN's x and KS's
// partial sums); lane l takes the chunks
// l + 32 (U i + u), U chunks of every row in flight plus the next U prefetched into registers.
// Per chunk and row the 32 products are summed in two fp16 chains of 8 HFMA2 (|w'| <= 1, so a
// chain stays below 16 max|x|: finite for |x| < 4K), then one convert and one FFMA with the scale.
// MT > 1 (M = 2..MT rows of x, plain or GLU outputs): the same walk with every chunk's words dequantized once
// for all M rows (chunk_dot_mt: per row of x the M = 1 kernel's bits); rows m >= M read row M - 1 and
// are not written. The weights are read once for all rows, so a decode batch of 2-4 costs about one
// GEMV instead of M (llama.cpp's mul_mat_vec_q does the same up to 8 columns).
// EPI_NORM / RS: the two halves of a residual add + RMSNorm between two projections (gemv_epilogue.cuh).
// GP: NORM_IN's norm weight, GP uint4s a thread, loaded before the wait (gemv_norm_input's wpre).
template <int F, int R, int U, bool PF, int KS, int EPI = EPI_NONE, bool NORM_IN = false, int NW = 4, int MT = 1,
          bool RS = false, int GP = 0>
__device__ void gemv_rows(__half* __restrict__ out, const __half* __restrict__ x,
                          const unsigned char* __restrict__ q, const unsigned char* __restrict__ qh,
                          const unsigned char* __restrict__ meta, const __half* __restrict__ bias,
                          int N, int K, int gchunks, const GemvNormIn& nin = GemvNormIn{},
                          const GemvRope& rope = GemvRope{}, int M = 1, const NormOut& no = NormOut{},
                          const RowNorm& rn = RowNorm{}, int row0 = 0, int blk0 = 0) {
  constexpr bool SUMX = F == F_Q4_1 || F == F_Q4_K;
  constexpr int STEP = 32 * U * KS;  // chunks per step of one warp's K walk
  constexpr int RO = EPI == EPI_GLU ? R / 2 : R;  // output rows per warp
  static_assert(EPI == EPI_NONE || R % 2 == 0, "GLU / rotary pairs rows");
  // (MT > 1 with the norm in front, H200 s18: its prologue per block for both rows made a batch-2 step
  // 16-24% slower than rms_norm + this plain kernel; dropped)
  static_assert(MT == 1 || (EPI != EPI_ROPE && EPI != EPI_NORM && !NORM_IN && !RS), "several rows of x: plain or GLU outputs");
  static_assert(!(RS && (NORM_IN || EPI == EPI_NORM)), "RS reads a normed x~: no norm prologue, no norm epilogue");
  __shared__ float red[KS > 1 ? NW : 1][MT * R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int kw = warp % KS;  // this warp's share of K (KS warps of a block share R rows)
  const int nout = EPI == EPI_GLU ? N / 2 : N;
  // a two-weight launch's second part (the _mix entries): its blocks from blk0 take rows row0.. (N: the end), its
  // weight's own rows from 0
  const int n0 = row0 + (((int)blockIdx.x - blk0) * (NW / KS) + warp / KS) * RO;
  if (!NORM_IN && !RS && KS == 1 && n0 >= nout) return;  // (NORM_IN / RS: every thread takes their barriers)
  const int nch = K >> 5;
  i64 row[R];
  float acc[MT][R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if constexpr (EPI == EPI_GLU)  // rows r and r + R / 2: the same output's gate and up
      row[r] = (i64)min(n0 + r % RO, nout - 1) + (r < RO ? 0 : nout);
    else
      row[r] = (i64)min(EPI == EPI_ROPE ? rope_row<R>(rope, n0, r) : n0 + r, N - 1);
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[m][r] = 0.f;
  }
  PChunk<F> cur[U][R], nxt[U][R];
  auto load = [&](PChunk<F>(&ck)[U][R], int base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + lane + 32 * u;
      if (c < nch)
#pragma unroll
        for (int r = 0; r < R; ++r) load_chunk<F>(ck[u][r], q, qh, meta, row[r] - row0, c, nch, gchunks);
    }
  };
  // NORM_IN: the first weight chunks load during the prologue (except q6_k with the GLU, where
  // holding them across it spills on sm_70)
  constexpr bool LOAD_FIRST = !(NORM_IN && F == F_Q6_K && EPI == EPI_GLU);
  RopeIn<R> rin;  // EPI_ROPE: read by lane 0 of the kw == 0 warps (dead code otherwise)
  const bool rope_lane = EPI == EPI_ROPE && kw == 0 && lane == 0 && n0 < N;
  // PF kernels without the norm prologue also request the second step before the wait (the same
  // registers the loop's prefetch uses; on sm_70 the same order as the loop's first prefetch)
  constexpr bool NEXT_FIRST = PF && !NORM_IN;
  uint4 wpre[GP > 0 ? GP : 1];
  if constexpr (GP > 0) {
#pragma unroll
    for (int i = 0; i < GP; ++i) {
      const int j = threadIdx.x + i * blockDim.x;
      wpre[i] = j < K >> 3 ? __ldg(reinterpret_cast<const uint4*>(nin.norm_w) + j) : make_uint4(0, 0, 0, 0);
    }
  }
  if (LOAD_FIRST) load(cur, 32 * U * kw);
  if (NEXT_FIRST && 32 * U * kw + STEP < nch) load(nxt, 32 * U * kw + STEP);
  // sm_90 with PDL: the weights above stream while the previous kernel finishes; x, the residual,
  // positions and every output only after it
  pdl_launch_dependents();
  pdl_wait();
  if (rope_lane) rin.start(rope);
  extern __shared__ uint4 xs[];  // NORM_IN: the normalized x, K / 8 uint4 (dynamic shared memory)
  if constexpr (NORM_IN) {
    gemv_norm_input<GP>(xs, x, nin.res, nin.res_out, nin.norm_w, K, nin.eps, wpre);
    if (KS == 1 && n0 >= nout) return;
  }
  float inv = 1.f;
  __half2 inv2 = __float2half2_rn(1.f);
  if constexpr (RS) {
    inv = gemv_row_norm_inv(rn);
    inv2 = __float2half2_rn(inv);
    inv /= __low2float(inv2);  // the sums' share: inv / fp16(inv)
    if (KS == 1 && n0 >= nout) return;
  }
  if (rope_lane) rin.load_cos_sin(rope, n0);
  if (!LOAD_FIRST) load(cur, 32 * U * kw);
  for (int base = 32 * U * kw; base < nch; base += STEP) {
    if (PF && base + STEP < nch && !(NEXT_FIRST && base == 32 * U * kw)) load(nxt, base + STEP);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + lane + 32 * u;
      if constexpr (MT == 1) {
        if (c < nch) {
          Half8 xv[4];
#pragma unroll
          for (int s = 0; s < 4; ++s)
            xv[s].u = NORM_IN ? xs[xs_slot(c * 4 + s)] : __ldg(reinterpret_cast<const uint4*>(x) + c * 4 + s);
          if constexpr (RS) {
#pragma unroll
            for (int s = 0; s < 4; ++s)
#pragma unroll
              for (int i = 0; i < 4; ++i) xv[s].h2[i] = __hmul2(xv[s].h2[i], inv2);
          }
          const float sx = SUMX ? chunk_x_sum(xv) : 0.f;
#pragma unroll
          for (int r = 0; r < R; ++r) acc[0][r] = chunk_dot<F>(cur[u][r], c, xv, sx, acc[0][r]);
        }
      } else if (c < nch) {
        Half8 xv[MT][4];
        float sx[MT], a[MT];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const int mm = min(m, M - 1);
#pragma unroll
          for (int s = 0; s < 4; ++s)
            xv[m][s].u = __ldg(reinterpret_cast<const uint4*>(x + (i64)mm * K) + c * 4 + s);
          sx[m] = SUMX ? chunk_x_sum(xv[m]) : 0.f;
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int m = 0; m < MT; ++m) a[m] = acc[m][r];
          chunk_dot_mt<F, MT>(cur[u][r], c, xv, sx, a);
#pragma unroll
          for (int m = 0; m < MT; ++m) acc[m][r] = a[m];
        }
      }
    }
    if constexpr (PF) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) cur[u][r] = nxt[u][r];
    } else if (base + STEP < nch) {
      load(cur, base + STEP);
    }
  }
  float val[MT][R];
  if constexpr (MT == 1) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = warp_sum(acc[0][r]);
      if constexpr (KS > 1) {
        if (lane == 0) red[warp][r] = v;
        __syncthreads();
        v = 0.f;
#pragma unroll
        for (int w = 0; w < KS; ++w) v += red[warp - kw + w][r];
      }
      val[0][r] = RS ? v * inv : v;
    }
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < MT; ++m) val[m][r] = warp_sum(acc[m][r]);
    if constexpr (KS > 1) {  // one barrier for all M x R sums
      if (lane == 0)
#pragma unroll
        for (int i = 0; i < MT * R; ++i) red[warp][i] = val[i / R][i % R];
      __syncthreads();
#pragma unroll
      for (int i = 0; i < MT * R; ++i) {
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < KS; ++w) v += red[warp - kw + w][i];
        val[i / R][i % R] = v;
      }
    }
  }
  if (EPI == EPI_ROPE && kw == 0 && lane == 0) {
    if (n0 < N) {  // N, q_size, kv_size and head_dim are multiples of R: whole groups
      float y[R];
#pragma unroll
      for (int r = 0; r < R; ++r)
        y[r] = __half2float(__float2half_rn(bias ? val[0][r] + __half2float(bias[row[r]]) : val[0][r]));
      gemv_rope_cache<R>(out, rope, rin, n0, y);
    }
  } else if (EPI == EPI_NORM && kw == 0 && lane == 0) {
    if (n0 < N) gemv_norm_store<R>(no, out, bias, N, n0, val[0]);
  } else if (kw == 0 && lane == 0 && MT == 1) {
#pragma unroll
    for (int r = 0; r < RO; ++r) {
      if (n0 + r >= nout) break;
      if constexpr (EPI == EPI_GLU) {  // as linear then silu_and_mul: y rounded to fp16 first
        out[n0 + r] = __float2half_rn(silu_mul_f16(val[0][r], val[0][r + RO]));
      } else {
        out[n0 + r] = __float2half_rn(bias ? val[0][r] + __half2float(bias[n0 + r]) : val[0][r]);
      }
    }
  } else if (kw == 0 && lane == 0 && EPI == EPI_GLU) {  // MT > 1, GLU: as the M = 1 GLU above, per row of x
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int r = 0; r < RO; ++r)
        if (m < M && n0 + r < nout) out[(i64)m * nout + n0 + r] = __float2half_rn(silu_mul_f16(val[m][r], val[m][r + RO]));
  } else if (kw == 0 && lane == 0) {  // MT > 1: plain rows of M outputs
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (m < M && n0 + r < N)
          out[(i64)m * N + n0 + r] = __float2half_rn(bias ? val[m][r] + __half2float(bias[n0 + r]) : val[m][r]);
  }
}

template <int F, int MT, int R>
__device__ void gemv_packed(__half* __restrict__ out, const __half* __restrict__ x,
                            const unsigned char* __restrict__ q, const unsigned char* __restrict__ qh,
                            const unsigned char* __restrict__ meta, const __half* __restrict__ bias,
                            int M, int N, int K, int gchunks) {
  constexpr bool SUMX = F == F_Q4_1 || F == F_Q4_K;
  __shared__ float red[4][MT * R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = blockIdx.x * R;
  const int nch = K >> 5;
  i64 row[R];
#pragma unroll
  for (int r = 0; r < R; ++r) row[r] = (i64)min(n0 + r, N - 1);
  float acc[MT][R];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.f;

  auto load = [&](PChunk<F>(&ck)[R], int c) {
#pragma unroll
    for (int r = 0; r < R; ++r) load_chunk<F>(ck[r], q, qh, meta, row[r], c, nch, gchunks);
  };

  int c = warp * 32 + lane;
  PChunk<F> cur[R];
  if (c < nch) load(cur, c);
  for (; c < nch; c += 128) {
    PChunk<F> nxt[R];
    if (c + 128 < nch) load(nxt, c + 128);  // register prefetch of the next chunk
    float scale[R], scale1[R], coef[R];
    __half2 nlo[R], nhi[R];
#pragma unroll
    for (int r = 0; r < R; ++r) chunk_consts<F>(cur[r], c, scale[r], scale1[r], coef[r], nlo[r], nhi[r]);
    float sx[MT];
#pragma unroll
    for (int m = 0; m < MT; ++m) sx[m] = 0.f;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      __half2 wv[R][4];  // this word of every row, dequantized once for all M rows of x
#pragma unroll
      for (int r = 0; r < R; ++r) dequant8<F>(cur[r], s, nlo[r], nhi[r], wv[r]);
#pragma unroll
      for (int m = 0; m < MT; ++m)
        if (m < M) {
          Half8 xv;
          xv.u = __ldg(reinterpret_cast<const uint4*>(x + (i64)m * K + c * 32 + s * 8));
          if constexpr (SUMX) {
            const float2 f = __half22float2(__hadd2(__hadd2(xv.h2[0], xv.h2[1]), __hadd2(xv.h2[2], xv.h2[3])));
            sx[m] += f.x + f.y;
          }
#pragma unroll
          for (int r = 0; r < R; ++r) {
            __half2 h = __hmul2(wv[r][0], xv.h2[0]);
            h = __hfma2(wv[r][1], xv.h2[1], h);
            h = __hfma2(wv[r][2], xv.h2[2], h);
            h = __hfma2(wv[r][3], xv.h2[3], h);
            const float2 f = __half22float2(h);
            acc[m][r] = fmaf((F == F_Q6_K && s >= 2) ? scale1[r] : scale[r], f.x + f.y, acc[m][r]);
          }
        }
    }
    if constexpr (SUMX) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < MT; ++m) acc[m][r] = fmaf(coef[r], sx[m], acc[m][r]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) cur[r] = nxt[r];
  }
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = warp_sum(acc[m][r]);
      if (lane == 0) red[warp][m * R + r] = v;
    }
  __syncthreads();
  for (int idx = threadIdx.x; idx < MT * R; idx += blockDim.x) {
    const int m = idx / R, n = n0 + idx % R;
    if (m < M && n < N) {
      const float s = red[0][idx] + red[1][idx] + red[2][idx] + red[3][idx];
      out[(i64)m * N + n] = __float2half_rn(bias ? s + __half2float(bias[n]) : s);
    }
  }
}

#define GEMV_PACKED(NAME, F, MT, R)                                                                \
  extern "C" __global__ void __launch_bounds__(128) gemv_p_##NAME##_m##MT(                        \
      __half* out, const __half* x, const unsigned char* q, const unsigned char* qh,               \
      const unsigned char* meta, const __half* bias, int M, int N, int K, int gchunks) {           \
    gemv_packed<F, MT, R>(out, x, q, qh, meta, bias, M, N, K, gchunks);                            \
  }
// M = 1 kernels, gemv_r_<fmt>_r<R>u<U>k<KS>[n]: R rows per warp, U chunks per lane and row in flight,
// KS of the block's 4 warps splitting K, n = no register prefetch (cuda_ops.gemv_m1_shape picks one).
#define GEMV_ROWS(NAME, F, R, U, PF, KS, SFX)                                                      \
  extern "C" __global__ void __launch_bounds__(128) gemv_r_##NAME##_r##R##u##U##k##KS##SFX(       \
      __half* out, const __half* x, const unsigned char* q, const unsigned char* qh,               \
      const unsigned char* meta, const __half* bias, int M, int N, int K, int gchunks) {           \
    gemv_rows<F, R, U, PF, KS>(out, x, q, qh, meta, bias, N, K, gchunks);                          \
  }
// M = 2..MT rows of x on the M = 1 walk (gemv_r_<fmt>_r<R>u<U>k<KS><n>_t<MT>; cuda_ops.gemv_mt_shape).
#define GEMV_ROWS_MT(NAME, F, R, U, PF, KS, SFX, MT)                                                  \
  extern "C" __global__ void __launch_bounds__(128) gemv_r_##NAME##_r##R##u##U##k##KS##SFX##_t##MT( \
      __half* out, const __half* x, const unsigned char* q, const unsigned char* qh,               \
      const unsigned char* meta, const __half* bias, int M, int N, int K, int gchunks) {           \
    gemv_rows<F, R, U, PF, KS, EPI_NONE, false, 4, MT>(out, x, q, qh, meta, bias, N, K, gchunks, GemvNormIn{}, \
                                                      GemvRope{}, M);                              \
  }
// ... with the GLU behind (W = [gate | up], out = silu(gate) * up, N / 2 wide; linear_fused_ops'
// cuda_gemv_glu after an rms_norm launch: a decode batch of two's gate_up without a silu_and_mul launch)
#define GEMV_ROWS_MT_GLU(NAME, F, R, U, PF, KS, SFX, MT)                                              \
  extern "C" __global__ void __launch_bounds__(128) gemv_r_##NAME##_r##R##u##U##k##KS##SFX##_t##MT##_glu( \
      __half* out, const __half* x, const unsigned char* q, const unsigned char* qh,               \
      const unsigned char* meta, const __half* bias, int M, int N, int K, int gchunks) {           \
    gemv_rows<F, R, U, PF, KS, EPI_GLU, false, 4, MT>(out, x, q, qh, meta, nullptr, N, K, gchunks, GemvNormIn{}, \
                                                     GemvRope{}, M);                               \
  }
// MT (a compile-time bound on M; rows m >= M are skipped) and R (rows of W per block) for M = 2..4
// (since s18 only the A/B baseline of the _t<MT> kernels: cuda_ops.GEMV_MT_MAX = 1) and 5..16 (x reuse
// across 4 rows); M = 1 has the warp-per-rows kernels in several shapes (the
// provider picks one per matrix, cuda_ops.gemv_m1_shape; tools/gpu/gemv_variants.py times them all).
// M = 1 with the RMSNorm in front (gemv_r_<fmt>_r<R>u<U>k<KS>[n]_rn; _rn_glu with the GLU epilogue,
// _rn_rope with rotary + KV-cache write of [q | k | v]): the shapes gemv_m1_shape picks for qkv and
// gate_up. Dynamic shared memory: K * 2 bytes. SFX nw8: 8 warps per block (256 threads), half the blocks,
// so half the blocks' prologue reads (x, residual, norm weight: 3 K-wide vectors per block).
// the parameters every _rn kernel takes (the _rope one adds its own)
#define GEMV_RN_PARAMS                                                                                   \
  __half* out, const __half* x, const unsigned char* q, const unsigned char* qh, const unsigned char* meta, \
      const __half* bias, int N, int K, int gchunks, const __half* res, const __half* norm_w,              \
      __half* res_out, float eps
// the rotary + cache-write parameters of the _rope entries (GemvRope's fields)
#define GEMV_ROPE_PARAMS                                                                                 \
  const i64 *positions, const i64 *slots, const float *cos_sin, __half *k_cache, __half *v_cache, int q_size, \
      int kv_size, int head_dim, int rot, int neox, int kv
#define GEMV_ROPE_ARGS GemvRope{positions, slots, cos_sin, k_cache, v_cache, q_size, kv_size, head_dim, rot, neox, kv}
// FORM: the wait-first entries (GP 0, TAG empty) or the _gp ones (GP 2, TAG _gp: the norm weight loaded before the
// wait, both slots' x and residual loads issued together, one barrier in the reduction; the same bits; q4_0's route
// with PDL, s48: a llama3-8b batch-1 step 5% shorter on an H100, linear_fused_ops.NORM_WEIGHT_FIRST); LB / LB_ROPE
// the entries' __launch_bounds__ arguments, parenthesized (the _gp ones hold blocks an SM: a register cap).
#define GEMV_ROWS_RN_FORM(NAME, F, R, U, PF, KS, SFX, NW, GP, TAG, LB, LB_ROPE)                          \
  extern "C" __global__ void __launch_bounds__ LB gemv_r_##NAME##_r##R##u##U##k##KS##SFX##_rn##TAG( \
      GEMV_RN_PARAMS) {                                                                                 \
    gemv_rows<F, R, U, PF, KS, EPI_NONE, true, NW, 1, false, GP>(out, x, q, qh, meta, bias, N, K, gchunks, \
                                                                GemvNormIn{res, norm_w, res_out, eps}); \
  }                                                                                                     \
  extern "C" __global__ void __launch_bounds__ LB gemv_r_##NAME##_r##R##u##U##k##KS##SFX##_rn_glu##TAG( \
      GEMV_RN_PARAMS) {                                                                                 \
    gemv_rows<F, R, U, PF, KS, EPI_GLU, true, NW, 1, false, GP>(out, x, q, qh, meta, nullptr, N, K, gchunks, \
                                                               GemvNormIn{res, norm_w, res_out, eps});  \
  }                                                                                                     \
  extern "C" __global__ void __launch_bounds__ LB_ROPE                                                   \
      gemv_r_##NAME##_r##R##u##U##k##KS##SFX##_rn_rope##TAG(GEMV_RN_PARAMS, GEMV_ROPE_PARAMS) {         \
    gemv_rows<F, R, U, PF, KS, EPI_ROPE, true, NW, 1, false, GP>(out, x, q, qh, meta, bias, N, K, gchunks, \
                                                                GemvNormIn{res, norm_w, res_out, eps},  \
                                                                GEMV_ROPE_ARGS);                        \
  }
#define GEMV_ROWS_RN_W(NAME, F, R, U, PF, KS, SFX, NW) \
  GEMV_ROWS_RN_FORM(NAME, F, R, U, PF, KS, SFX, NW, 0, , (32 * NW), (32 * NW))
#define GEMV_ROWS_RN(NAME, F, R, U, PF, KS, SFX) GEMV_ROWS_RN_W(NAME, F, R, U, PF, KS, SFX, 4)
// the _gp entries held to the route's occupancy: 4 blocks of 8 warps (64 registers) on sm_80+, 3 on sm_70; the
// rotary one to 3 (80 registers) everywhere
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define GP_MIN_BLOCKS 4
#else
#define GP_MIN_BLOCKS 3
#endif
#define GEMV_ROWS_RN_GP(NAME, F, R, U, PF, KS, SFX, NW) \
  GEMV_ROWS_RN_FORM(NAME, F, R, U, PF, KS, SFX, NW, 2, _gp, (32 * NW, GP_MIN_BLOCKS), (32 * NW, 3))
// M = 1, the residual add + RMSNorm between two projections split over them (linear_norm_ops' cuda_gemv_norm):
// _norm (o / down: EPI_NORM in the plain shape gemv_m1_shape picks; + res, res_out, gamma, ss) in front, then
// _rs_glu / _rs_rope (gate_up / qkv: RS in the normed shape it picks, NW warps a block; + ss, ss_tiles, eps, and
// the rope parameters as _rn_rope's) reading its x~.
#define GEMV_JOIN_PARAMS                                                                                 \
  __half* out, const __half* x, const unsigned char* q, const unsigned char* qh, const unsigned char* meta, \
      const __half* bias, int N, int K, int gchunks
#define GEMV_ROWS_NORM_OUT(NAME, F, R, U, PF, KS, SFX)                                                  \
  extern "C" __global__ void __launch_bounds__(128) gemv_r_##NAME##_r##R##u##U##k##KS##SFX##_norm(      \
      GEMV_JOIN_PARAMS, const __half* res, __half* res_out, const __half* gamma, float* ss) {           \
    gemv_rows<F, R, U, PF, KS, EPI_NORM>(out, x, q, qh, meta, bias, N, K, gchunks, GemvNormIn{}, GemvRope{}, 1, \
                                         NormOut{res, res_out, gamma, ss});                             \
  }
#define GEMV_ROWS_RS_W(NAME, F, R, U, PF, KS, SFX, NW)                                                  \
  extern "C" __global__ void __launch_bounds__(32 * NW) gemv_r_##NAME##_r##R##u##U##k##KS##SFX##_rs_glu( \
      GEMV_JOIN_PARAMS, const float* ss, int ss_tiles, float eps) {                                     \
    gemv_rows<F, R, U, PF, KS, EPI_GLU, false, NW, 1, true>(out, x, q, qh, meta, nullptr, N, K, gchunks,  \
                                                           GemvNormIn{}, GemvRope{}, 1, NormOut{},      \
                                                           RowNorm{ss, ss_tiles, K, eps});              \
  }                                                                                                     \
  extern "C" __global__ void __launch_bounds__(32 * NW) gemv_r_##NAME##_r##R##u##U##k##KS##SFX##_rs_rope( \
      GEMV_JOIN_PARAMS, const float* ss, int ss_tiles, float eps, GEMV_ROPE_PARAMS) {                   \
    gemv_rows<F, R, U, PF, KS, EPI_ROPE, false, NW, 1, true>(out, x, q, qh, meta, bias, N, K, gchunks,   \
                                                            GemvNormIn{}, GEMV_ROPE_ARGS, 1, NormOut{}, \
                                                            RowNorm{ss, ss_tiles, K, eps});             \
  }
// M = 1, a projection held in two formats (weights.RowParts: a Q4_K_M file's [q | k] in q4_k, v in q6_k) as one
// launch of the normed qkv + rotary + cache write: rows [0, na) from weight A (format FA, its shape), rows [na, N)
// from weight B (FB, its shape), NW warps a block for both; blocks [0, nba) take A's rows. The norm in front as
// _rn_rope's (_mix..._rn_rope) or the join's scale as _rs_rope's (_mix..._rs_rope). gemv_mix_<FA shape>_<FB shape>.
// The _rs_rope form is held to RS_MB resident blocks per SM: both parts' code in one kernel took 96 registers where
// the one-format kernel takes 78 (2 blocks of 8 warps per SM instead of 3); held to 3 it takes 80, no spills, and a
// Q4_K_M batch-1 step ran 2.4-3.8% faster in every round (H200 s34 call 4). (_rn_rope held to 3 spills: not held.)
#define GEMV_MIX_PARAMS                                                                                  \
  __half* out, const __half* x, const unsigned char* qa, const unsigned char* qha, const unsigned char* metaa, \
      int gchunksa, const unsigned char* qb, const unsigned char* qhb, const unsigned char* metab, int gchunksb, \
      int na, int nba, const __half* bias, int N, int K
#define GEMV_MIX_ROPE(NA, FA, RA, UA, PFA, KSA, SA, NB, FB, RB, UB, PFB, KSB, SB, NW, RS_MB)             \
  extern "C" __global__ void __launch_bounds__(32 * NW)                                                 \
      gemv_mix_##NA##_r##RA##u##UA##k##KSA##SA##_##NB##_r##RB##u##UB##k##KSB##SB##_rn_rope(               \
          GEMV_MIX_PARAMS, const __half* res, const __half* norm_w, __half* res_out, float eps, GEMV_ROPE_PARAMS) { \
    const GemvNormIn nin{res, norm_w, res_out, eps};                                                    \
    if ((int)blockIdx.x < nba)                                                                          \
      gemv_rows<FA, RA, UA, PFA, KSA, EPI_ROPE, true, NW>(out, x, qa, qha, metaa, bias, na, K, gchunksa, nin, \
                                                          GEMV_ROPE_ARGS);                              \
    else                                                                                                \
      gemv_rows<FB, RB, UB, PFB, KSB, EPI_ROPE, true, NW>(out, x, qb, qhb, metab, bias, N, K, gchunksb, nin, \
                                                          GEMV_ROPE_ARGS, 1, NormOut{}, RowNorm{}, na, nba); \
  }                                                                                                     \
  extern "C" __global__ void __launch_bounds__(32 * NW, RS_MB)                                          \
      gemv_mix_##NA##_r##RA##u##UA##k##KSA##SA##_##NB##_r##RB##u##UB##k##KSB##SB##_rs_rope(               \
          GEMV_MIX_PARAMS, const float* ss, int ss_tiles, float eps, GEMV_ROPE_PARAMS) {                \
    const RowNorm rn{ss, ss_tiles, K, eps};                                                             \
    if ((int)blockIdx.x < nba)                                                                          \
      gemv_rows<FA, RA, UA, PFA, KSA, EPI_ROPE, false, NW, 1, true>(out, x, qa, qha, metaa, bias, na, K, gchunksa, \
                                                                   GemvNormIn{}, GEMV_ROPE_ARGS, 1, NormOut{}, rn); \
    else                                                                                                \
      gemv_rows<FB, RB, UB, PFB, KSB, EPI_ROPE, false, NW, 1, true>(out, x, qb, qhb, metab, bias, N, K, gchunksb, \
                                                                   GemvNormIn{}, GEMV_ROPE_ARGS, 1, NormOut{}, rn, \
                                                                   na, nba);                            \
  }
#define GEMV_PACKED_ALL(NAME, F) \
  GEMV_PACKED(NAME, F, 4, 4)     \
  GEMV_PACKED(NAME, F, 16, 4)    \
  GEMV_ROWS(NAME, F, 2, 1, true, 1, )    \
  GEMV_ROWS(NAME, F, 4, 1, true, 1, )    \
  GEMV_ROWS(NAME, F, 4, 1, false, 1, n)  \
  GEMV_ROWS(NAME, F, 8, 1, false, 1, n)  \
  GEMV_ROWS(NAME, F, 4, 1, true, 2, )    \
  GEMV_ROWS(NAME, F, 4, 1, false, 2, n)  \
  GEMV_ROWS(NAME, F, 4, 2, false, 2, n)  \
  GEMV_ROWS_MT(NAME, F, 4, 1, false, 2, n, 2) \
  GEMV_ROWS_MT(NAME, F, 4, 1, false, 2, n, 4) \
  GEMV_ROWS_MT(NAME, F, 4, 1, false, 1, n, 2) \
  GEMV_ROWS_MT(NAME, F, 4, 1, false, 1, n, 4) \
  GEMV_ROWS_MT_GLU(NAME, F, 4, 1, false, 2, n, 2) \
  GEMV_ROWS_MT_GLU(NAME, F, 4, 1, false, 1, n, 2)

GEMV_PACKED_ALL(q4_0, F_Q4_0)
GEMV_PACKED_ALL(q4_1, F_Q4_1)
GEMV_PACKED_ALL(q8_0, F_Q8_0)
GEMV_PACKED_ALL(q4_k, F_Q4_K)
GEMV_PACKED_ALL(q6_k, F_Q6_K)
GEMV_PACKED_ALL(awq, F_AWQ)
// normed-input kernels: the shapes cuda_ops.gemv_m1_shape can return per format (normed=True)
GEMV_ROWS_RN_W(q4_0, F_Q4_0, 4, 1, false, 2, nw8, 8)
GEMV_ROWS_RN_W(q4_0, F_Q4_0, 4, 1, false, 1, nw8, 8)
GEMV_ROWS_RN_GP(q4_0, F_Q4_0, 4, 1, false, 2, nw8, 8)
GEMV_ROWS_RN_GP(q4_0, F_Q4_0, 4, 1, false, 1, nw8, 8)
GEMV_ROWS_RN(q4_1, F_Q4_1, 4, 1, false, 2, n)
GEMV_ROWS_RN(q4_1, F_Q4_1, 4, 1, false, 1, n)
GEMV_ROWS_RN(awq, F_AWQ, 4, 1, false, 2, n)
GEMV_ROWS_RN(awq, F_AWQ, 4, 1, false, 1, n)
GEMV_ROWS_RN(q8_0, F_Q8_0, 4, 1, false, 2, n)
GEMV_ROWS_RN_W(q4_k, F_Q4_K, 4, 1, false, 2, nw8, 8)
GEMV_ROWS_RN(q4_k, F_Q4_K, 4, 1, false, 1, n)
GEMV_ROWS_RN(q6_k, F_Q6_K, 2, 1, true, 1, )
// joined, q4_k (linear_norm_ops.FRONT_SHAPES / BEHIND_SHAPES: q4_0 measured slower than its prologue kernels, s32):
// _norm in the plain shapes gemv_m1_shape picks, _rs_glu / _rs_rope in the normed ones
GEMV_ROWS_NORM_OUT(q4_k, F_Q4_K, 4, 1, true, 2, )
GEMV_ROWS_NORM_OUT(q4_k, F_Q4_K, 4, 1, true, 1, )
GEMV_ROWS_NORM_OUT(q6_k, F_Q6_K, 4, 1, true, 2, )  // a Q4_K_M file's q6_k downs (K 14336), in front of q4_k / mixed qkv
GEMV_ROWS_RS_W(q4_k, F_Q4_K, 4, 1, false, 2, nw8, 8)
GEMV_ROWS_RS_W(q4_k, F_Q4_K, 4, 1, false, 1, n, 4)
// two formats, q4_k [q | k] + q6_k v (linear_fused_ops.MIX_SHAPES): both in q4_k's normed qkv shape (the K split of the
// plain GEMVs the unfused route runs: the same sums)
GEMV_MIX_ROPE(q4_k, F_Q4_K, 4, 1, false, 2, nw8, q6_k, F_Q6_K, 4, 1, false, 2, nw8, 8, 3)
