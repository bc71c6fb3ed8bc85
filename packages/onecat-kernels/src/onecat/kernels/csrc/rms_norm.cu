// rms_norm.cu: y = x * rsqrt(mean(x^2) + eps) * w, optionally after x = x + residual (fused:
// the new residual stream is written out in the same pass). One block per row.
// Volta shape: the row is read once with 128-bit loads into registers (up to NITEMS vectors per
// thread), the sum of squares is reduced in FP32 with warp shuffles, and the normalized row is
// written from the registers, so each byte moves once (memory-bound: 2-3 reads + 1-2 writes).
#include "common.cuh"

template <int VEC, int NITEMS, bool RESID>
__device__ void rms_norm_body(__half* __restrict__ out, __half* __restrict__ res_out,
                              const __half* __restrict__ x, const __half* __restrict__ res,
                              const __half* __restrict__ w, int hidden, float eps) {
  __shared__ float red[32];
  const i64 row = blockIdx.x;
  const int nvec = hidden / VEC;
  x += row * hidden;
  out += row * hidden;
  if (RESID) {
    res += row * hidden;
    res_out += row * hidden;
  }
  float v[NITEMS][VEC];
  float ss = 0.f;
#pragma unroll
  for (int it = 0; it < NITEMS; ++it) {  // all loads first: NITEMS 128-bit loads in flight
    const int i = threadIdx.x + it * blockDim.x;
    if (i < nvec) {
      load_vec<VEC>(x + i * VEC, v[it]);
      if (RESID) {
        float r[VEC];
        load_vec<VEC>(res + i * VEC, r);
#pragma unroll
        for (int j = 0; j < VEC; ++j) v[it][j] = __half2float(__float2half_rn(v[it][j] + r[j]));
        store_vec<VEC>(res_out + i * VEC, v[it]);
      }
    }
  }
#pragma unroll
  for (int it = 0; it < NITEMS; ++it) {
    const int i = threadIdx.x + it * blockDim.x;
    if (i < nvec) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) ss += v[it][j] * v[it][j];
    }
  }
  const float scale = rsqrtf(block_sum(ss, red) / hidden + eps);
#pragma unroll
  for (int it = 0; it < NITEMS; ++it) {
    const int i = threadIdx.x + it * blockDim.x;
    if (i < nvec) {
      float g[VEC];
      load_vec<VEC>(w + i * VEC, g);
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[it][j] = (v[it][j] * scale) * g[j];
      store_vec<VEC>(out + i * VEC, v[it]);
    }
  }
}

#define RMS_ENTRY(NAME, VEC, NITEMS, RESID)                                                      \
  extern "C" __global__ void __launch_bounds__(1024) NAME(                                      \
      __half* out, __half* res_out, const __half* x, const __half* res, const __half* w,         \
      int hidden, float eps) {                                                                   \
    rms_norm_body<VEC, NITEMS, RESID>(out, res_out, x, res, w, hidden, eps);                     \
  }

// VEC 8: hidden % 8 == 0 and 16-byte aligned rows, hidden <= 8 * 4 * 1024.
// VEC 1: any hidden <= 16 * 1024.
RMS_ENTRY(rms_norm_v8, 8, 4, false)
RMS_ENTRY(rms_norm_add_v8, 8, 4, true)
RMS_ENTRY(rms_norm_v1, 1, 16, false)
RMS_ENTRY(rms_norm_add_v1, 1, 16, true)
