// activation.cu: gated activations on x = [gate | up] (last dim 2d) -> act(gate) * up, [.., d].
// silu(g) = g / (1 + exp(-g)); gelu tanh: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)));
// gelu none: 0.5 g (1 + erf(g / sqrt 2)). Math in FP32, one rounding to FP16 at the end.
// Volta shape: grid (rows, chunks of the row; rows in x so prefill batches are unbounded); each thread moves VEC = 8 halves of gate and up
// with 128-bit loads (VEC = 1 when d is not a multiple of 8); purely bandwidth-bound.
#include "common.cuh"

enum { ACT_SILU = 0, ACT_GELU_TANH = 1, ACT_GELU_ERF = 2 };

template <int ACT>
__device__ __forceinline__ float act(float g) {
  if (ACT == ACT_SILU) return silu(g);
  if (ACT == ACT_GELU_TANH) return 0.5f * g * (1.f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
  return 0.5f * g * (1.f + erff(g * 0.7071067811865476f));
}

template <int VEC, int ACT>
__device__ void act_and_mul_body(__half* __restrict__ out, const __half* __restrict__ x, int d) {
  pdl_launch_dependents();  // sm_90 with PDL (cuda_ops._ACT): x is read after the previous kernel
  pdl_wait();
  const i64 row = blockIdx.x;
  const int i = (blockIdx.y * blockDim.x + threadIdx.x) * VEC;
  if (i >= d) return;
  const __half* xr = x + row * 2 * d;
  float g[VEC], u[VEC];
  load_vec<VEC>(xr + i, g);
  load_vec<VEC>(xr + d + i, u);
#pragma unroll
  for (int e = 0; e < VEC; ++e) g[e] = act<ACT>(g[e]) * u[e];
  store_vec<VEC>(out + row * d + i, g);
}

#define ACT_ENTRY(NAME, VEC, ACT)                                                      \
  extern "C" __global__ void NAME(__half* out, const __half* x, int d) {             \
    act_and_mul_body<VEC, ACT>(out, x, d);                                             \
  }

ACT_ENTRY(silu_and_mul_v8, 8, ACT_SILU)
ACT_ENTRY(silu_and_mul_v1, 1, ACT_SILU)
ACT_ENTRY(gelu_tanh_and_mul_v8, 8, ACT_GELU_TANH)
ACT_ENTRY(gelu_tanh_and_mul_v1, 1, ACT_GELU_TANH)
ACT_ENTRY(gelu_erf_and_mul_v8, 8, ACT_GELU_ERF)
ACT_ENTRY(gelu_erf_and_mul_v1, 1, ACT_GELU_ERF)
