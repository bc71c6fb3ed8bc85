// gemv_packed.cu: y[M, N] = x[M, K] @ W[N, K]^T (+ bias) for M = 1..16 on prepacked quantized W
// (weights.PackedWeight: q4_0, q4_1, q8_0, q4_k, q6_k, awq). Written for Volta (sm_70), runs as is
// on newer GPUs: 128-bit loads, register prefetch, no cp.async / ldmatrix / TMA.
//
//  * Work split: a block (4 warps) owns R consecutive rows of W; the 4 warps split K. Lane l of
//    warp w takes the 32-weight chunks c = w*32 + l + 128 i, so for each row one warp-wide load
//    reads 32 consecutive 16-byte chunks (512 contiguous bytes, LDG.E.128), and the next chunk's
//    R rows are prefetched into registers while the current ones are used. Every weight byte is
//    read once per launch for all M rows of x (x is tiny and comes through L1).
//  * Dequantization with integer tricks: a 32-bit word holds 8 nibbles laid out so that
//    (v & 0x000F000F) | 0x64006400 is the fp16 pair (1024 + q0, 1024 + q1) and
//    (v & 0x00F000F0) | 0x64006400 is (1024 + 16 q2, 1024 + 16 q3) (one LOP3 each; v >> 8 gives
//    weights 4..7); one HFMA2 each turns them into (q - z) / 16, exact in fp16 and |.| <= 1 (q8_0:
//    PRMT of bytes under 0x64, (q / 128); q6_k: two more bits OR-ed in, (q - 32) / 64). The
//    1/16 (1/128, 1/64) is folded into the fp32 scale.
//  * Math: per 8 weights and row of x, 4 HFMA2 form a fp16 partial of 4 products per half lane
//    (|partial| <= 4 |x|: no overflow below |x| = 16K), converted to fp32 and accumulated with the
//    block scale in fp32 (FFMA). Formats with a min/offset (q4_1, q4_k) add coef * sum(x) per chunk.
//  * Reduction: warp shuffles, then the 4 warps' partials through shared memory; one thread per
//    output writes fp16 (+ bias).
#include "common.cuh"

enum { F_Q4_0 = 0, F_Q4_1 = 1, F_Q8_0 = 2, F_Q4_K = 3, F_Q6_K = 4, F_AWQ = 5 };

template <int F>
struct PChunk {
  uint4 w[F == F_Q8_0 ? 2 : 1];  // 32 weights of one row
  uint2 h;                        // q6_k: high bits
  uint4 meta;                     // scale words (q4_k: the 16-byte header)
};

ONECAT_DEVICE unsigned lop_or(unsigned v, unsigned mask) {  // (v & mask) | 0x64006400: one LOP3
  return (v & mask) | 0x64006400u;
}
ONECAT_DEVICE __half2 u2h(unsigned u) {
  __half2 h;
  *reinterpret_cast<unsigned*>(&h) = u;
  return h;
}
ONECAT_DEVICE __half2 h2c(float a) { return __float2half2_rn(a); }

