// gemv_pchain.cu (s42 experiment, not routed): a chain of dependent M = 1 q4_0 GEMVs in ONE persistent launch,
// the question s10's persistent chain (c6f95c8) left open. s10 lost to the graphed PDL chain (layer chain 44-51%
// of copy against 66%) with either thousands of 128-thread blocks (one global atomic each per barrier) or 1-4 such
// blocks per SM (4-16 warps: too few loads in flight). Here: BPS blocks of THREADS per SM (1 x 1024 or 2 x 512:
// 32 warps an SM, <= 64 registers), so a barrier is 132-264 atomics, and every warp keeps its stream going:
//  * a link's work is units (row, K part): kp parts of a row's chunks (the host picks kp so that the units fill
//    the warps' rounds); warp w takes units w, w + W, ... (W = all warps); a unit's partial sum goes to
//    out[part][row] in fp32, and the next link's x is fp16(sum of the parts) of the first K values (staged once
//    per block into shared memory after the barrier; rows of the previous link read through L2, __ldcg);
//  * one flat stream per warp: while step s is multiplied the next step is in flight (register prefetch, U
//    chunks a lane), across units and across the barrier: the next link's first step is requested before
//    the warp arrives, so DRAM keeps streaming while the grid meets.
#include "packed_formats.cuh"

struct PTask {  // 8 int64 words (the host packs them)
  float* out;            // [kp][n] fp32 partials
  const float* xin;      // [kp_in][xstride] the previous link's partials (null: x16)
  const __half* x16;     // [k] the first link's x
  const unsigned char* q;
  const unsigned char* meta;
  int n, k;
  int kp, kp_in;
  int xstride, pad;
};

#define PC_KMAX 14336

ONECAT_DEVICE int pc_slot(int j) { return j ^ ((j >> 3) & 3); }

// all blocks resident (the host sizes the grid by occupancy); err set and the wait abandoned after ~2^22 polls
ONECAT_DEVICE void pc_barrier(unsigned* bar, int* err) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* vb = bar;
    const unsigned gen = vb[1];
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      vb[0] = 0;
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      unsigned spins = 0;
      while (vb[1] == gen) {
        if (++spins > (1u << 22)) {
          atomicExch(err, 1);
          break;
        }
      }
    }
    __threadfence();
  }
  __syncthreads();
}

