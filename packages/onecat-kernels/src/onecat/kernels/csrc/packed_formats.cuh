// packed_formats.cuh: the planes of weights.PackedWeight (q4_0, q4_1, q8_0, q4_k, q6_k, awq) and
// their decode, shared by the GEMV (gemv_packed.cu, M <= 16) and the GEMM (gemm_packed.cu, M > 16).
// A 32-weight chunk of one row: 16 B of nibbles (q8_0: 32 B of int8), q6_k's 8 B of high bits, and
// its scale words; dequant8 turns 8 of its weights into fp16 pairs (q - z) / D exactly (see
// gemv_packed.cu's header for the integer tricks), chunk_consts gives the fp32 scale(s) and offset
// with D folded in: weight = scale * wv + coef.
#pragma once
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

// q4_k: the 12 scale bytes are re-laid out at pack time as 8 little-endian 12-bit fields
// (sc_j | mn_j << 6), field j at bit 12 j of header words 1..3: two SEL + one funnel shift.
ONECAT_DEVICE void q4k_scale_min(const uint4& h, int j, unsigned& sc, unsigned& mn) {
  const int off = 12 * j;
  const unsigned lo = off < 32 ? h.y : (off < 64 ? h.z : h.w);
  const unsigned hi = off < 32 ? h.z : h.w;
  const unsigned f = __funnelshift_r(lo, hi, off & 31);
  sc = f & 63u;
  mn = (f >> 6) & 63u;
}

// One 32-weight chunk of one row: loaded planes (weights, q6_k high bits, scale words).
template <int F>
ONECAT_DEVICE void load_chunk(PChunk<F>& ck, const unsigned char* __restrict__ q, const unsigned char* __restrict__ qh,
                              const unsigned char* __restrict__ meta, i64 row, int c, int nch, int gchunks) {
  constexpr int QV = F == F_Q8_0 ? 2 : 1;
  const uint4* wp = reinterpret_cast<const uint4*>(q) + (row * nch + c) * QV;
#pragma unroll
  for (int v = 0; v < QV; ++v) ck.w[v] = __ldg(wp + v);
  if constexpr (F == F_Q6_K) ck.h = __ldg(reinterpret_cast<const uint2*>(qh) + row * nch + c);
  if constexpr (F == F_Q4_0 || F == F_Q8_0)
    ck.meta.x = __ldg(reinterpret_cast<const unsigned short*>(meta) + row * nch + c);
  else if constexpr (F == F_Q4_1 || F == F_Q6_K)
    ck.meta.x = __ldg(reinterpret_cast<const unsigned*>(meta) + row * nch + c);
  else if constexpr (F == F_AWQ)
    ck.meta.x = __ldg(reinterpret_cast<const unsigned*>(meta) + row * (nch / gchunks) + c / gchunks);
  else
    ck.meta = __ldg(reinterpret_cast<const uint4*>(meta) + row * (nch >> 3) + (c >> 3));
}

// The planes of one row, so that load_chunk<F>(ck, rq, rqh, rmeta, 0, c, nch, gchunks) loads chunk c
// of that row with no per-load row arithmetic (the GEMM keeps each thread's W rows over its K walk):
// load_chunk's offsets at chunk 0, in bytes (its row terms; load_chunk itself stays as the GEMV
// kernels were tuned with, whose SASS an equivalent rewrite of it changes).
template <int F>
ONECAT_DEVICE void row_planes(const unsigned char* q, const unsigned char* qh, const unsigned char* meta, i64 row,
                              int nch, int gchunks, const unsigned char*& rq, const unsigned char*& rqh,
                              const unsigned char*& rmeta) {
  rq = q + row * nch * (F == F_Q8_0 ? 32 : 16);
  rqh = F == F_Q6_K ? qh + row * nch * 8 : qh;
  const i64 mb = F == F_Q4_0 || F == F_Q8_0 ? row * nch * 2
               : F == F_Q4_1 || F == F_Q6_K ? row * nch * 4
               : F == F_AWQ                  ? row * (nch / gchunks) * 4
                                             : row * (nch >> 3) * 16;
  rmeta = meta + mb;
}

// Per chunk and row: fp32 scale(s) (the 1/16, 1/128, 1/64 of dequant8 folded in), the min/offset
// coefficient of sum(x), and the fp16 zero terms of dequant8. c: the chunk index (q4_k: c & 7).
template <int F>
ONECAT_DEVICE void chunk_consts(const PChunk<F>& ck, int c, float& scale, float& scale1, float& coef,
                                __half2& nlo, __half2& nhi) {
  const unsigned mw = ck.meta.x;
  nlo = h2c(-64.5f);  // -(1024 + 8) / 16
  nhi = h2c(-4.5f);   // -(1024 + 16 * 8) / 256
  coef = 0.f;
  scale1 = 0.f;
  if constexpr (F == F_Q4_0) {
    scale = 16.f * __half2float(__ushort_as_half((unsigned short)(mw & 0xFFFF)));
  } else if constexpr (F == F_Q8_0) {
    scale = 128.f * __half2float(__ushort_as_half((unsigned short)(mw & 0xFFFF)));
  } else if constexpr (F == F_Q4_1) {
    const float d = __half2float(__ushort_as_half((unsigned short)(mw & 0xFFFF)));
    const float mn = __half2float(__ushort_as_half((unsigned short)(mw >> 16)));
    scale = 16.f * d;
    coef = fmaf(8.f, d, mn);
  } else if constexpr (F == F_Q4_K) {
    const uint4& hd = ck.meta;
    const float d = __half2float(__ushort_as_half((unsigned short)(hd.x & 0xFFFF)));
    const float dmin = __half2float(__ushort_as_half((unsigned short)(hd.x >> 16)));
    unsigned sc, mn;
    q4k_scale_min(hd, c & 7, sc, mn);
    const float dl = d * (float)sc, ml = dmin * (float)mn;
    scale = 16.f * dl;
    coef = fmaf(8.f, dl, -ml);
  } else if constexpr (F == F_Q6_K) {
    const float d = __half2float(__ushort_as_half((unsigned short)(mw >> 16)));
    scale = 64.f * (d * (float)(signed char)(mw & 0xFF));
    scale1 = 64.f * (d * (float)(signed char)((mw >> 8) & 0xFF));
  } else {  // awq: (s, 1024 + z)
    scale = 16.f * __half2float(__ushort_as_half((unsigned short)(mw & 0xFFFF)));
    const __half zz = __ushort_as_half((unsigned short)(mw >> 16));
    nlo = __hmul2(__half2half2(zz), h2c(-1.f / 16.f));  // -(1024 + z) / 16
    nhi = __hadd2(nlo, h2c(60.f));                       // -(64 + z) / 16
  }
}

