// common.cuh: shared device helpers for onecat kernels (no torch headers, raw pointers only).
// Volta rules kept here: 128-bit global accesses (uint4 = 8 halves), FP32 math and reductions,
// warp shuffles instead of shared-memory trees where a warp suffices.
#pragma once
#include <cuda_fp16.h>

typedef long long i64;

#define ONECAT_DEVICE __device__ __forceinline__

// silu(g) = g / (1 + exp(-g)) in FP32 (activation.cu's silu_and_mul), and the GLU epilogues' output:
// silu(gate) * up with gate and up first rounded to FP16, as a projection's output is before
// silu_and_mul reads it (gemm_epilogue.cuh, gemv_packed.cu: the unfused route's bits).
ONECAT_DEVICE float silu(float g) { return g / (1.f + expf(-g)); }
ONECAT_DEVICE float silu_mul_f16(float gate, float up) {
  return silu(__half2float(__float2half_rn(gate))) * __half2float(__float2half_rn(up));
}

// 2^x by the MUFU alone (ex2.approx.ftz: results below 2^-126 flush to 0, -inf gives 0): exp2f adds
// three instructions around it to keep those results subnormal, which softmax weights never need.
ONECAT_DEVICE float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Programmatic dependent launch (sm_90+; compiled out for Volta and Turing/Ampere, which lack it).
// A kernel the host launches with the PDL attribute (driver.Kernel(pdl=True)) may start while the
// previous kernel in the stream still runs: before pdl_wait() it may read only what no kernel of
// the step writes (model weights), and it reads or writes everything else after it. pdl_wait()
// returns once the previous grid has completed and its memory is visible. pdl_launch_dependents()
// lets the next PDL kernel start once every block of this grid has called it (or exited).
ONECAT_DEVICE void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
ONECAT_DEVICE void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// A pointer (or int) the compiler must keep in a register as computed: it cannot rebuild it from
// the kernel's parameters inside a loop (NVRTC re-derives cheap-looking addresses per iteration
// otherwise, which costs a K loop more instructions than the registers it saves).
template <class T>
ONECAT_DEVICE void pin_pointer(T*& p) {
  unsigned long long v = reinterpret_cast<unsigned long long>(p);
  asm volatile("" : "+l"(v));
  p = reinterpret_cast<T*>(v);
}
ONECAT_DEVICE void pin_int(int& v) { asm volatile("" : "+r"(v)); }

// One rotary pair (a, b) turned by (cos c, sin s): each output one product, then one FMA, written out so
// that no compiler contraction choice differs between the kernels that rotate (rotary.cu, the GEMV and
// GEMM epilogues): a fused route gives the unfused one's bits.
ONECAT_DEVICE float2 rope_pair(float a, float b, float c, float s) {
  return make_float2(__fmaf_rn(a, c, -__fmul_rn(b, s)), __fmaf_rn(b, c, __fmul_rn(a, s)));
}

// 8 halves moved as one 128-bit access (LDG.E.128 / STG.E.128).
union Half8 {
  uint4 u;
  __half2 h2[4];
  __half h[8];
};

template <int VEC>
struct VecT;
template <>
struct VecT<8> { typedef uint4 type; };
template <>
struct VecT<2> { typedef unsigned int type; };
template <>
struct VecT<1> { typedef unsigned short type; };

// Load VEC halves (VEC in 1, 2, 8) as floats.
template <int VEC>
ONECAT_DEVICE void load_vec(const __half* p, float (&f)[VEC]) {
  if constexpr (VEC == 8) {
    Half8 v;
    v.u = *reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 t = __half22float2(v.h2[i]);
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  } else if constexpr (VEC == 2) {
    float2 t = __half22float2(*reinterpret_cast<const __half2*>(p));
    f[0] = t.x;
    f[1] = t.y;
  } else {
    f[0] = __half2float(*p);
  }
}