// 8 weights of word s (0..3) of one chunk -> 4 half2 (q - z) / D, pairs (0,1) (2,3) (4,5) (6,7).
template <int F>
ONECAT_DEVICE void dequant8(const PChunk<F>& ck, int s, __half2 nlo, __half2 nhi, __half2 (&wv)[4]) {
  if constexpr (F == F_Q8_0) {
    const uint4& w = ck.w[s >> 1];
    const unsigned a = ((s & 1) ? w.z : w.x) ^ 0x80808080u, b = ((s & 1) ? w.w : w.y) ^ 0x80808080u;
    const __half2 sc = h2c(1.f / 128.f), off = h2c(-9.f);  // (1024 + q + 128) / 128 - 9 = q / 128
    wv[0] = __hfma2(u2h(__byte_perm(a, 0x64u, 0x4140)), sc, off);
    wv[1] = __hfma2(u2h(__byte_perm(a, 0x64u, 0x4342)), sc, off);
    wv[2] = __hfma2(u2h(__byte_perm(b, 0x64u, 0x4140)), sc, off);
    wv[3] = __hfma2(u2h(__byte_perm(b, 0x64u, 0x4342)), sc, off);
  } else {
    const unsigned v = s == 0 ? ck.w[0].x : s == 1 ? ck.w[0].y : s == 2 ? ck.w[0].z : ck.w[0].w;
    const unsigned v2 = v >> 8;
    if constexpr (F == F_Q6_K) {
      const unsigned hw = (s < 2) ? ck.h.x : ck.h.y;
      const unsigned hb = (s & 1) ? __funnelshift_r(hw, hw, 8) : hw, hb2 = hb >> 2;
      const __half2 slo = h2c(1.f / 64.f), shi = h2c(1.f / 1024.f), olo = h2c(-16.5f), ohi = h2c(-1.5f);
      wv[0] = __hfma2(u2h(lop_or(v, 0x000F000Fu) | (hb & 0x00300030u)), slo, olo);
      wv[1] = __hfma2(u2h(lop_or(v, 0x00F000F0u) | (hb & 0x03000300u)), shi, ohi);
      wv[2] = __hfma2(u2h(lop_or(v2, 0x000F000Fu) | (hb2 & 0x00300030u)), slo, olo);
      wv[3] = __hfma2(u2h(lop_or(v2, 0x00F000F0u) | (hb2 & 0x03000300u)), shi, ohi);
    } else {
      const __half2 slo = h2c(1.f / 16.f), shi = h2c(1.f / 256.f);
      wv[0] = __hfma2(u2h(lop_or(v, 0x000F000Fu)), slo, nlo);
      wv[1] = __hfma2(u2h(lop_or(v, 0x00F000F0u)), shi, nhi);
      wv[2] = __hfma2(u2h(lop_or(v2, 0x000F000Fu)), slo, nlo);
      wv[3] = __hfma2(u2h(lop_or(v2, 0x00F000F0u)), shi, nhi);
    }
  }
}

ONECAT_DEVICE unsigned hdr_byte(const uint4& h, int i) {  // byte i of the 12 q4_k scale bytes
  const unsigned w = i < 4 ? h.y : (i < 8 ? h.z : h.w);
  return (w >> (8 * (i & 3))) & 0xFFu;
}

