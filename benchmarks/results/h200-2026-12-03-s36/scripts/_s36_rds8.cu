// s36 experiment (not routed): gemm_rd.cu's q4_0 32-row tiles with int8 activations, as llama.cpp's MMQ
// computes: x quantized per 32-weight chunk to int8 (d = 1 / fp16_rd(127 / amax)), one mma.sync
// m16n8k32.s8.u8 per chunk (one q4_0 block: K 32 in one instruction, twice m16n8k16's multiply-adds at the
// same issue interval on the H200, s36 call 1), the chunk's integer sum scaled by d_x d_w in FP32.
//
//  * Block: 4 warps side by side in N as gemm_rd (a warp owns NB n8 blocks, all 32 rows), K steps of 128
//    (4 chunks). Lane (g, q) of n8 block b reads word q (weights 8q .. 8q + 7) of each of the step's 4 chunks
//    of W row 8b + g: B's low nibbles (v & 0x0F0F0F0F: weights 8q + 0, 4, 1, 5) are k positions 4q .. 4q + 3,
//    the high ones (8q + 2, 6, 3, 7) positions 16 + 4q ..; x's A operand follows that order. W as unsigned
//    codes 0..15: the accumulator starts at 0x4B400000 - 8 sum(x_q) would cancel the -8 per weight; here
//    it starts at 0x4B400000 (1.5 2^23 as a float's bits) and the -8 sum(x_q) rides in the chunk's constant:
//    float(acc bits) = 12582912 + sum(x_q q), so t = fma(F, d_x, -(12582912 + 8 sum(x_q)) d_x) = d_x sum(x_q (q - 8)).
//  * x: each thread quantizes one (row, chunk) of the next step (warp = chunk, lane = row): 4 16-byte loads,
//    the chunk's amax (HMNMX2), x times fp16_rd(127 / amax) + 1536 (one HFMA2 a pair: the low byte of the
//    FP16 result is round(x / d) as an int8), 8 PRMTs into the A fragment words, DP4A for the sum. The
//    stage holds A fragments [mt][chunk][slot q * 8 + g][a0 a2 a1 a3] and per (mt, chunk, g) the floats
//    (d_x, c) of rows g and g + 8.
//  * Epilogue: gemm_epilogue.cuh as gemm_rd (FP16 out, split-K partials, GLU, RowNorm).
#include "gemm_epilogue.cuh"
#include "gemm_dequant.cuh"

ONECAT_DEVICE void imma_16832(int (&d)[4], const uint4& a, unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a.x), "r"(a.z), "r"(a.y), "r"(a.w), "r"(b0), "r"(b1), "r"(0x4B400000));
#else
  __trap();
#endif
}

