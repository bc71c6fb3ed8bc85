// sampling.cu: top-k / top-p / min-p sampling over the vocabulary, seeded per request, one block per
// row. The semantics are sampling_ops.sample_reference's docstring; every float step below is the
// reference's step, rounded the same way (explicit __fmul_rn/__fadd_rn/__fsub_rn, so no FMA
// contraction; expf/logf as torch's CUDA exp/log), so the chosen token matches the reference.
//
// Passes over the row (each a stream of 128-bit loads, re-read from L2/HBM, never sorted):
//   0. argmax of the logits (greedy rows stop here; m = max z follows from it exactly);
//   1. top-k (0 < k < V): radix select of the k-th largest z among the min-p survivors, 4 passes of
//      8 bits over an order-preserving key of z, per-warp count histograms (__match_any_sync
//      aggregates equal bins, then one shared atomic per bin);
//   2. top-p (top_p < 1): radix select on the bits of e = exp(z - m) in [0, 1] with histograms of
//      fixed-point mass q = trunc(e * 2^31) (integer sums: the same in any order, so the threshold
//      is the reference's exactly), kept as 16-bit halves in u32 so every shared atomic is native
//      (Volta has no native 64-bit shared atomic add: it would spin on CAS);
//   3. Gumbel-max over the kept tokens: argmax z_i - log(-log u_i), u_i from Philox-4x32-10 keyed
//      by the row's seed, counter (i / 4, offset), word i % 4.
// Shared memory: 16 warps x 256 bins x 2 u32 (32 KB) + 2 KB; no dynamic shared memory.
#include "common.cuh"

#define SAMPLE_THREADS 512
#define SAMPLE_WARPS (SAMPLE_THREADS / 32)
#define SAMPLE_NONE 0x7fffffff

constexpr float kGreedyBelow = 1e-5f;                    // temperature < this: greedy
constexpr float kMassScale = 2147483648.0f;              // 2^31: fixed-point unit of mass
constexpr float kUniformScale = 1.1920928955078125e-07f;  // 2^-23

struct SampleSmem {
  unsigned lo[SAMPLE_WARPS][256];  // counts (top-k) or low 16 bits of masses (top-p)
  unsigned hi[SAMPLE_WARPS][256];  // high bits of masses
  unsigned long long tot[256];
  float best_v[SAMPLE_WARPS];
  int best_i[SAMPLE_WARPS];
  unsigned long long above;
  double target;
  int digit;
};

// Philox-4x32-10 (Salmon et al. 2011, Random123's constants and round function).
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r) {
      k.x += 0x9E3779B9u;
      k.y += 0xBB67AE85u;
    }
    const unsigned lo0 = 0xD2511F53u * c.x, hi0 = __umulhi(0xD2511F53u, c.x);
    const unsigned lo1 = 0xCD9E8D57u * c.z, hi1 = __umulhi(0xCD9E8D57u, c.z);
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
  }
  return c;
}

// Order-preserving map of a float to u32 (larger float, larger key; -0 sorts just below +0).
__device__ __forceinline__ unsigned z_key(float z) {
  const unsigned u = __float_as_uint(z);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float z_from_key(unsigned key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

__device__ __forceinline__ bool beats(float av, int ai, float bv, int bi) {
  return av > bv || (av == bv && ai < bi);
}

template <typename T, int VEC>
__device__ __forceinline__ void load_row(const T* p, float (&f)[VEC]) {
  if constexpr (sizeof(T) == 2) {
    load_vec<VEC>(reinterpret_cast<const __half*>(p), f);
  } else if constexpr (VEC == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    f[0] = t.x; f[1] = t.y; f[2] = t.z; f[3] = t.w;
  } else {
    f[0] = *reinterpret_cast<const float*>(p);
  }
}

// f(index, value, valid) for every element of the row; the loop is warp-uniform (every lane of a
// warp runs the same iterations, `valid` false past the end), so f may use full-warp intrinsics.
template <typename T, int VEC, typename F>
__device__ __forceinline__ void for_row(const T* row, int n, F&& f) {
  const int nvec = n / VEC, lane = threadIdx.x & 31;
  for (int v = threadIdx.x; v - lane < nvec; v += SAMPLE_THREADS) {
    const bool valid = v < nvec;
    float x[VEC];
    if (valid) {
      load_row<T, VEC>(row + (i64)v * VEC, x);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) x[e] = 0.f;
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) f(v * VEC + e, x[e], valid);
  }
}

// Block-wide (value, index) argmax, smallest index on ties; every thread gets the result.
__device__ __forceinline__ void block_argmax(float& bv, int& bi, SampleSmem& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (beats(ov, oi, bv, bi)) { bv = ov; bi = oi; }
  }
  if ((threadIdx.x & 31) == 0) {
    s.best_v[threadIdx.x >> 5] = bv;
    s.best_i[threadIdx.x >> 5] = bi;
  }
  __syncthreads();
  bv = s.best_v[0];
  bi = s.best_i[0];
  for (int w = 1; w < SAMPLE_WARPS; ++w)
    if (beats(s.best_v[w], s.best_i[w], bv, bi)) { bv = s.best_v[w]; bi = s.best_i[w]; }
  __syncthreads();
}

