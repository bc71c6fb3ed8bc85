// gemv.cu: y[M, N] = x[M, K] @ W[N, K]^T (+ bias) for decode-sized M (1..16), FP16 in/out, FP32
// accumulation. Weights: dense FP16, or raw GGUF Q4_0 / Q8_0 rows (blocks of 32 weights:
// fp16 scale d + 16 nibble bytes (q - 8) / 32 int8 bytes; 18 / 34 bytes per block).
//
// Volta shape. GEMV is a pass over W, so everything serves the HBM stream:
//  * gemv_f16_m*: a warp owns NR rows; each lane streams 128-bit W chunks (8 halves) with the
//    next chunk prefetched into registers while the current one is used; x (tiny, L1-resident) is
//    read per chunk; plain FP32 FMA (at M < 8 tensor cores do not help a memory-bound pass);
//    one warp-shuffle reduction per output at the end. MT (a compile-time bound on M) keeps
//    accumulators in registers; rows m >= M are predicated off.
//  * gemv_q4_0_m* / gemv_q8_0_m*: a warp owns one row, each lane one 32-weight block per step
//    (the warp reads 32 consecutive blocks = one contiguous 576 / 1088 byte span). GGUF blocks
//    are only 2-byte aligned, so raw bytes come in as 16-bit loads (next block prefetched),
//    are decoded once to FP32 and reused for all M rows of x; the scale multiplies the block sum.
//  * gemv_f16_hmma: M in 8..16 on tensor cores (PTX wmma m16n16k16 = HMMA.884 on sm_70, written as
//    inline PTX since mma.h needs crt/mma.h, which the runtime wheel lacks). A block owns
//    32 rows of W (two A fragments loaded straight from global, 32-byte aligned since K % 16 == 0)
//    and 4 warps split K; x is staged per 256-wide K chunk in double-buffered shared memory
//    (rows >= M zero-filled, padded leading dimension against bank conflicts) with the next chunk
//    prefetched into registers; warp partials are summed through shared memory.
#include "common.cuh"
#include "wmma.cuh"

// ---- dense FP16, FMA -----------------------------------------------------------------------
template <int MT, int NR>
__device__ void gemv_f16_fma(__half* __restrict__ out, const __half* __restrict__ x,
                             const __half* __restrict__ w, const __half* __restrict__ bias, int M,
                             int N, int K) {
  const int lane = threadIdx.x & 31;
  const int n0 = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * NR;
  if (n0 >= N) return;
  const uint4* wr[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) wr[r] = reinterpret_cast<const uint4*>(w + (i64)min(n0 + r, N - 1) * K);
  float acc[MT][NR];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < NR; ++r) acc[m][r] = 0.f;
  const int nk = K / 8;
  Half8 cur[NR];
  if (lane < nk) {
#pragma unroll
    for (int r = 0; r < NR; ++r) cur[r].u = __ldg(wr[r] + lane);
  }
  for (int c = lane; c < nk; c += 32) {
    Half8 nxt[NR];
    if (c + 32 < nk) {  // register prefetch of the next W chunk
#pragma unroll
      for (int r = 0; r < NR; ++r) nxt[r].u = __ldg(wr[r] + c + 32);
    }
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m < M) {
        Half8 xv;
        xv.u = __ldg(reinterpret_cast<const uint4*>(x + (i64)m * K) + c);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 xf = __half22float2(xv.h2[e]);
#pragma unroll
          for (int r = 0; r < NR; ++r) {
            const float2 wf = __half22float2(cur[r].h2[e]);
            acc[m][r] = fmaf(xf.x, wf.x, fmaf(xf.y, wf.y, acc[m][r]));
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < NR; ++r) cur[r].u = nxt[r].u;
  }
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      const float s = warp_sum(acc[m][r]);
      const int n = n0 + r;
      if (lane == ((m * NR + r) & 31) && m < M && n < N)
        out[(i64)m * N + n] = __float2half_rn(bias ? s + __half2float(bias[n]) : s);
    }
}