template <int F, int MT, int R>
__device__ void gemv_packed(__half* __restrict__ out, const __half* __restrict__ x,
                            const unsigned char* __restrict__ q, const unsigned char* __restrict__ qh,
                            const unsigned char* __restrict__ meta, const __half* __restrict__ bias,
                            int M, int N, int K, int gchunks) {
  constexpr int QV = F == F_Q8_0 ? 2 : 1;  // uint4 per chunk and row
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
    for (int r = 0; r < R; ++r) {
      const uint4* wp = reinterpret_cast<const uint4*>(q) + (row[r] * nch + c) * QV;
#pragma unroll
      for (int v = 0; v < QV; ++v) ck[r].w[v] = __ldg(wp + v);
      if constexpr (F == F_Q6_K) ck[r].h = __ldg(reinterpret_cast<const uint2*>(qh) + row[r] * nch + c);
      if constexpr (F == F_Q4_0 || F == F_Q8_0)
        ck[r].meta.x = __ldg(reinterpret_cast<const unsigned short*>(meta) + row[r] * nch + c);
      else if constexpr (F == F_Q4_1 || F == F_Q6_K)
        ck[r].meta.x = __ldg(reinterpret_cast<const unsigned*>(meta) + row[r] * nch + c);
      else if constexpr (F == F_AWQ)
        ck[r].meta.x = __ldg(reinterpret_cast<const unsigned*>(meta) + row[r] * (nch / gchunks) + c / gchunks);
      else
        ck[r].meta = __ldg(reinterpret_cast<const uint4*>(meta) + row[r] * (nch >> 3) + (c >> 3));
    }
  };

  int c = warp * 32 + lane;
  PChunk<F> cur[R];
  if (c < nch) load(cur, c);
  for (; c < nch; c += 128) {
    PChunk<F> nxt[R];
    if (c + 128 < nch) load(nxt, c + 128);  // register prefetch of the next chunk
    // per-row constants: fp32 scale(s), the min/offset coefficient, the fp16 zero terms
    float scale[R], scale1[R], coef[R];
    __half2 nlo[R], nhi[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const unsigned mw = cur[r].meta.x;
      nlo[r] = h2c(-64.5f);  // -(1024 + 8) / 16
      nhi[r] = h2c(-4.5f);   // -(1024 + 16 * 8) / 256
      coef[r] = 0.f;
      scale1[r] = 0.f;
      if constexpr (F == F_Q4_0) {
        scale[r] = 16.f * __half2float(__ushort_as_half((unsigned short)(mw & 0xFFFF)));
      } else if constexpr (F == F_Q8_0) {
        scale[r] = 128.f * __half2float(__ushort_as_half((unsigned short)(mw & 0xFFFF)));
      } else if constexpr (F == F_Q4_1) {
        const float d = __half2float(__ushort_as_half((unsigned short)(mw & 0xFFFF)));
        const float mn = __half2float(__ushort_as_half((unsigned short)(mw >> 16)));
        scale[r] = 16.f * d;
        coef[r] = fmaf(8.f, d, mn);
      } else if constexpr (F == F_Q4_K) {
        const uint4& hd = cur[r].meta;
        const float d = __half2float(__ushort_as_half((unsigned short)(hd.x & 0xFFFF)));
        const float dmin = __half2float(__ushort_as_half((unsigned short)(hd.x >> 16)));
        const int j = c & 7;
        unsigned sc, mn;
        if (j < 4) {
          sc = hdr_byte(hd, j) & 63u;
          mn = hdr_byte(hd, j + 4) & 63u;
        } else {
          const unsigned b = hdr_byte(hd, j + 4);
          sc = (b & 15u) | ((hdr_byte(hd, j - 4) >> 6) << 4);
          mn = (b >> 4) | ((hdr_byte(hd, j) >> 6) << 4);
        }
        const float dl = d * (float)sc, ml = dmin * (float)mn;
        scale[r] = 16.f * dl;
        coef[r] = fmaf(8.f, dl, -ml);
      } else if constexpr (F == F_Q6_K) {
        const float d = __half2float(__ushort_as_half((unsigned short)(mw >> 16)));
        scale[r] = 64.f * (d * (float)(signed char)(mw & 0xFF));
        scale1[r] = 64.f * (d * (float)(signed char)((mw >> 8) & 0xFF));
      } else {  // awq: (s, 1024 + z)
        scale[r] = 16.f * __half2float(__ushort_as_half((unsigned short)(mw & 0xFFFF)));
        const __half zz = __ushort_as_half((unsigned short)(mw >> 16));
        nlo[r] = __hmul2(__half2half2(zz), h2c(-1.f / 16.f));  // -(1024 + z) / 16
        nhi[r] = __hadd2(nlo[r], h2c(60.f));                    // -(64 + z) / 16
      }
    }
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
// MT (a compile-time bound on M; rows m >= M are skipped) and R (rows of W per block): M = 1 reads
// 8 rows per block (8 x 16 B in flight per lane); M = 2..4 and 5..16 keep x reuse with 4 rows.
#define GEMV_PACKED_ALL(NAME, F) \
  GEMV_PACKED(NAME, F, 1, 8)     \
  GEMV_PACKED(NAME, F, 4, 4)     \
  GEMV_PACKED(NAME, F, 16, 4)

GEMV_PACKED_ALL(q4_0, F_Q4_0)
GEMV_PACKED_ALL(q4_1, F_Q4_1)
GEMV_PACKED_ALL(q8_0, F_Q8_0)
GEMV_PACKED_ALL(q4_k, F_Q4_K)
GEMV_PACKED_ALL(q6_k, F_Q6_K)
GEMV_PACKED_ALL(awq, F_AWQ)
