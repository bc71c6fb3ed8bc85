// gemv_chain.cu: a chain of M = 1 GEMVs (y_t[N_t] = W_t[N_t, K_t] x_t) in ONE persistent, cooperative
// launch: the experiment behind issue #7's G2 (tools/gpu/gemv_chain.py --persistent times it against
// the CUDA graph of one kernel per GEMV). Not on the engine's route.
//
// Why: a decode step's GEMVs in a graph each ramp up and drain (on sm_90 programmatic dependent launch
// overlaps only what the next kernel's resident blocks can load before they wait); the best graphed
// layer chain reached 64% of the copy bandwidth on the H200 (s9), while one 296 MB GEMV reaches 95%.
// Here every warp of a grid that fills the GPU once walks all the chain's tasks: a task's row groups
// (R rows each) are dealt round-robin over the warps, and before the grid-wide barrier that separates
// task t from t + 1 (x of t + 1 is y of t) each warp already requests its first rows of t + 1, so
// the weight stream never stops. The per-row math is gemv_rows' (chunk_dot: same chunks per lane in
// the same order, U chunks per lane and row in flight, the next U prefetched), so r<R>u1 here gives
// bit for bit what gemv_r_<fmt>_r<R>u1k1 gives.
//
// Rules of a launch: all blocks resident (cooperative launch: the host sizes the grid by occupancy);
// x of a task is the y of an earlier task or an input, and no task writes a buffer that an earlier
// task of the same launch read (x is read through L1, which is not coherent across SMs; a buffer
// first written and then read is safe: no SM holds a line of it before the barrier).
#include "packed_formats.cuh"

struct ChainTask {  // 56 bytes: gemv_chain_ops.pack_tasks writes them as 7 int64 words
  __half* out;
  const __half* x;
  const unsigned char* q;
  const unsigned char* qh;
  const unsigned char* meta;
  int n, k, gchunks, pad;
};

// Grid-wide barrier (all blocks resident): arrive on bar[0]; the last block to arrive re-arms it and
// advances the generation bar[1] that the others spin on. Self re-arming: bar starts at {0, any}.
ONECAT_DEVICE void grid_barrier(unsigned* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* vb = bar;
    const unsigned gen = vb[1];
    __threadfence();  // this block's outputs are visible before it arrives
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      vb[0] = 0;
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (vb[1] == gen) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}

template <int F, int R, int U>
__device__ void gemv_chain(const ChainTask* __restrict__ tasks, int ntasks, unsigned* bar) {
  constexpr int STEP = 32 * U;
  const int lane = threadIdx.x & 31, wpb = blockDim.x >> 5;
  const int worker = blockIdx.x * wpb + (threadIdx.x >> 5), nworkers = gridDim.x * wpb;
  PChunk<F> cur[U][R], nxt[U][R];
  auto load = [&](PChunk<F>(&ck)[U][R], const ChainTask& t, int g, int base) {
    const int nch = t.k >> 5;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + lane + 32 * u;
      if (c < nch)
#pragma unroll
        for (int r = 0; r < R; ++r)
          load_chunk<F>(ck[u][r], t.q, t.qh, t.meta, (i64)min(g * R + r, t.n - 1), c, nch, t.gchunks);
    }
  };
  ChainTask t = tasks[0];
  if (worker * R < t.n) load(cur, t, worker, 0);
  for (int ti = 0; ti < ntasks; ++ti) {
    const int nch = t.k >> 5, ngroups = (t.n + R - 1) / R;
    for (int g = worker; g < ngroups; g += nworkers) {
      if (g != worker) load(cur, t, g, 0);  // a warp's first group loaded before the barrier
      float acc[R];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = 0.f;
      for (int base = 0; base < nch; base += STEP) {
        if (base + STEP < nch) load(nxt, t, g, base + STEP);
        rows_step<F, U, R>(cur, base, lane, nch, [&](int c, Half8(&xv)[4]) {
#pragma unroll
          for (int s = 0; s < 4; ++s) xv[s].u = reinterpret_cast<const uint4*>(t.x)[c * 4 + s];  // L1: see the rules
        }, acc);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int r = 0; r < R; ++r) cur[u][r] = nxt[u][r];
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float v = warp_sum(acc[r]);
        if (lane == 0 && g * R + r < t.n) t.out[g * R + r] = __float2half_rn(v);
      }
    }
    if (ti + 1 < ntasks) {
      const ChainTask tn = tasks[ti + 1];
      if (worker * R < tn.n) load(cur, tn, worker, 0);  // the next task's weights stream across the barrier
      grid_barrier(bar);
      t = tn;
    }
  }
}

#define GEMV_CHAIN(NAME, F, R, U)                                                                 \
  extern "C" __global__ void __launch_bounds__(128) gemv_chain_##NAME##_r##R##u##U(              \
      const ChainTask* tasks, int ntasks, unsigned* bar) {                                        \
    gemv_chain<F, R, U>(tasks, ntasks, bar);                                                      \
  }
GEMV_CHAIN(q4_0, F_Q4_0, 4, 1)
GEMV_CHAIN(q4_0, F_Q4_0, 2, 1)
GEMV_CHAIN(q4_0, F_Q4_0, 2, 2)
GEMV_CHAIN(q4_k, F_Q4_K, 4, 1)
GEMV_CHAIN(q4_k, F_Q4_K, 2, 2)
