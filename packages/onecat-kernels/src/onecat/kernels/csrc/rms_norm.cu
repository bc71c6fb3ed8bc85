// rms_norm.cu: y = x * rsqrt(mean(x^2) + eps) * w, optionally after x = x + residual (fused:
// the new residual stream is written out in the same pass). One block per row.
// Volta shape: the row is read once with 128-bit loads into registers (up to NITEMS vectors per
// thread), the sum of squares is reduced in FP32 with warp shuffles, and the normalized row is
// written from the registers, so each byte moves once (memory-bound: 2-3 reads + 1-2 writes).
#include "common.cuh"

template <int VEC>
using Raw = typename VecT<VEC>::type;  // VEC halves as loaded (8: one uint4)
template <int VEC>
ONECAT_DEVICE void raw_floats(const Raw<VEC>& r, float (&f)[VEC]) { load_vec<VEC>(reinterpret_cast<const __half*>(&r), f); }

template <int VEC, int NITEMS, bool RESID>
__device__ void rms_norm_body(__half* __restrict__ out, __half* __restrict__ res_out,
                              const __half* __restrict__ x, const __half* __restrict__ res,
                              const __half* __restrict__ w, int hidden, float eps) {
  __shared__ float red[32];
  pdl_launch_dependents();  // sm_90 with PDL: the next kernel may start; x / res after the previous one
  pdl_wait();
  const i64 row = blockIdx.x;
  const int nvec = hidden / VEC;
  x += row * hidden;
  out += row * hidden;
  if (RESID) {
    res += row * hidden;
    res_out += row * hidden;
  }
  // Rows are kept as FP16 (the residual sum is rounded to FP16 anyway, as torch does): half the
  // registers of FP32, so the weight loads can be in flight during the reduction, not after it.
  Raw<VEC> xr[NITEMS], wr[NITEMS];
#pragma unroll
  for (int it = 0; it < NITEMS; ++it) {  // all loads first: NITEMS 128-bit loads in flight
    const int i = threadIdx.x + it * blockDim.x;
    if (i < nvec) {
      xr[it] = *reinterpret_cast<const Raw<VEC>*>(x + i * VEC);
      if (RESID) {
        float v[VEC], r[VEC];
        raw_floats<VEC>(xr[it], v);
        load_vec<VEC>(res + i * VEC, r);
#pragma unroll
        for (int j = 0; j < VEC; ++j) v[j] += r[j];
        store_vec<VEC>(reinterpret_cast<__half*>(&xr[it]), v);
        *reinterpret_cast<Raw<VEC>*>(res_out + i * VEC) = xr[it];
      }
    }
  }
#pragma unroll
  for (int it = 0; it < NITEMS; ++it) {
    const int i = threadIdx.x + it * blockDim.x;
    if (i < nvec) wr[it] = *reinterpret_cast<const Raw<VEC>*>(w + i * VEC);
  }
  float ss = 0.f;
#pragma unroll
  for (int it = 0; it < NITEMS; ++it) {
    const int i = threadIdx.x + it * blockDim.x;
    if (i < nvec) {
      float v[VEC];
      raw_floats<VEC>(xr[it], v);
#pragma unroll
      for (int j = 0; j < VEC; ++j) ss += v[j] * v[j];
    }
  }
  const float scale = rsqrtf(block_sum(ss, red) / hidden + eps);
#pragma unroll
  for (int it = 0; it < NITEMS; ++it) {
    const int i = threadIdx.x + it * blockDim.x;
    if (i < nvec) {
      float v[VEC], g[VEC];
      raw_floats<VEC>(xr[it], v);
      raw_floats<VEC>(wr[it], g);
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = (v[j] * scale) * g[j];
      store_vec<VEC>(out + i * VEC, v);
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
