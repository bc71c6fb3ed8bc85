// attention_merge.cuh: split-KV merges of the partials (o / l, m, l) the flash bodies write per partition:
// flash_split_merge (fused into the decode launches: the last partition of a group merges it) and the pieces
// attn_reduce (attention_decode.cu, the two-launch path) shares with it. Same math on both paths.
#pragma once
#include "common.cuh"

// Split-KV merge fused into the decode launch (decode entries; nparts > 1 and a counter array given):
// a block that has written its partials (o / l, m, l) for its R rows counts itself done on the
// counter of its (request, KV head, row chunk) group; the block that finds nparts - 1 there (the
// last of the group's partitions) re-arms it to 0 and merges all nparts partitions of those rows,
// as attn_reduce does (same math): M = max m over partitions with l > 0, w_p = l_p 2^(m_p - M),
// sums up to the last partition that saw a key, out = acc / s * v_mul (0 where s == 0).
// Invariant: every counter is 0 before and after each launch (each group's counter reaches nparts
// exactly once: every partition of it counts, empty ones included, and the last re-arms it), so one
// array serves every launch issued in order on one stream (CUDA graphs included); launches that
// may run concurrently (other streams) must not share an array.
// Warp per row (rows strided over the 4 warps), lane -> D / 32 contiguous columns; the weights
// are computed 32 partitions at a time, one per lane, and broadcast by shuffles; the first 32
// partitions' (m, l) and the first PC partitions' O are loaded together (a short context's whole
// merge is one round trip after the count), further partitions' O PC at a time (merge_o_batch). Not inlined, scalar arguments, no shared memory: the
// main loop's registers are dead here and its shared layout stays.
// Every thread of the block calls it (uniform); other blocks' partials are read through L2 (__ldcg).
// Of the partials (m, l) at ml[p * pstride] for p = first, first + step, ... < nparts: the max m over
// those that saw a key (l > 0) and the last such p, folded into this lane's (m, last) as given, then
// reduced over the warp (every lane gets both). The split-KV merges' first pass (attn_reduce per
// warp; flash_split_merge past the partitions it loaded at once).
ONECAT_DEVICE void partials_max_last(const float2* ml, i64 pstride, int first, int step, int nparts, float& m,
                                     int& last) {
  for (int p = first; p < nparts; p += step) {
    const float2 x = __ldcg(ml + p * pstride);
    if (x.y > 0.f) {
      m = fmaxf(m, x.x);
      last = p;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
  }
}

// V consecutive floats of one partial's O row (another block's: through L2).
template <int V>
ONECAT_DEVICE void load_partial_o(float (&o)[V], const float* src) {
  if constexpr (V == 2) {
    const float2 t = __ldcg(reinterpret_cast<const float2*>(src));
    o[0] = t.x;
    o[1] = t.y;
  } else {
#pragma unroll
    for (int v = 0; v < V; v += 4) {
      const float4 t = __ldcg(reinterpret_cast<const float4*>(src + v));
      o[v] = t.x;
      o[v + 1] = t.y;
      o[v + 2] = t.z;
      o[v + 3] = t.w;
    }
  }
}

// acc += sum over j < min(PC, n) of w_(lane0 + j) * O_j, O_j at src + j * step: the batch's loads
// first, then its FMAs (weights broadcast from lane lane0 + j of w; lane0 + PC <= 32).
template <int V, int PC>
ONECAT_DEVICE void merge_o_batch(float (&acc)[V], float (&o)[PC][V], const float* src, i64 step, int n, float w,
                                 int lane0) {
#pragma unroll
  for (int j = 0; j < PC; ++j)
    if (j < n) load_partial_o<V>(o[j], src + j * step);
#pragma unroll
  for (int j = 0; j < PC; ++j) {
    const float wj = __shfl_sync(0xffffffffu, w, lane0 + j);
    if (j < n)
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] = fmaf(wj, o[j][v], acc[v]);
  }
}