template <int THREADS, int U>
__device__ void pchain(const PTask* __restrict__ tasks, int ntasks, unsigned* bar, int* err) {
  constexpr int STEP = 32 * U;
  __shared__ uint4 xs[PC_KMAX / 8];
  const int lane = threadIdx.x & 31;
  const int worker = blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5), nworkers = gridDim.x * (THREADS / 32);
  PChunk<F_Q4_0> cur[U], nxt[U];
  auto ustart = [&](const PTask& t, int u) { return (u % t.kp) * ((t.k >> 5) / t.kp); };
  auto load_at = [&](PChunk<F_Q4_0>(&ck)[U], const PTask& t, int u, int base) {
    const int nch = t.k >> 5, cend = ustart(t, u) + nch / t.kp;
    const i64 row = u / t.kp;
#pragma unroll
    for (int i = 0; i < U; ++i) {
      const int c = base + lane + 32 * i;
      if (c < cend) load_chunk<F_Q4_0>(ck[i], t.q, nullptr, t.meta, row, c, nch, 32);
    }
  };
  // the link's task and the next one's, in shared memory (registers are the scarce thing at 64 a thread)
  __shared__ PTask ts[2];
  if (threadIdx.x < 16) reinterpret_cast<i64*>(ts)[threadIdx.x] =
      threadIdx.x < 8 || ntasks > 1 ? __ldg(reinterpret_cast<const i64*>(tasks) + threadIdx.x) : 0;
  __syncthreads();
  int u = worker, base = u < ts[0].n * ts[0].kp ? ustart(ts[0], u) : 0;
  if (u < ts[0].n * ts[0].kp) load_at(cur, ts[0], u, base);
  for (int ti = 0; ti < ntasks; ++ti) {
    const bool more = ti + 1 < ntasks;
    const PTask& t = ts[ti & 1];
    const PTask& tn = ts[(ti + 1) & 1];
    // x of this link into shared memory: fp16 of the previous link's parts (or the input)
    for (int j = threadIdx.x; j < (t.k >> 3); j += THREADS) {
      Half8 v;
      if (t.xin == nullptr) {
        v.u = __ldcg(reinterpret_cast<const uint4*>(t.x16) + j);
      } else {
        float a[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int p = 0; p < t.kp_in; ++p) {
          const float4* src = reinterpret_cast<const float4*>(t.xin + (i64)p * t.xstride) + 2 * j;
          const float4 f0 = __ldcg(src), f1 = __ldcg(src + 1);
          a[0] += f0.x; a[1] += f0.y; a[2] += f0.z; a[3] += f0.w;
          a[4] += f1.x; a[5] += f1.y; a[6] += f1.z; a[7] += f1.w;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) v.h2[i] = __floats2half2_rn(a[2 * i], a[2 * i + 1]);
      }
      xs[pc_slot(j)] = v.u;
    }
    __syncthreads();
    const int nunits = t.n * t.kp, nch = t.k >> 5, cpp = nch / t.kp;
    bool next_loaded = false;  // cur holds the next link's first step (requested in this link's last step)
    float acc = 0.f;
    while (u < nunits) {
      // the position after (u, base): this unit's next step, the warp's next unit, or the next link's first
      int un = u, bn = base + STEP;
      if (bn >= ustart(t, u) + cpp) {
        un = u + nworkers;
        bn = un < nunits ? ustart(t, un) : 0;
      }
      if (un < nunits) {
        load_at(nxt, t, un, bn);
      } else if (more && worker < tn.n * tn.kp) {
        load_at(nxt, tn, worker, ustart(tn, worker));
        next_loaded = true;
      }
      const int cend = ustart(t, u) + cpp;
#pragma unroll
      for (int i = 0; i < U; ++i) {
        const int c = base + lane + 32 * i;
        if (c < cend) {
          Half8 xv[4];
#pragma unroll
          for (int s = 0; s < 4; ++s) xv[s].u = xs[pc_slot(c * 4 + s)];
          acc = chunk_dot<F_Q4_0>(cur[i], c, xv, 0.f, acc);
        }
      }
      if (un != u) {
        const float v = warp_sum(acc);
        if (lane == 0) t.out[(i64)(u % t.kp) * t.n + u / t.kp] = v;
        acc = 0.f;
      }
#pragma unroll
      for (int i = 0; i < U; ++i) cur[i] = nxt[i];
      u = un;
      base = bn;
    }
    if (!more) break;
    if (!next_loaded && worker < tn.n * tn.kp) load_at(cur, tn, worker, ustart(tn, worker));
    pc_barrier(bar, err);  // (begins with a block barrier: every warp is done with t and xs)
    u = worker;
    base = u < tn.n * tn.kp ? ustart(tn, u) : 0;
    // the slot of t takes the task after tn
    if (ti + 2 < ntasks && threadIdx.x < 8)
      reinterpret_cast<i64*>(&ts[ti & 1])[threadIdx.x] = __ldg(reinterpret_cast<const i64*>(tasks + ti + 2) + threadIdx.x);
    __syncthreads();
  }
}

#define PCHAIN(T, BPS, U)                                                                              \
  extern "C" __global__ void __launch_bounds__(T, BPS) gemv_pchain_t##T##u##U(const PTask* tasks,     \
                                                                               int ntasks, unsigned* bar, \
                                                                               int* err) {            \
    pchain<T, U>(tasks, ntasks, bar, err);                                                             \
  }
PCHAIN(1024, 1, 1)
PCHAIN(1024, 1, 2)
PCHAIN(512, 2, 1)
PCHAIN(512, 2, 2)
