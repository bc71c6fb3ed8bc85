// embedding.cu: token ids -> rows of an embedding table, as FP16: a dense FP16 table, or the planes of
// a weights.PackedWeight (q4_0, q4_1, q8_0, q4_k, q6_k) decoded with exactly the float32 operations of
// PackedWeight.dequantize (the GGUF / gguf-py decode; no FMA contraction: __fmul_rn / __fadd_rn) and
// rounded once to FP16, so the rows are bit-identical with the torch reference's.
// grid (ceil(K / 8 / 128), T), 128 threads: a thread decodes 8 consecutive weights of one row (one
// 32-bit word of nibbles, two of int8) and writes them as one 16-byte store. An id outside [0, N)
// gives a zero row (the host validates ids; this only keeps a bad one from reading out of bounds).
// On sm_90 a PDL kernel: the ids are written by the step before it (a host copy, the sampler), so it
// waits first; it lets the next kernel (the first layer's GEMV, which prefetches weights) start at once.
#include "packed_formats.cuh"

enum { E_F16 = -1 };  // a dense FP16 table; the packed formats are packed_formats.cuh's F_*

ONECAT_DEVICE float f16bits(unsigned bits) { return __half2float(__ushort_as_half((unsigned short)(bits & 0xFFFF))); }

// weights.NIBBLE_SHIFT: weight e of a 32-bit word sits at bit ((e & 1) << 4) | ((e >> 1) << 2)
ONECAT_DEVICE unsigned nibble(unsigned w, int e) { return (w >> (((e & 1) << 4) | ((e >> 1) << 2))) & 0xFu; }

// weights._Q6_POS: the 2 high bits of q6_k weight e of an 8-weight group (group B rotated left by 8)
ONECAT_DEVICE unsigned q6_high(unsigned w, int e, bool group_b) {
  const int pos = (((e & 1) << 4) | ((e & 2) << 1) | ((e & 4) >> 1)) + 4 + (group_b ? 8 : 0);
  return (w >> (pos & 31)) & 3u;
}

template <int F>
__device__ void embed_body(__half* __restrict__ out, const i64* __restrict__ ids, const unsigned char* __restrict__ q,
                           const unsigned char* __restrict__ qh, const unsigned char* __restrict__ meta, i64 n, int k) {
  pdl_wait();
  pdl_launch_dependents();
  const int t = blockIdx.y;
  const int g = blockIdx.x * blockDim.x + threadIdx.x;  // 8-weight group of the row
  if (g * 8 >= k) return;
  const i64 row = ids[t];
  float v[8];
  if (row < 0 || row >= n) {
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = 0.f;
  } else if constexpr (F == E_F16) {
    *reinterpret_cast<uint4*>(out + (i64)t * k + g * 8) =
        __ldg(reinterpret_cast<const uint4*>(q + (row * k + g * 8) * 2));
    return;
  } else if constexpr (F == F_Q8_0) {
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(q) + row * (k / 8) + g);
    const float d = f16bits(__ldg(reinterpret_cast<const unsigned short*>(meta) + row * (k / 32) + g / 4));
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int code = (int)(signed char)(((e < 4 ? w.x : w.y) >> (8 * (e & 3))) & 0xFF);
      v[e] = __fmul_rn((float)code, d);
    }
  } else {
    const unsigned w = __ldg(reinterpret_cast<const unsigned*>(q) + row * (k / 8) + g);
    if constexpr (F == F_Q4_0) {
      const float d = f16bits(__ldg(reinterpret_cast<const unsigned short*>(meta) + row * (k / 32) + g / 4));
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = __fmul_rn(d, (float)nibble(w, e) - 8.f);
    } else if constexpr (F == F_Q4_1) {
      const unsigned dm = __ldg(reinterpret_cast<const unsigned*>(meta) + row * (k / 32) + g / 4);
      const float d = f16bits(dm), m = f16bits(dm >> 16);
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = __fadd_rn(__fmul_rn(d, (float)nibble(w, e)), m);
    } else if constexpr (F == F_Q4_K) {
      // 16 bytes per 256: fp16 d, fp16 dmin, 8 (scale, min) pairs as 12-bit fields at bit 12 j
      const uint4 h = __ldg(reinterpret_cast<const uint4*>(meta) + row * (k / 256) + g / 32);
      unsigned sc, mn;
      q4k_scale_min(h, (g / 4) & 7, sc, mn);
      const float dl = __fmul_rn(f16bits(h.x), (float)sc);
      const float ml = __fmul_rn(f16bits(h.x >> 16), (float)mn);
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = __fsub_rn(__fmul_rn(dl, (float)nibble(w, e)), ml);
    } else {  // q6_k: (int8 sc0, int8 sc1, fp16 d) per 32; one high-bit word per 16 weights
      const unsigned m = __ldg(reinterpret_cast<const unsigned*>(meta) + row * (k / 32) + g / 4);
      const unsigned hw = __ldg(reinterpret_cast<const unsigned*>(qh) + row * (k / 16) + g / 2);
      const int sc = (int)(signed char)(((g & 2) ? (m >> 8) : m) & 0xFF);
      const float dl = __fmul_rn(f16bits(m >> 16), (float)sc);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int code = (int)(nibble(w, e) | (q6_high(hw, e, g & 1) << 4));
        v[e] = __fmul_rn(dl, (float)(code - 32));
      }
    }
  }
  store_vec<8>(out + (i64)t * k + g * 8, v);
}

#define EMBED_ENTRY(NAME, F)                                                                             \
  extern "C" __global__ void __launch_bounds__(128) NAME(__half* out, const i64* ids, const unsigned char* q, \
                                                           const unsigned char* qh, const unsigned char* meta, \
                                                           i64 n, int k) {                                 \
    embed_body<F>(out, ids, q, qh, meta, n, k);                                                          \
  }

// K % 8 == 0 (f16: 16-byte aligned rows), K % 32 == 0 (q4_0 / q4_1 / q8_0), K % 256 == 0 (q4_k, q6_k)
EMBED_ENTRY(embedding_f16, E_F16)
EMBED_ENTRY(embedding_q4_0, F_Q4_0)
EMBED_ENTRY(embedding_q4_1, F_Q4_1)
EMBED_ENTRY(embedding_q8_0, F_Q8_0)
EMBED_ENTRY(embedding_q4_k, F_Q4_K)
EMBED_ENTRY(embedding_q6_k, F_Q6_K)
