// argmax.cu: greedy sampling, index of the largest logit per row (first one on ties, NaN counts
// as largest, as torch.argmax). logits [B, V] FP16 or FP32, out [B] int64.
// Volta shape: threads stream the row with 128-bit loads (8 halves / 4 floats per load), two loads
// in flight per thread, keep a (value, index) pair in registers, then reduce with warp shuffles and
// one shared-memory step.
//   argmax_<t>_v<n>: one 1024-thread block per row (batches: rows fill the GPU).
//   argmax_split_<t>_v<n>: few rows (decode at batch 1..64): grid (chunks, rows), each 256-thread
//     block takes `chunk` logits of its row and writes its best (value, index); the last block of a
//     row to finish (a counter it re-arms, as the split-KV attention merge) reduces the row's chunks.
//     A 128K FP16 row is 32 blocks of one 128-bit load per thread instead of one SM's 256 KB.
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

__device__ __forceinline__ void warp_best(float& bv, int& bi) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (beats(ov, oi, bv, bi)) { bv = ov; bi = oi; }
  }
}

// The block's best (value, index) into thread 0's (bv, bi) (other threads: partial results).
__device__ __forceinline__ void block_best(float& bv, int& bi) {
  __shared__ Best red[32];
  warp_best(bv, bi);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = Best{bv, bi};
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x >> 5;
    bv = lane < nw ? red[lane].v : -__int_as_float(0x7f800000);
    bi = lane < nw ? red[lane].i : 0x7fffffff;
    warp_best(bv, bi);
  }
}

// Scan logits [lo, hi) of `row` (lo, hi multiples of VEC) into this thread's (bv, bi).
template <typename T, int VEC>
__device__ __forceinline__ void scan_range(const T* row, int lo, int hi, float& bv, int& bi) {
  const int nvec = hi / VEC, step = blockDim.x;
  int i = lo / VEC + threadIdx.x;
  for (; i + step < nvec; i += 2 * step) {  // two independent vectors per iteration
    scan<T, VEC>(row + i * VEC, i * VEC, bv, bi);
    scan<T, VEC>(row + (i + step) * VEC, (i + step) * VEC, bv, bi);
  }
  if (i < nvec) scan<T, VEC>(row + i * VEC, i * VEC, bv, bi);
}

template <typename T, int VEC>
__device__ void argmax_body(i64* __restrict__ out, const T* __restrict__ x, i64 stride, int n) {
  pdl_wait();  // sm_90 PDL: the logits are the previous kernel's
  pdl_launch_dependents();
  float bv = -__int_as_float(0x7f800000);  // -inf
  int bi = 0x7fffffff;
  scan_range<T, VEC>(x + blockIdx.x * stride, 0, n, bv, bi);
  block_best(bv, bi);
  if (threadIdx.x == 0) out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
}

// grid (nchunks, rows): chunk c of row r is [c * chunk, min(n, (c + 1) * chunk)); part[r * nchunks +
// c] its best; counters[r] counts the row's finished chunks (0 before and after every launch: the
// last block re-arms it, so one zeroed array serves every launch issued in order on one stream).
template <typename T, int VEC>
__device__ void argmax_split_body(i64* __restrict__ out, Best* __restrict__ part, int* __restrict__ counters,
                                  const T* __restrict__ x, i64 stride, int n, int chunk) {
  __shared__ int is_last;
  pdl_wait();
  pdl_launch_dependents();
  const int c = blockIdx.x, r = blockIdx.y, nchunks = gridDim.x;
  float bv = -__int_as_float(0x7f800000);
  int bi = 0x7fffffff;
  scan_range<T, VEC>(x + r * stride, c * chunk, min(n, (c + 1) * chunk), bv, bi);
  block_best(bv, bi);
  if (threadIdx.x == 0) {
    part[(i64)r * nchunks + c] = Best{bv, bi};
    const int last = count_acq_rel(counters + r) == nchunks - 1;  // the partial released, theirs acquired
    if (last) counters[r] = 0;  // every chunk of the row has counted: re-arm for the next launch
    is_last = last;
  }
  __syncthreads();
  if (!is_last) return;
  bv = -__int_as_float(0x7f800000);
  bi = 0x7fffffff;
  for (int i = threadIdx.x; i < nchunks; i += blockDim.x) {
    const float2 b = __ldcg(reinterpret_cast<const float2*>(part) + (i64)r * nchunks + i);  // other blocks' (L2)
    const int idx = __float_as_int(b.y);
    if (beats(b.x, idx, bv, bi)) { bv = b.x; bi = idx; }
  }
  __syncthreads();  // block_best's shared array is reused
  block_best(bv, bi);
  if (threadIdx.x == 0) out[r] = bi == 0x7fffffff ? 0 : bi;
}

#define ARGMAX_ENTRY(NAME, T, VEC)                                                  \
  extern "C" __global__ void __launch_bounds__(1024) NAME(i64* out, const T* x, i64 stride, int n) { \
    argmax_body<T, VEC>(out, x, stride, n);                                          \
  }
#define ARGMAX_SPLIT_ENTRY(NAME, T, VEC)                                                                  \
  extern "C" __global__ void __launch_bounds__(256) NAME(i64* out, Best* part, int* counters, const T* x,  \
                                                         i64 stride, int n, int chunk) {                 \
    argmax_split_body<T, VEC>(out, part, counters, x, stride, n, chunk);                                  \
  }

ARGMAX_ENTRY(argmax_f16_v8, __half, 8)
ARGMAX_ENTRY(argmax_f16_v1, __half, 1)
ARGMAX_ENTRY(argmax_f32_v4, float, 4)
ARGMAX_ENTRY(argmax_f32_v1, float, 1)
ARGMAX_SPLIT_ENTRY(argmax_split_f16_v8, __half, 8)
ARGMAX_SPLIT_ENTRY(argmax_split_f16_v1, __half, 1)
ARGMAX_SPLIT_ENTRY(argmax_split_f32_v4, float, 4)
ARGMAX_SPLIT_ENTRY(argmax_split_f32_v1, float, 1)
