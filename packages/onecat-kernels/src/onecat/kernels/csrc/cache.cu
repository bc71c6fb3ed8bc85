// cache.cu: reshape_and_cache for an FP16 paged KV cache. key/value [T, Hk, D] (rows may be
// strided views of a fused qkv output) are written to caches [blocks, block_size, Hk, D] at flat
// slot slot_mapping[t]; slots < 0 are padding and skipped. One block per token.
// Volta shape: a token's Hk*D halves are contiguous on both sides, so each thread copies 8 halves
// per 128-bit load/store (VEC 1 when Hk*D or the row stride is not a multiple of 8).
#include "common.cuh"

template <int VEC>
__device__ void cache_body(__half* __restrict__ kc, __half* __restrict__ vc, const __half* __restrict__ key,
                           const __half* __restrict__ value, const i64* __restrict__ slots,
                           i64 k_stride, i64 v_stride, int row) {
  const i64 t = blockIdx.x;
  const i64 slot = slots[t];
  if (slot < 0) return;
  typedef typename VecT<VEC>::type V;
  const V* ks = reinterpret_cast<const V*>(key + t * k_stride);
  const V* vs = reinterpret_cast<const V*>(value + t * v_stride);
  V* kd = reinterpret_cast<V*>(kc + slot * row);
  V* vd = reinterpret_cast<V*>(vc + slot * row);
  for (int i = threadIdx.x; i < row / VEC; i += blockDim.x) {
    const V a = ks[i], b = vs[i];  // both loads issued before the stores
    kd[i] = a;
    vd[i] = b;
  }
}

#define CACHE_ENTRY(NAME, VEC)                                                                  \
  extern "C" __global__ void NAME(__half* kc, __half* vc, const __half* key, const __half* value, \
                                  const i64* slots, i64 k_stride, i64 v_stride, int row) {       \
    cache_body<VEC>(kc, vc, key, value, slots, k_stride, v_stride, row);                         \
  }

CACHE_ENTRY(reshape_and_cache_v8, 8)
CACHE_ENTRY(reshape_and_cache_v1, 1)