__device__ __forceinline__ void clear_hist(SampleSmem& s, bool both) {
  unsigned* lo = &s.lo[0][0];
  unsigned* hi = &s.hi[0][0];
  for (int i = threadIdx.x; i < SAMPLE_WARPS * 256; i += SAMPLE_THREADS) {
    lo[i] = 0u;
    if (both) hi[i] = 0u;
  }
  __syncthreads();
}

// After a histogram pass: tot[b] = sum over warps; then warp 0 picks the highest digit d with
// above + sum_{b >= d} tot[b] >= target (target = tp * total when tp >= 0, else `target`), stores
// d (or -1 if even the whole histogram falls short), above + sum_{b > d} tot[b], and the target.
__device__ __forceinline__ void select_digit(SampleSmem& s, unsigned long long above, double target, float tp,
                                             bool with_hi) {
  for (int b = threadIdx.x; b < 256; b += SAMPLE_THREADS) {
    unsigned long long t = 0;
    for (int w = 0; w < SAMPLE_WARPS; ++w)
      t += s.lo[w][b] + (with_hi ? (unsigned long long)s.hi[w][b] << 16 : 0ull);
    s.tot[b] = t;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    unsigned long long mine = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) mine += s.tot[8 * lane + j];
    unsigned long long incl = mine;  // sum over this lane's bins and all higher lanes' bins
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const unsigned long long t = __shfl_down_sync(0xffffffffu, incl, o);
      if (lane + o < 32) incl += t;
    }
    if (tp >= 0.f) target = __dmul_rn((double)tp, __ull2double_rn(__shfl_sync(0xffffffffu, incl, 0)));
    if (lane == 0) {
      s.digit = -1;
      s.target = target;
    }
    __syncwarp();
    const unsigned long long excl = incl - mine;
    if (__ull2double_rn(above + incl) >= target && !(__ull2double_rn(above + excl) >= target)) {
      unsigned long long cum = above + excl;
      for (int j = 7; j >= 0; --j) {
        const unsigned long long t = s.tot[8 * lane + j];
        cum += t;
        if (__ull2double_rn(cum) >= target) {
          s.digit = 8 * lane + j;
          s.above = cum - t;
          break;
        }
      }
    }
  }
  __syncthreads();
}