// M = 1: sum(x) of one chunk's 32 values (the min/offset term of q4_1 / q4_k), in fp32. Every row of the
// launch shares it, so an fp16 sum's rounding comes back in every output with the sign of its row's
// coefficient; fp16 pair sums (s35 and before) put test_gpu_kernels' q4_k GLU case up to 4e-2 from FP32
// (benchmarks/results/h200-2026-12-03-s36, gemv-chain-emulation.txt).
ONECAT_DEVICE float chunk_x_sum(const Half8 (&xv)[4]) {
  float a = 0.f, b = 0.f;
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(xv[s].h2[i]);
      a += f.x;
      b += f.y;
    }
  return a + b;
}

// M = 1: acc + one chunk of one row . its 32 x values (xv; sx = chunk_x_sum where the format has an
// offset): two fp16 chains of 8 HFMA2 (|w'| <= 1, so a chain stays below 16 max|x|: finite for
// |x| < 4K), one convert, one FFMA with the fp32 scale (q6_k: each 16-weight half its own).
template <int F>
ONECAT_DEVICE float chunk_dot(const PChunk<F>& ck, int c, const Half8 (&xv)[4], float sx, float acc) {
  float scale, scale1, coef;
  __half2 nlo, nhi;
  chunk_consts<F>(ck, c, scale, scale1, coef, nlo, nhi);
  __half2 h0 = __float2half2_rn(0.f), h1 = h0;
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    __half2 wv[4];
    dequant8<F>(ck, s, nlo, nhi, wv);
    if constexpr (F == F_Q6_K) {  // words 0-1 and 2-3 have their own 16-weight scales
      __half2& h = s < 2 ? h0 : h1;
#pragma unroll
      for (int i = 0; i < 4; ++i) h = __hfma2(wv[i], xv[s].h2[i], h);
    } else {
      h0 = __hfma2(wv[0], xv[s].h2[0], h0);
      h1 = __hfma2(wv[1], xv[s].h2[1], h1);
      h0 = __hfma2(wv[2], xv[s].h2[2], h0);
      h1 = __hfma2(wv[3], xv[s].h2[3], h1);
    }
  }
  const float2 f0 = __half22float2(h0), f1 = __half22float2(h1);
  if constexpr (F == F_Q6_K) return fmaf(scale1, f1.x + f1.y, fmaf(scale, f0.x + f0.y, acc));
  acc = fmaf(scale, (f0.x + f1.x) + (f0.y + f1.y), acc);
  return (F == F_Q4_1 || F == F_Q4_K) ? fmaf(coef, sx, acc) : acc;
}

// M = 2..MT (gemv_rows' MT > 1): acc[m] += chunk c of one row . row m of x's 32 values (xv[m]; sx[m] its
// chunk_x_sum), each word of the chunk dequantized once for every row of x; per row of x the arithmetic
// of chunk_dot (the same chains in the same order: the bits the M = 1 kernel computes for that row).
template <int F, int MT>
ONECAT_DEVICE void chunk_dot_mt(const PChunk<F>& ck, int c, const Half8 (&xv)[MT][4], const float (&sx)[MT],
                                float (&acc)[MT]) {
  float scale, scale1, coef;
  __half2 nlo, nhi;
  chunk_consts<F>(ck, c, scale, scale1, coef, nlo, nhi);
  __half2 h0[MT], h1[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) h0[m] = h1[m] = __float2half2_rn(0.f);
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    __half2 wv[4];
    dequant8<F>(ck, s, nlo, nhi, wv);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if constexpr (F == F_Q6_K) {
        __half2& h = s < 2 ? h0[m] : h1[m];
#pragma unroll
        for (int i = 0; i < 4; ++i) h = __hfma2(wv[i], xv[m][s].h2[i], h);
      } else {
        h0[m] = __hfma2(wv[0], xv[m][s].h2[0], h0[m]);
        h1[m] = __hfma2(wv[1], xv[m][s].h2[1], h1[m]);
        h0[m] = __hfma2(wv[2], xv[m][s].h2[2], h0[m]);
        h1[m] = __hfma2(wv[3], xv[m][s].h2[3], h1[m]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const float2 f0 = __half22float2(h0[m]), f1 = __half22float2(h1[m]);
    if constexpr (F == F_Q6_K) {
      acc[m] = fmaf(scale1, f1.x + f1.y, fmaf(scale, f0.x + f0.y, acc[m]));
    } else {
      acc[m] = fmaf(scale, (f0.x + f1.x) + (f0.y + f1.y), acc[m]);
      if constexpr (F == F_Q4_1 || F == F_Q4_K) acc[m] = fmaf(coef, sx[m], acc[m]);
    }
  }
}