// ---- GGUF Q4_0 / Q8_0, FMA -------------------------------------------------------------------
template <int QT>
struct GGUFBlock;  // raw block as 16-bit words
template <>
struct GGUFBlock<0> { static constexpr int WORDS = 9; };   // q4_0: d + 16 bytes
template <>
struct GGUFBlock<1> { static constexpr int WORDS = 17; };  // q8_0: d + 32 bytes

template <int QT>
__device__ __forceinline__ void decode(const unsigned short (&raw)[GGUFBlock<QT>::WORDS], float (&q)[32], float& d) {
  d = __half2float(__ushort_as_half(raw[0]));
#pragma unroll
  for (int j = 0; j < GGUFBlock<QT>::WORDS - 1; ++j) {
    const unsigned v = raw[j + 1];
    if (QT == 0) {  // byte b holds weight b (low nibble) and weight b + 16 (high nibble)
      q[2 * j] = (float)((int)(v & 0xF) - 8);
      q[2 * j + 16] = (float)((int)((v >> 4) & 0xF) - 8);
      q[2 * j + 1] = (float)((int)((v >> 8) & 0xF) - 8);
      q[2 * j + 17] = (float)((int)((v >> 12) & 0xF) - 8);
    } else {
      q[2 * j] = (float)(signed char)(v & 0xFF);
      q[2 * j + 1] = (float)(signed char)(v >> 8);
    }
  }
}

template <int MT, int QT>
__device__ void gemv_gguf_fma(__half* __restrict__ out, const __half* __restrict__ x,
                              const unsigned char* __restrict__ w, const __half* __restrict__ bias,
                              int M, int N, int K) {
  constexpr int WORDS = GGUFBlock<QT>::WORDS;
  const int lane = threadIdx.x & 31;
  const int n = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (n >= N) return;
  const int nb = K / 32;
  const unsigned short* row = reinterpret_cast<const unsigned short*>(w + (i64)n * nb * WORDS * 2);
  float acc[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) acc[m] = 0.f;
  unsigned short cur[WORDS];
  if (lane < nb) {
#pragma unroll
    for (int j = 0; j < WORDS; ++j) cur[j] = __ldg(row + lane * WORDS + j);
  }
  for (int b = lane; b < nb; b += 32) {
    unsigned short nxt[WORDS];
    if (b + 32 < nb) {
#pragma unroll
      for (int j = 0; j < WORDS; ++j) nxt[j] = __ldg(row + (b + 32) * WORDS + j);
    }
    float q[32], d;
    decode<QT>(cur, q, d);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m < M) {
        const uint4* xp = reinterpret_cast<const uint4*>(x + (i64)m * K + b * 32);
        float s = 0.f;
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          Half8 xv;
          xv.u = __ldg(xp + v);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float2 xf = __half22float2(xv.h2[e]);
            s = fmaf(xf.x, q[v * 8 + 2 * e], fmaf(xf.y, q[v * 8 + 2 * e + 1], s));
          }
        }
        acc[m] = fmaf(d, s, acc[m]);
      }
    }
#pragma unroll
    for (int j = 0; j < WORDS; ++j) cur[j] = nxt[j];
  }
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const float s = warp_sum(acc[m]);
    if (lane == (m & 31) && m < M) out[(i64)m * N + n] = __float2half_rn(bias ? s + __half2float(bias[n]) : s);
  }
}

// ---- dense FP16, tensor cores (M 8..16) ----------------------------------------------------------
constexpr int HM_KC = 256, HM_LDX = HM_KC + 8, HM_WARPS = 4, HM_ROWS = 32;