// one_token_qs >= 0: the caller's first token of a one-token request (decode), so its rows need no
// load of qsl (one L2 round trip less on the launch's tail); tr: a trace row (decode_rd's _trace
// entries), whose slot 15 gets the clock when the count has resolved.
template <int D, int ROWS>
__device__ __noinline__ void flash_split_merge(__half* out, const float* part_o, const float* part_ml, int* counters,
                                               const int* qsl, int n_tokens, int hq, int group, int nparts,
                                               int nchunks, float v_mul, int one_token_qs = -1,
                                               unsigned long long* tr = nullptr) {
  const int kvh = blockIdx.y, b = blockIdx.z / nparts, r0 = (nchunks - 1 - (int)blockIdx.x) * ROWS;  // as flash_body
  const int qs = one_token_qs >= 0 ? one_token_qs : qsl[b];
  const int rows_total = one_token_qs >= 0 ? group : (qsl[b + 1] - qs) * group;
  if (r0 >= rows_total) return;  // a chunk past the request's rows: none of its partitions counts
  const int R = min(ROWS, rows_total - r0);
  pdl_wait();  // (no-op if waited already) before the counters and partials
  // Release / acquire by thread 0's count (common.cuh count_acq_rel; the barriers order the block's
  // own accesses against it), not __threadfence's sequentially consistent MEMBAR.SC.
  __syncthreads();
  int is_last = 0;
  if (threadIdx.x == 0) {
    int* c = counters + ((i64)b * gridDim.y + kvh) * nchunks + blockIdx.x;
    is_last = count_acq_rel(c) == nparts - 1;
    if (is_last) *c = 0;  // every other partition of the group has counted: re-arm for the next launch
  }
  is_last = __syncthreads_or(is_last);
  if (tr && threadIdx.x == 0) tr[15] = clock64();
  if (!is_last) return;
  constexpr int V = D / 32;  // columns per lane: 2, 4, 8
  // partitions whose O is loaded with the first (m, l): 64 registers, at most 16 partitions (s15: one
  // round trip for the 12-16 partitions of a short batch's decode; 8 before)
  constexpr int PC = 64 / V < 16 ? 64 / V : 16;
  const int lane = threadIdx.x & 31;
  const i64 pstride = (i64)n_tokens * hq;
  for (int rr = threadIdx.x >> 5; rr < R; rr += blockDim.x >> 5) {
    const int r = r0 + rr;
    const i64 row = (i64)(qs + r / group) * hq + kvh * group + r % group;
    const float2* ml = reinterpret_cast<const float2*>(part_ml) + row;
    const float* po = part_o + row * D + lane * V;
    // One round trip for the common case (nparts <= PC): lane p's (m, l) of partition p and the O of
    // the first PC partitions, all loaded before anything waits on them.
    const float2 x0 = lane < nparts ? __ldcg(ml + lane * pstride) : make_float2(-INFINITY, 0.f);
    float pre[PC][V];
#pragma unroll
    for (int j = 0; j < PC; ++j)
      if (j < nparts) load_partial_o<V>(pre[j], po + j * pstride * D);
    float M = x0.y > 0.f ? x0.x : -INFINITY;
    int last = x0.y > 0.f ? lane : -1;
    partials_max_last(ml, pstride, lane + 32, 32, nparts, M, last);
    const float w0 = x0.y > 0.f ? x0.y * exp2f(x0.x - M) : 0.f;  // partition `lane`'s weight
    float s = w0, acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.f;
#pragma unroll
    for (int j = 0; j < PC; ++j) {
      const float wj = __shfl_sync(0xffffffffu, w0, j);
      if (j <= last)  // uniform: last is the warp's
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = fmaf(wj, pre[j][v], acc[v]);
    }
    // partitions PC..31 (weights from w0), then >= 32 (long contexts; their (m, l) 32 at a time):
    // O in batches of PC, each batch's loads all issued before its FMAs (one L2 round trip per PC
    // partitions; loaded one by one, 32 partitions at D 64 cost ~16 dependent round trips, ~2.3 us)
    for (int b0 = PC; b0 < 32 && b0 <= last; b0 += PC)
      merge_o_batch<V, PC>(acc, pre, po + b0 * pstride * D, pstride * D, last + 1 - b0, w0, b0);
    for (int p0 = 32; p0 <= last; p0 += 32) {
      const int p = p0 + lane;
      const float2 x = p <= last ? __ldcg(ml + p * pstride) : make_float2(-INFINITY, 0.f);
      const float w = p <= last && x.y > 0.f ? x.y * exp2f(x.x - M) : 0.f;
      s += w;
      const int n = min(32, last + 1 - p0);  // empty partitions up to `last` hold zeros: valid to load
      for (int b0 = 0; b0 < n; b0 += PC)
        merge_o_batch<V, PC>(acc, pre, po + (p0 + b0) * pstride * D, pstride * D, n - b0, w, b0);
    }
    s = warp_sum(s);
    __align__(16) __half2 h[V / 2];
#pragma unroll
    for (int v = 0; v < V; v += 2)
      h[v / 2] = __floats2half2_rn(s > 0.f ? acc[v] / s * v_mul : 0.f, s > 0.f ? acc[v + 1] / s * v_mul : 0.f);
    __half* dst = out + row * D + lane * V;
    if constexpr (V == 2)
      *reinterpret_cast<__half2*>(dst) = h[0];
    else if constexpr (V == 4)
      *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(h);
    else
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(h);
  }
}
