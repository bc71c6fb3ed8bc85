// rotary.cu: rotary position embedding of q [T, Hq*D] and k [T, Hk*D] into new tensors.
// NeoX style rotates pairs (i, i + r/2), GPT-J style interleaved pairs (2j, 2j+1); dims past
// rotary_dim (partial rotary) are copied. One block per token, threads stride over
// (head, chunk) items of VEC halves.
// Volta shape: VEC = 8 moves each chunk with one 128-bit load/store (r/2 or r multiple of 8);
// VEC = 2 (half2) covers odd layouts. cos/sin come from an FP32 cache [max_pos, r] that stays in
// L1/L2 across heads; the rotation itself is FP32 (common.cuh rope_pair: the GEMV / GEMM epilogues' bits).
#include "common.cuh"

template <int VEC, bool NEOX>
__device__ void rotate_head_chunk(__half* __restrict__ o, const __half* __restrict__ x,
                                  const float* __restrict__ cs, int c, int nrot, int r) {
  const int half_r = r / 2;
  if (c >= nrot) {  // pass-through part of a partial rotary head
    const int e = r + (c - nrot) * VEC;
    float v[VEC];
    load_vec<VEC>(x + e, v);
    store_vec<VEC>(o + e, v);
    return;
  }
  if (NEOX) {
    const int i0 = c * VEC;
    float x1[VEC], x2[VEC], o1[VEC], o2[VEC];
    load_vec<VEC>(x + i0, x1);
    load_vec<VEC>(x + half_r + i0, x2);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float2 o = rope_pair(x1[e], x2[e], cs[i0 + e], cs[half_r + i0 + e]);
      o1[e] = o.x;
      o2[e] = o.y;
    }
    store_vec<VEC>(o + i0, o1);
    store_vec<VEC>(o + half_r + i0, o2);
  } else {
    const int e0 = c * VEC;
    float v[VEC], ov[VEC];
    load_vec<VEC>(x + e0, v);
#pragma unroll
    for (int p = 0; p < VEC / 2; ++p) {
      const int j = e0 / 2 + p;
      const float2 o = rope_pair(v[2 * p], v[2 * p + 1], cs[j], cs[half_r + j]);
      ov[2 * p] = o.x;
      ov[2 * p + 1] = o.y;
    }
    store_vec<VEC>(o + e0, ov);
  }
}

template <int VEC, bool NEOX>
__device__ void rotary_body(__half* q_out, __half* k_out, const i64* positions, const __half* q,
                            const __half* k, const float* cos_sin, i64 q_stride, i64 k_stride,
                            int nq, int nk, int head_dim, int r) {
  const i64 t = blockIdx.x;
  const float* cs = cos_sin + positions[t] * r;
  const int nrot = NEOX ? (r / 2) / VEC : r / VEC;
  const int per_head = nrot + (head_dim - r) / VEC;
  const int total = (nq + nk) * per_head;
  for (int item = threadIdx.x; item < total; item += blockDim.x) {
    const int h = item / per_head, c = item - h * per_head;
    if (h < nq) {
      rotate_head_chunk<VEC, NEOX>(q_out + (t * nq + h) * head_dim, q + t * q_stride + h * head_dim,
                                   cs, c, nrot, r);
    } else {
      const int hk = h - nq;
      rotate_head_chunk<VEC, NEOX>(k_out + (t * nk + hk) * head_dim, k + t * k_stride + hk * head_dim,
                                   cs, c, nrot, r);
    }
  }
}

#define ROTARY_ENTRY(NAME, VEC, NEOX)                                                             \
  extern "C" __global__ void NAME(__half* q_out, __half* k_out, const i64* positions,            \
                                  const __half* q, const __half* k, const float* cos_sin,         \
                                  i64 q_stride, i64 k_stride, int nq, int nk, int head_dim,       \
                                  int rotary_dim) {                                               \
    rotary_body<VEC, NEOX>(q_out, k_out, positions, q, k, cos_sin, q_stride, k_stride, nq, nk,   \
                           head_dim, rotary_dim);                                                 \
  }

ROTARY_ENTRY(rotary_neox_v8, 8, true)
ROTARY_ENTRY(rotary_neox_v2, 2, true)
ROTARY_ENTRY(rotary_gptj_v8, 8, false)
ROTARY_ENTRY(rotary_gptj_v2, 2, false)

// rotary_cache_*: rotary_embedding + reshape_and_cache for an FP16 paged cache in one launch (one
// block per token): q rotated into q_out; k rotated straight into its cache row and v copied there
// (caches [blocks, block_size, Hk, D], row = slot; slot < 0 is padding: q only). Saves the launch
// and the round trip of the rotated k through memory.
template <int VEC, bool NEOX>
__device__ void rotary_cache_body(__half* q_out, __half* kc, __half* vc, const i64* positions, const __half* q,
                                  const __half* k, const __half* v, const float* cos_sin, const i64* slots,
                                  i64 q_stride, i64 k_stride, i64 v_stride, int nq, int nk, int head_dim, int r) {
  pdl_launch_dependents();  // sm_90 with PDL (rotary_cache_ops): everything below is read after the previous kernel
  pdl_wait();
  const i64 t = blockIdx.x;
  const i64 slot = slots[t];
  const float* cs = cos_sin + positions[t] * r;
  const int nrot = NEOX ? (r / 2) / VEC : r / VEC;
  const int per_head = nrot + (head_dim - r) / VEC;
  const int nqi = nq * per_head, nrot_items = (nq + nk) * per_head;
  const int total = slot < 0 ? nqi : nrot_items + nk * head_dim / VEC;
  const i64 row = (i64)nk * head_dim;
  for (int item = threadIdx.x; item < total; item += blockDim.x) {
    if (item < nqi) {
      const int h = item / per_head, c = item - h * per_head;
      rotate_head_chunk<VEC, NEOX>(q_out + (t * nq + h) * head_dim, q + t * q_stride + h * head_dim, cs, c, nrot, r);
    } else if (item < nrot_items) {
      const int hk = (item - nqi) / per_head, c = (item - nqi) - hk * per_head;
      rotate_head_chunk<VEC, NEOX>(kc + slot * row + hk * head_dim, k + t * k_stride + hk * head_dim, cs, c, nrot, r);
    } else {
      const int e = (item - nrot_items) * VEC;
      float x[VEC];
      load_vec<VEC>(v + t * v_stride + e, x);
      store_vec<VEC>(vc + slot * row + e, x);
    }
  }
}

#define ROTARY_CACHE_ENTRY(NAME, VEC, NEOX)                                                             \
  extern "C" __global__ void NAME(__half* q_out, __half* kc, __half* vc, const i64* positions,         \
                                  const __half* q, const __half* k, const __half* v,                    \
                                  const float* cos_sin, const i64* slots, i64 q_stride, i64 k_stride,   \
                                  i64 v_stride, int nq, int nk, int head_dim, int rotary_dim) {         \
    rotary_cache_body<VEC, NEOX>(q_out, kc, vc, positions, q, k, v, cos_sin, slots, q_stride, k_stride, \
                                 v_stride, nq, nk, head_dim, rotary_dim);                               \
  }

ROTARY_CACHE_ENTRY(rotary_cache_neox_v8, 8, true)
ROTARY_CACHE_ENTRY(rotary_cache_neox_v2, 2, true)
ROTARY_CACHE_ENTRY(rotary_cache_gptj_v8, 8, false)
ROTARY_CACHE_ENTRY(rotary_cache_gptj_v2, 2, false)