// 8 floats as halves, rounded to nearest even (torch's .to(float16)): the 16 bytes one store writes.
ONECAT_DEVICE uint4 half8_rn(const float (&f)[8]) {
  Half8 v;
#pragma unroll
  for (int i = 0; i < 4; ++i) v.h2[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
  return v.u;
}

// Store VEC floats as halves (round to nearest even, like torch's .to(float16)).
template <int VEC>
ONECAT_DEVICE void store_vec(__half* p, const float (&f)[VEC]) {
  if constexpr (VEC == 8) {
    *reinterpret_cast<uint4*>(p) = half8_rn(f);
  } else if constexpr (VEC == 2) {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(f[0], f[1]);
  } else {
    *p = __float2half_rn(f[0]);
  }
}

ONECAT_DEVICE float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, <= 1024); every thread gets the total. One barrier:
// smem32 must not be written again before the block's next barrier (block_sum adds that barrier).
ONECAT_DEVICE float block_sum_once(float v, float* smem32) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) smem32[warp] = v;
  __syncthreads();
  v = lane < nwarps ? smem32[lane] : 0.f;
  return warp_sum(v);
}

// block_sum_once, then a barrier, so smem32 may be reused at once.
ONECAT_DEVICE float block_sum(float v, float* smem32) {
  v = block_sum_once(v, smem32);
  __syncthreads();
  return v;
}

// mma.sync m16n8k16 (sm_80+; lane g = lane / 4, q = lane % 4):
// D += A (16 x 16, row) . B (16 x 8, col), fp16 in, fp32 accumulate: a = {(g, 2q..), (g + 8, 2q..),
// (g, 2q + 8..), (g + 8, 2q + 8..)}, b = {k 2q.., k 2q + 8..} of column g; d = {(g, 2q), (g, 2q + 1),
// (g + 8, 2q), (g + 8, 2q + 1)}.
ONECAT_DEVICE void mma_16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                             unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // no m16n8k16 before sm_80: its callers (gemm_rd.cu, attention_decode_rd.cu) are never
             // launched there
#endif
}

// Per-block traces (the kernels' _trace entries; tools/gpu/decode_trace.py, gemm_trace.py read them):
// a row of 16 u64 per block, blocks in linear grid order; thread 0 records %globaltimer (ns) in row[i]
// and clock64 in row[8 + i] at the kernel's point i < 7, the SM id in row[7] at point 0 (a kernel may
// add flags from bit 16); row[15] is the kernel's own (an extra clock64). tr == nullptr: no trace (the
// routed entries: every call folds away).
ONECAT_DEVICE unsigned long long* block_trace_row(unsigned long long* tr) {
  return tr + 16 * (((i64)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x);
}
ONECAT_DEVICE unsigned long long* block_trace_row_or_null(unsigned long long* tr) {
  return tr ? block_trace_row(tr) : nullptr;
}
ONECAT_DEVICE void block_trace(unsigned long long* tr, int i) {
  if (tr && threadIdx.x == 0) {
    unsigned long long* row = block_trace_row(tr), t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    row[i] = t;
    row[8 + i] = clock64();
    if (i == 0) {
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      row[7] = sm;
    }
  }
}

// A block's count on a split-merge counter (by one thread, after a barrier that orders the block's
// partial stores before it): one acq_rel atomic add, so the partial is released before the count and
// the block that counts last acquires the others' (SASS on sm_90: the release fence before the atomic,
// an L1 invalidate after; fence + atomicAdd + fence had a second MEMBAR.ALL.GPU). Returns the count
// before this one.
ONECAT_DEVICE int count_acq_rel(int* counter) {
  int before;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(before) : "l"(counter) : "memory");
  return before;
}

// The transpose of an 8 x 8 b16 matrix held as mma fragments (lane g = lane / 4, q = lane % 4 holds row
// g, columns 2q, 2q + 1): returns the transpose's row g, columns 2q, 2q + 1. sm_75+ (movmatrix).
ONECAT_DEVICE unsigned movmatrix_trans(unsigned a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  unsigned d;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  return d;
#else
  __trap();  // no movmatrix before sm_75: its caller (attention_decode_rd.cu) is never launched there
  return a;
#endif
}
