// gemv_norm_in.cuh: the RMSNorm in front of the M = 1 normed GEMVs (gemv_packed.cu's NORM_IN kernels, the _rn
// entries): its operands and the prologue every block runs, building the normalized x in shared memory.
#pragma once
#include "common.cuh"

struct GemvNormIn {  // the RMSNorm in front of a NORM_IN GEMV (unused otherwise)
  const __half* res;     // [K] residual added to x first, or null
  const __half* norm_w;  // [K]
  __half* res_out;       // [K] x + res (the new residual stream), written by block 0; null without res
  float eps;
};

// x (chunk c's 32 halves are uint4s 4c..4c+3) sits in shared memory with uint4 s of chunk c at
// 4c + (s ^ ((c >> 1) & 3)): the 8 lanes of a 128-bit access phase (chunks c..c+7, one s) then hit
// 8 distinct 16-byte bank groups, and so do 8 consecutive uint4 stores.
ONECAT_DEVICE int xs_slot(int j) { return j ^ ((j >> 3) & 3); }

// NORM_IN's prologue (every block, all threads): xs = fp16(r * rsqrt(mean(r^2) + eps) * w) with
// r = fp16(x + res) (or x), the arithmetic of rms_norm.cu's kernel (FP32, r rounded to fp16 before
// its square), so the GEMV sees what rms_norm then linear would feed it. Block 0 also writes r out.
// K % 8 == 0. Inlined: the block's first weight loads are in flight in registers across it.
// GP > 0 (the _gp entries): this thread's first GP slots (j = tid + i * blockDim) take their x and residual loads
// all issued before any is used, their norm weight arrives in wpre (loaded before the wait), and the reduction takes
// one barrier (its scratch is not reused). The same arithmetic in the same order: the route's bits.
template <int GP = 0>
ONECAT_DEVICE void gemv_norm_input(uint4* xs, const __half* __restrict__ x, const __half* __restrict__ res,
                                   __half* __restrict__ res_out, const __half* __restrict__ w, int k, float eps,
                                   const uint4* wpre = nullptr) {
  __shared__ float red[32];
  const int k8 = k >> 3;
  float ss = 0.f;
  auto first = [&](uint4 xw, uint4 rw, int j) {  // r of slot j into xs, its squares into ss
    Half8 v;
    v.u = xw;
    float a[8];
    load_vec<8>(v.h, a);
    if (res) {
      Half8 b;
      b.u = rw;
      float f[8];
      load_vec<8>(b.h, f);
#pragma unroll
      for (int i = 0; i < 8; ++i) a[i] += f[i];
      store_vec<8>(v.h, a);  // rounded to fp16, as the residual stream is
      load_vec<8>(v.h, a);
      if (blockIdx.x == 0) reinterpret_cast<uint4*>(res_out)[j] = v.u;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += a[i] * a[i];
    xs[xs_slot(j)] = v.u;
  };
  auto second = [&](uint4 ww, int j, float scale) {  // slot j of xs times scale and the norm weight
    Half8 v, g8;
    v.u = xs[xs_slot(j)];
    g8.u = ww;
    float a[8], g[8];
    load_vec<8>(v.h, a);
    load_vec<8>(g8.h, g);
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = (a[i] * scale) * g[i];
    store_vec<8>(v.h, a);
    xs[xs_slot(j)] = v.u;
  };
  const uint4 zero = make_uint4(0, 0, 0, 0);
  const int j0 = threadIdx.x + GP * blockDim.x;  // the slots past the batched ones
  if constexpr (GP > 0) {
    uint4 xw[GP], rw[GP];
#pragma unroll
    for (int i = 0; i < GP; ++i) {
      const int j = threadIdx.x + i * blockDim.x;
      xw[i] = j < k8 ? __ldg(reinterpret_cast<const uint4*>(x) + j) : zero;
      rw[i] = j < k8 && res ? __ldg(reinterpret_cast<const uint4*>(res) + j) : zero;
    }
#pragma unroll
    for (int i = 0; i < GP; ++i)
      if (threadIdx.x + i * blockDim.x < k8) first(xw[i], rw[i], threadIdx.x + i * blockDim.x);
  }
  for (int j = j0; j < k8; j += blockDim.x)
    first(__ldg(reinterpret_cast<const uint4*>(x) + j), res ? *(reinterpret_cast<const uint4*>(res) + j) : zero, j);
  // red is not written again: GP's one barrier suffices
  const float scale = rsqrtf((GP > 0 ? block_sum_once(ss, red) : block_sum(ss, red)) / k + eps);
  if constexpr (GP > 0) {
#pragma unroll
    for (int i = 0; i < GP; ++i)  // this thread's own slots: no barrier
      if (threadIdx.x + i * blockDim.x < k8) second(wpre[i], threadIdx.x + i * blockDim.x, scale);
  }
  for (int j = j0; j < k8; j += blockDim.x) second(*(reinterpret_cast<const uint4*>(w) + j), j, scale);
  __syncthreads();
}
