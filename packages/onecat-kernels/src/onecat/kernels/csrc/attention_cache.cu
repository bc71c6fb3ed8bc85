// attention_cache.cu: reshape_and_cache into an FP8 paged KV cache (E4M3 / E5M2, per-tensor
// scale): cache[slot] = fp8(x / scale), round to nearest even, saturating (attention_fp8.cuh).
// key/value [T, Hk, D] rows may be strided views; caches [blocks, block_size, Hk, D] bytes.
// One block per token; each thread reads 8 halves (128-bit) and writes 8 bytes (64-bit).
#include "attention_fp8.cuh"

template <int KV>
__device__ void cache_fp8_body(unsigned char* __restrict__ kc, unsigned char* __restrict__ vc,
                               const __half* __restrict__ key, const __half* __restrict__ value,
                               const i64* __restrict__ slots, i64 k_stride, i64 v_stride, int row,
                               float k_scale, float v_scale) {
  const i64 t = blockIdx.x;
  const i64 slot = slots[t];
  if (slot < 0) return;
  for (int i = threadIdx.x; i < row / 8; i += blockDim.x) {
    Half8 hk, hv;
    hk.u = *reinterpret_cast<const uint4*>(key + t * k_stride + i * 8);
    hv.u = *reinterpret_cast<const uint4*>(value + t * v_stride + i * 8);
    *reinterpret_cast<uint2*>(kc + slot * row + i * 8) = half8_to_fp8<KV>(hk, k_scale);
    *reinterpret_cast<uint2*>(vc + slot * row + i * 8) = half8_to_fp8<KV>(hv, v_scale);
  }
}

#define CACHE_FP8_ENTRY(NAME, KV)                                                                     \
  extern "C" __global__ void NAME(unsigned char* kc, unsigned char* vc, const __half* key,            \
                                  const __half* value, const i64* slots, i64 k_stride, i64 v_stride, \
                                  int row, float k_scale, float v_scale) {                           \
    cache_fp8_body<KV>(kc, vc, key, value, slots, k_stride, v_stride, row, k_scale, v_scale);        \
  }

CACHE_FP8_ENTRY(reshape_and_cache_e4m3, KV_E4M3)
CACHE_FP8_ENTRY(reshape_and_cache_e5m2, KV_E5M2)