template <int NB, int PDW, int PF, bool GLU>
__device__ void gemm_rds8(__half* __restrict__ out, const __half* __restrict__ x, const unsigned char* __restrict__ q,
                          const unsigned char* __restrict__ meta, float* __restrict__ ws,
                          unsigned* __restrict__ counters, int M, int N, int K, int steps_per_split,
                          const RowNorm& rn) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  constexpr int THREADS = 128, MT = 2, BM = 32, WN = 8 * NB, BN = 4 * WN, BK = 128, R = PDW + 1;
  constexpr int A_STAGE = MT * 4 * 32 * 16, K_STAGE = MT * 4 * 8 * 16, STAGE = A_STAGE + K_STAGE;
  constexpr int C_LD = BN + 4, AB = 2 * STAGE, CB = BM * C_LD * 4, BYTES = AB > CB ? AB : CB;
  __shared__ __align__(128) unsigned char smem[BYTES];
  __shared__ unsigned last_block;

  const int t = threadIdx.x, lane = t & 31, warp = t >> 5, g = lane >> 2, qd = lane & 3;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const int nch = K >> 5, nsteps = nch >> 2;
  const int s_begin = blockIdx.z * steps_per_split, s_end = min(nsteps, s_begin + steps_per_split);
  auto row_of = [&](int f) -> i64 {  // GLU: the tile's first BN / 2 features are gate rows n0 / 2 .., the rest up
    return (unsigned)min(GLU ? (f < BN / 2 ? 0 : N / 2 - BN / 2) + n0 / 2 + f : n0 + f, N - 1);
  };
  const unsigned* wp[NB];        // word qd of each chunk of row 8b + g
  const unsigned short* sp[NB][2];  // the chunk scales of the lane's output rows 8b + 2qd, + 1
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    wp[b] = reinterpret_cast<const unsigned*>(q + row_of(warp * WN + 8 * b + g) * nch * 16) + qd;
    pin_pointer(wp[b]);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      sp[b][e] = reinterpret_cast<const unsigned short*>(meta) + row_of(warp * WN + 8 * b + 2 * qd + e) * nch;
      pin_pointer(sp[b][e]);
    }
  }
  // the quantizing unit: chunk `warp` of row `lane` (rows past M read row M - 1, never written out)
  const __half* xp = x + (i64)min(m0 + lane, M - 1) * K + 32 * warp;
  pin_pointer(xp);
  const int umt = lane >> 4, ug = lane & 7, uhi = (lane >> 3) & 1;

  struct Regs {
    unsigned w[NB][4];
    uint2 s[NB][2];
  };
  auto fetch_w = [&](Regs& r, int st) {
#pragma unroll
    for (int b = 0; b < NB; ++b) {
#pragma unroll
      for (int c = 0; c < 4; ++c) r.w[b][c] = ldg_pf<PF>(wp[b] + 4 * (4 * st + c));
#pragma unroll
      for (int e = 0; e < 2; ++e) r.s[b][e] = __ldg(reinterpret_cast<const uint2*>(sp[b][e] + 4 * st));
    }
  };
  uint4 xr[4];
  auto fetch_x = [&](int st) {
#pragma unroll
    for (int i = 0; i < 4; ++i) xr[i] = __ldg(reinterpret_cast<const uint4*>(xp + st * BK) + i);
  };
  auto stash_x = [&](int buf) {
    unsigned char* sa = smem + buf * STAGE;
    __half2 h[16];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      h[4 * i] = u2h(xr[i].x);
      h[4 * i + 1] = u2h(xr[i].y);
      h[4 * i + 2] = u2h(xr[i].z);
      h[4 * i + 3] = u2h(xr[i].w);
    }
    __half2 m2 = __habs2(h[0]);