template <typename T, int VEC>
__device__ void sample_row(i64* __restrict__ out, const T* __restrict__ logits, const float* __restrict__ temperature,
                           const int* __restrict__ top_k, const float* __restrict__ top_p,
                           const float* __restrict__ min_p, const i64* __restrict__ seed,
                           const i64* __restrict__ offset, i64 stride, int n) {
  __shared__ SampleSmem s;
  const int b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const T* row = logits + (i64)b * stride;
  const float NEG_INF = -__int_as_float(0x7f800000);

  // 0. argmax of the logits: the greedy token, and the max from which m = max z follows.
  float bv = NEG_INF;
  int bi = SAMPLE_NONE;
  for_row<T, VEC>(row, n, [&](int i, float x, bool valid) {
    if (valid && beats(x, i, bv, bi)) { bv = x; bi = i; }
  });
  block_argmax(bv, bi, s);
  const int greedy = bi == SAMPLE_NONE ? 0 : bi;
  const float temp = temperature[b];
  if (!(temp >= kGreedyBelow) || !(bv > NEG_INF)) {  // greedy row, or every logit -inf
    if (threadIdx.x == 0) out[b] = greedy;
    return;
  }
  const float r = __fdiv_rn(1.0f, temp);
  const float m = __fmul_rn(bv, r);  // fl(x * r) is monotone in x: max z = fl(max x * r)
  const int k = top_k[b];
  const float tp = top_p[b], mp = min_p[b];
  const bool use_k = k > 0 && k < n, use_p = tp < 1.0f, use_minp = mp > 0.0f;
  auto zval = [&](float x) { return __fmul_rn(x, r); };
  auto eval = [&](float z) { return expf(__fsub_rn(z, m)); };

  // 1. top-k among the min-p survivors: the k-th largest z (ties at it are all kept).
  float zthr = NEG_INF;
  if (use_k) {
    unsigned prefix = 0u, mask = 0u;
    unsigned long long above = 0;
    bool found = true;
    for (int shift = 24; shift >= 0; shift -= 8) {
      clear_hist(s, false);
      for_row<T, VEC>(row, n, [&](int, float x, bool valid) {
        unsigned bin = 0xffffffffu;
        if (valid) {
          const float z = zval(x);
          const unsigned key = z_key(z);
          if ((key & mask) == prefix && (!use_minp || eval(z) >= mp)) bin = (key >> shift) & 255u;
        }
        const unsigned peers = __match_any_sync(0xffffffffu, bin);
        if (bin != 0xffffffffu && lane == __ffs(peers) - 1) atomicAdd(&s.lo[warp][bin], (unsigned)__popc(peers));
      });
      __syncthreads();
      select_digit(s, above, (double)k, -1.f, false);
      const int d = s.digit;
      if (d < 0) {  // fewer than k survivors (first pass only): top-k keeps them all
        found = false;
        break;
      }
      above = s.above;
      prefix |= (unsigned)d << shift;
      mask |= 255u << shift;
    }
    if (found) zthr = z_from_key(prefix);
  }

  // 2. top-p over the survivors of min-p and top-k: the largest e-threshold t whose mass
  // sum(q_i : e_i >= t) reaches top_p * sum(q_i) (ties at t all kept).
  float ethr = 0.f;
  if (use_p) {
    unsigned prefix = 0u, mask = 0u;
    unsigned long long above = 0;
    double target = 0.0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      clear_hist(s, true);
      for_row<T, VEC>(row, n, [&](int, float x, bool valid) {
        if (!valid) return;
        const float z = zval(x);
        if (!(z >= zthr)) return;
        const float e = eval(z);
        if (use_minp && !(e >= mp)) return;
        const unsigned eb = __float_as_uint(e);
        if ((eb & mask) != prefix) return;
        const unsigned q = __float2uint_rz(__fmul_rn(e, kMassScale));  // e <= 1: q <= 2^31
        if (q == 0u) return;  // no mass: never decides the threshold
        const unsigned bin = (eb >> shift) & 255u;
        atomicAdd(&s.lo[warp][bin], q & 0xffffu);
        if (q >> 16) atomicAdd(&s.hi[warp][bin], q >> 16);
      });
      __syncthreads();
      select_digit(s, above, target, shift == 24 ? tp : -1.f, true);
      target = s.target;
      const int d = s.digit;
      if (d < 0) break;  // unreachable for 0 < top_p < 1 (the max token alone has mass 2^31)
      above = s.above;
      prefix |= (unsigned)d << shift;
      mask |= 255u << shift;
    }
    ethr = __uint_as_float(prefix);
  }

  // 3. Gumbel-max over the kept tokens.
  const unsigned long long sd = (unsigned long long)seed[b], of = (unsigned long long)offset[b];
  const uint2 key = make_uint2((unsigned)sd, (unsigned)(sd >> 32));
  const unsigned off_lo = (unsigned)of, off_hi = (unsigned)(of >> 32);
  const bool need_e = use_p || use_minp;
  float bk = NEG_INF;
  int bt = SAMPLE_NONE, group = -1;
  uint4 words = make_uint4(0u, 0u, 0u, 0u);
  for_row<T, VEC>(row, n, [&](int i, float x, bool valid) {
    if (!valid) return;
    const float z = zval(x);
    if (!(z >= zthr)) return;
    if (need_e) {
      const float e = eval(z);
      if ((use_minp && !(e >= mp)) || !(e >= ethr)) return;
    }
    if ((i >> 2) != group) {
      group = i >> 2;
      words = philox4x32_10(make_uint4((unsigned)group, off_lo, off_hi, 0u), key);
    }
    const int j = i & 3;
    const unsigned w = j == 0 ? words.x : j == 1 ? words.y : j == 2 ? words.z : words.w;
    const float u = __fmul_rn(__fadd_rn(__uint2float_rn(w >> 9), 0.5f), kUniformScale);  // in (0, 1)
    const float g = -logf(-logf(u));
    const float kv = __fadd_rn(z, g);
    if (beats(kv, i, bk, bt)) { bk = kv; bt = i; }
  });
  block_argmax(bk, bt, s);
  if (threadIdx.x == 0) out[b] = bt == SAMPLE_NONE ? greedy : bt;
}

#define SAMPLE_ENTRY(NAME, T, VEC)                                                                           \
  extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)                                               \
      NAME(i64* out, const T* logits, const float* temperature, const int* top_k, const float* top_p,      \
           const float* min_p, const i64* seed, const i64* offset, i64 stride, int n) {                      \
    sample_row<T, VEC>(out, logits, temperature, top_k, top_p, min_p, seed, offset, stride, n);             \
  }

SAMPLE_ENTRY(sample_f16_v8, __half, 8)
SAMPLE_ENTRY(sample_f16_v1, __half, 1)
SAMPLE_ENTRY(sample_f32_v4, float, 4)
SAMPLE_ENTRY(sample_f32_v1, float, 1)