__device__ void gemv_f16_hmma_body(__half* __restrict__ out, const __half* __restrict__ x,
                                   const __half* __restrict__ w, const __half* __restrict__ bias,
                                   int M, int N, int K) {
  __shared__ __align__(32) __half xs[2][16 * HM_LDX];
  __shared__ __align__(32) float red[HM_WARPS][HM_ROWS * 16];
  const int warp = threadIdx.x >> 5;
  const int n0 = blockIdx.x * HM_ROWS;
  const int nchunks = (K + HM_KC - 1) / HM_KC;
  FragC acc[2];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[0].r[i] = acc[1].r[i] = 0.f;
  uint4 pre[4];  // this thread's 4 of the chunk's 16 x 32 uint4
  auto fetch = [&](int c) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int idx = threadIdx.x + j * 128, m = idx >> 5, k = c * HM_KC + (idx & 31) * 8;
      pre[j] = (m < M && k < K) ? __ldg(reinterpret_cast<const uint4*>(x + (i64)m * K + k)) : make_uint4(0, 0, 0, 0);
    }
  };
  auto stash = [&](int buf) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int idx = threadIdx.x + j * 128;
      *reinterpret_cast<uint4*>(&xs[buf][(idx >> 5) * HM_LDX + (idx & 31) * 8]) = pre[j];
    }
  };
  fetch(0);
  stash(0);
  __syncthreads();
  for (int c = 0; c < nchunks; ++c) {
    if (c + 1 < nchunks) fetch(c + 1);
    FragAB a[4][2], b;
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // all W loads of this chunk first
      const int k0 = c * HM_KC + (warp + HM_WARPS * j) * 16;
      if (k0 < K) {
        wmma_load_a_row(a[j][0], w + (i64)n0 * K + k0, K);
        wmma_load_a_row(a[j][1], w + (i64)(n0 + 16) * K + k0, K);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int ks = (warp + HM_WARPS * j) * 16;
      if (c * HM_KC + ks < K) {
        wmma_load_b_col_shared(b, &xs[c & 1][ks], HM_LDX);
        wmma_mma(acc[0], a[j][0], b);
        wmma_mma(acc[1], a[j][1], b);
      }
    }
    if (c + 1 < nchunks) stash((c + 1) & 1);
    __syncthreads();
  }
  wmma_store_d_row_shared(&red[warp][0], acc[0], 16);
  wmma_store_d_row_shared(&red[warp][16 * 16], acc[1], 16);
  __syncthreads();
  for (int idx = threadIdx.x; idx < HM_ROWS * 16; idx += blockDim.x) {
    const int m = idx / HM_ROWS, nl = idx % HM_ROWS, n = n0 + nl;
    if (m < M && n < N) {
      float s = 0.f;
#pragma unroll
      for (int wi = 0; wi < HM_WARPS; ++wi) s += red[wi][nl * 16 + m];
      out[(i64)m * N + n] = __float2half_rn(bias ? s + __half2float(bias[n]) : s);
    }
  }
}

extern "C" __global__ void __launch_bounds__(128) gemv_f16_hmma(__half* out, const __half* x,
                                                                const __half* w, const __half* bias,
                                                                int M, int N, int K) {
  gemv_f16_hmma_body(out, x, w, bias, M, N, K);
}

#define GEMV_F16(MT, NR)                                                                           \
  extern "C" __global__ void __launch_bounds__(128) gemv_f16_m##MT(                               \
      __half* out, const __half* x, const __half* w, const __half* bias, int M, int N, int K) {   \
    gemv_f16_fma<MT, NR>(out, x, w, bias, M, N, K);                                                \
  }
#define GEMV_GGUF(NAME, MT, QT)                                                                    \
  extern "C" __global__ void __launch_bounds__(256) NAME##_m##MT(                                 \
      __half* out, const __half* x, const unsigned char* w, const __half* bias, int M, int N,      \
      int K) {                                                                                      \
    gemv_gguf_fma<MT, QT>(out, x, w, bias, M, N, K);                                                \
  }

GEMV_F16(1, 4)
GEMV_F16(2, 4)
GEMV_F16(4, 2)
GEMV_F16(8, 2)
GEMV_F16(16, 2)
GEMV_GGUF(gemv_q4_0, 1, 0)
GEMV_GGUF(gemv_q4_0, 2, 0)
GEMV_GGUF(gemv_q4_0, 4, 0)
GEMV_GGUF(gemv_q4_0, 8, 0)
GEMV_GGUF(gemv_q4_0, 16, 0)
GEMV_GGUF(gemv_q8_0, 1, 1)
GEMV_GGUF(gemv_q8_0, 2, 1)
GEMV_GGUF(gemv_q8_0, 4, 1)
GEMV_GGUF(gemv_q8_0, 8, 1)
GEMV_GGUF(gemv_q8_0, 16, 1)
