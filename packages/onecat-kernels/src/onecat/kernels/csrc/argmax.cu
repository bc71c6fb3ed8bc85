// argmax.cu: greedy sampling, index of the largest logit per row (first one on ties, NaN counts
// as largest, as torch.argmax). logits [B, V] FP16 or FP32, out [B] int64. One block per row.
// Volta shape: 1024 threads stream the row with 128-bit loads (8 halves / 4 floats per load),
// two loads in flight per thread, keep a (value, index) pair in registers, then reduce with warp
// shuffles and one shared-memory step. A 128K vocab row is 256 KB: a few us on one SM.
#include "common.cuh"

struct Best {
  float v;
  int i;
};

// a beats b: larger value (NaN largest), or equal value and smaller index.
__device__ __forceinline__ bool beats(float av, int ai, float bv, int bi) {
  const bool an = av != av, bn = bv != bv;
  if (an || bn) return an && (!bn || ai < bi);
  return av > bv || (av == bv && ai < bi);
}

template <typename T, int VEC>
__device__ __forceinline__ void scan(const T* p, int base, float& bv, int& bi) {
  float f[VEC];
  if constexpr (sizeof(T) == 2) {
    load_vec<VEC>(reinterpret_cast<const __half*>(p), f);
  } else if constexpr (VEC == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    f[0] = t.x; f[1] = t.y; f[2] = t.z; f[3] = t.w;
  } else {
    f[0] = *reinterpret_cast<const float*>(p);
  }
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    if (beats(f[e], base + e, bv, bi)) { bv = f[e]; bi = base + e; }
}

template <typename T, int VEC>
__device__ void argmax_body(i64* __restrict__ out, const T* __restrict__ x, i64 stride, int n) {
  __shared__ Best red[32];
  const T* row = x + blockIdx.x * stride;
  float bv = -__int_as_float(0x7f800000);  // -inf
  int bi = 0x7fffffff;
  const int nvec = n / VEC, step = blockDim.x;
  int i = threadIdx.x;
  for (; i + step < nvec; i += 2 * step) {  // two independent vectors per iteration
    scan<T, VEC>(row + i * VEC, i * VEC, bv, bi);
    scan<T, VEC>(row + (i + step) * VEC, (i + step) * VEC, bv, bi);
  }
  if (i < nvec) scan<T, VEC>(row + i * VEC, i * VEC, bv, bi);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (beats(ov, oi, bv, bi)) { bv = ov; bi = oi; }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = Best{bv, bi};
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x >> 5;
    bv = lane < nw ? red[lane].v : -__int_as_float(0x7f800000);
    bi = lane < nw ? red[lane].i : 0x7fffffff;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (beats(ov, oi, bv, bi)) { bv = ov; bi = oi; }
    }
    if (lane == 0) out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
  }
}

#define ARGMAX_ENTRY(NAME, T, VEC)                                                  \
  extern "C" __global__ void __launch_bounds__(1024) NAME(i64* out, const T* x, i64 stride, int n) { \
    argmax_body<T, VEC>(out, x, stride, n);                                          \
  }

ARGMAX_ENTRY(argmax_f16_v8, __half, 8)
ARGMAX_ENTRY(argmax_f16_v1, __half, 1)
ARGMAX_ENTRY(argmax_f32_v4, float, 4)
ARGMAX_ENTRY(argmax_f32_v1, float, 1)