#pragma unroll
    for (int i = 1; i < 16; ++i) m2 = __hmax2(m2, __habs2(h[i]));
    const float amax = fmaxf(__low2float(m2), __high2float(m2));
    float dx = 0.f;
    __half2 inv2 = h2c(0.f);
    if (amax > 0.f) {
      const __half hinv = __float2half_rd(127.f / amax);  // amax hinv <= 127: |round(x hinv)| <= 127
      inv2 = __half2half2(hinv);
      dx = 1.f / __half2float(hinv);
    }
    const __half2 mg = h2c(1536.f);  // 1536 + v (|v| <= 127.5) rounds to an integer: low byte = v as int8
    unsigned p[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) p[i] = h2u(__hfma2(h[i], inv2, mg));
    int s = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // weights 8j .. 8j + 7 in pairs p[4j .. 4j + 3]
      const unsigned lo = __byte_perm(p[4 * j], p[4 * j + 2], 0x6240);      // x 8j + 0, 4, 1, 5
      const unsigned hi = __byte_perm(p[4 * j + 1], p[4 * j + 3], 0x6240);  // x 8j + 2, 6, 3, 7
      s = __dp4a((int)lo, 0x01010101, s);
      s = __dp4a((int)hi, 0x01010101, s);
      *reinterpret_cast<uint2*>(sa + ((umt * 4 + warp) * 32 + j * 8 + ug) * 16 + uhi * 8) = make_uint2(lo, hi);
    }
    const float c = -(12582912.f + 8.f * (float)s) * dx;
    *reinterpret_cast<float2*>(sa + A_STAGE + ((umt * 4 + warp) * 8 + ug) * 16 + uhi * 8) = make_float2(dx, c);
  };

  float acc[NB][MT][4];
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[b][mt][i] = 0.f;

  auto compute = [&](const Regs& r, int buf) {
    const unsigned char* sa = smem + buf * STAGE;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      uint4 a[MT];
      float4 kc[MT];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[mt] = *reinterpret_cast<const uint4*>(sa + ((mt * 4 + c) * 32 + qd * 8 + g) * 16);
        kc[mt] = *reinterpret_cast<const float4*>(sa + A_STAGE + ((mt * 4 + c) * 8 + g) * 16);
      }
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        const unsigned v = r.w[b][c], b0 = v & 0x0F0F0F0Fu, b1 = (v >> 4) & 0x0F0F0F0Fu;
        const unsigned s0 = c < 2 ? r.s[b][0].x : r.s[b][0].y, s1 = c < 2 ? r.s[b][1].x : r.s[b][1].y;
        const float dw0 = __half2float(__ushort_as_half((unsigned short)((c & 1) ? s0 >> 16 : s0 & 0xFFFF)));
        const float dw1 = __half2float(__ushort_as_half((unsigned short)((c & 1) ? s1 >> 16 : s1 & 0xFFFF)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          int d[4];
          imma_16832(d, a[mt], b0, b1);
          acc[b][mt][0] = fmaf(fmaf(__int_as_float(d[0]), kc[mt].x, kc[mt].y), dw0, acc[b][mt][0]);
          acc[b][mt][1] = fmaf(fmaf(__int_as_float(d[1]), kc[mt].x, kc[mt].y), dw1, acc[b][mt][1]);
          acc[b][mt][2] = fmaf(fmaf(__int_as_float(d[2]), kc[mt].z, kc[mt].w), dw0, acc[b][mt][2]);
          acc[b][mt][3] = fmaf(fmaf(__int_as_float(d[3]), kc[mt].z, kc[mt].w), dw1, acc[b][mt][3]);
        }
      }
    }
  };

  Regs rs[R];
  if (s_begin < s_end) {
#pragma unroll
    for (int u = 0; u < PDW; ++u)
      if (s_begin + u < s_end) fetch_w(rs[u], s_begin + u);
  }
  pdl_wait();
  if (s_begin < s_end) {
    fetch_x(s_begin);
    stash_x(0);
  }
  __syncthreads();
  for (int st0 = s_begin; st0 < s_end; st0 += R) {
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int st = st0 + u;
      if (st < s_end) {
        const int buf = (st - s_begin) & 1;
        if (st + PDW < s_end) fetch_w(rs[(u + PDW) % R], st + PDW);
        if (st + 1 < s_end) fetch_x(st + 1);
        compute(rs[u], buf);
        if (st + 1 < s_end) stash_x(buf ^ 1);
        __syncthreads();
      }
    }
  }
  pdl_launch_dependents();
  float* cs = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float* c = cs + (mt * 16 + g) * C_LD + warp * WN + 8 * b + 2 * qd;
      *reinterpret_cast<float2*>(c) = make_float2(acc[b][mt][0], acc[b][mt][1]);
      *reinterpret_cast<float2*>(c + 8 * C_LD) = make_float2(acc[b][mt][2], acc[b][mt][3]);
    }
  __syncthreads();
  gemm_epilogue<BM, BN, C_LD, THREADS, GLU, false, false>(cs, out, nullptr, ws, counters, M, N, m0, n0, t, last_block,
                                                          nullptr, QkvRope{}, rn, NormOut{});
#endif
}

#define GEMM_RDS8(NAME, NB, PDW, PF)                                                                       \
  extern "C" __global__ void __launch_bounds__(128) NAME(                                                  \
      __half* out, const __half* x, const unsigned char* q, const unsigned char* qh,                       \
      const unsigned char* meta, const __half* bias, float* ws, unsigned* counters, int M, int N, int K,   \
      int gchunks, int steps_per_split) {                                                                  \
    gemm_rds8<NB, PDW, PF, false>(out, x, q, meta, ws, counters, M, N, K, steps_per_split, RowNorm{});     \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(128) NAME##_glu(                                            \
      __half* out, const __half* x, const unsigned char* q, const unsigned char* qh,                       \
      const unsigned char* meta, const __half* bias, float* ws, unsigned* counters, int M, int N, int K,   \
      int gchunks, int steps_per_split GEMM_RN_PARAMS) {                                                   \
    gemm_rds8<NB, PDW, PF, true>(out, x, q, meta, ws, counters, M, N, K, steps_per_split, GEMM_RN_ARGS);   \
  }
GEMM_RDS8(gemm_rds8_q4_0_r32w, 4, 2, 128)   // gemm_rd's r32w: 32 x 128, W two steps ahead, L2 prefetch
GEMM_RDS8(gemm_rds8_q4_0_r32, 2, 2, 0)      // r32: 32 x 64
GEMM_RDS8(gemm_rds8_q4_0_r32w1, 4, 1, 128)  // r32w with W one step ahead (fewer registers)
