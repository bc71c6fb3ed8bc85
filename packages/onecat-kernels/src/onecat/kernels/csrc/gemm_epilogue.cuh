// gemm_epilogue.cuh: the end of a packed GEMM block (gemm_packed.cu, gemm_rd.cu): its BM x BN fp32
// tile staged in shared memory -> FP16 out (+ bias), or with split-K (gridDim.z = S > 1) the split's
// FP32 partial to ws[z] and, in the tile's last block to arrive (a per-tile counter the caller keeps
// zeroed; that block re-arms it), the sum of ws[0..S-1] in that fixed order (deterministic).
// ROPE (gemm_rd.cu's _rope entries): the outputs are [q | k | v] of one token per row; q is rotated into
// `out` ([M][q_size]), k rotated and v copied into their paged-cache rows, FP16 or FP8 (rope_store8).
// NORM / RowNorm: the residual add and RMSNorm between two projections, split over their epilogues
// (linear_norm_ops): the projection in front (NORM, the _norm entries) writes r' = res + y, x~ = gamma r'
// and each tile's sums of r'^2; the one behind (RowNorm) reads x~ as its x and scales each row's sums by
// rsqrt(sum of the tiles' sums / hidden + eps) before its bias, GLU or rotary.
#pragma once
#include "attention_fp8.cuh"
#include "norm_join.cuh"  // NormOut, RowNorm

// ROPE's operands (unused otherwise): GPT-J pairs (2j, 2j + 1) of each head's first `rot` dims (rot % 8
// == 0, so an 8-column group is rotated whole or not at all), cos_sin [max_pos][rot] (cos then sin).
struct QkvRope {
  const i64* positions;  // [M]
  const i64* slots;      // [M]: the cache row of each token; < 0 is padding (q only)
  const float* cos_sin;
  __half* k_cache;       // [blocks, block_size, Hk, D]: slot-major rows of kv_size elements (FP8: bytes)
  __half* v_cache;
  int q_size, kv_size, head_dim, rot;
  int kv;                // the caches' element: KV_F16, KV_E4M3 or KV_E5M2 (attention_fp8.cuh; scale 1)
};

// The entries' RowNorm (after steps_per_split; K is the consumer's, the hidden size) and NormOut parameters.
#define GEMM_RN_PARAMS , const float *ss, int ss_tiles, float eps
#define GEMM_RN_ARGS RowNorm{ss, ss_tiles, K, eps}
#define GEMM_NORM_PARAMS , const __half *res, __half *res_out, const __half *gamma, float *ss, unsigned char *xs
#define GEMM_NORM_ARGS NormOut{res, res_out, gamma, ss, xs}

// RowNorm's scales of the tile's BM rows into inv (shared): 4 threads a row, each summing a quarter of the row's
// tiles in order (16-byte loads where tiles % 16 == 0: one L2 round trip for the route's 32 / 64 tiles; H200 s31: the
// scalar loads' two round trips cost the GLU GEMM ~2 us), then two shuffles (a fixed order, so every consumer of
// the same ss gets the same scale). Every thread of the block calls it (it ends with a barrier).
template <int BM, int THREADS>
ONECAT_DEVICE void row_norm_inv(const RowNorm& rn, int M, int m0, int t, float* inv) {
  for (int base = 0; base < 4 * BM; base += THREADS) {  // 4 BM and THREADS are multiples of 32: whole warps
    const int i = base + t, ml = i >> 2, part = i & 3;
    float s = 0.f;
    if (i < 4 * BM) {
      const float* p = rn.ss + (i64)min(m0 + ml, M - 1) * rn.tiles;
      if ((rn.tiles & 15) == 0) {
        const float4* p4 = reinterpret_cast<const float4*>(p) + part * (rn.tiles >> 4);
#pragma unroll 4
        for (int j = 0; j < rn.tiles >> 4; ++j) {
          const float4 v = __ldcg(p4 + j);
          s += (v.x + v.y) + (v.z + v.w);
        }
      } else {
#pragma unroll 8
        for (int j = part; j < rn.tiles; j += 4) s += __ldcg(p + j);
      }
    }
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    if (i < 4 * BM && part == 0) inv[ml] = rsqrtf(s / rn.hidden + rn.eps);
  }
  __syncthreads();
}

// NORM's stores of a tile: sums(ml, gm, gn, v) fills row ml's (global gm) final sums at columns gn .. gn + 7.
// A row's NV column groups are NV adjacent lanes of one warp (idx = t + i THREADS), so its sum of squares is
// their shuffle sum, in a fixed order.
template <int BM, int NV, int THREADS, class Sums>
ONECAT_DEVICE void norm_store(const NormOut& no, __half* __restrict__ out, const __half* __restrict__ bias, int M,
                              int N, int m0, int n0, int t, Sums sums) {
  static_assert(BM * NV % 32 == 0 && 32 % NV == 0 && THREADS % 32 == 0, "a row's column groups in one warp");
  for (int idx = t; idx < BM * NV; idx += THREADS) {
    const int ml = idx / NV, gm = m0 + ml, gn = n0 + (idx % NV) * 8;
    float sq = 0.f;
    if (gm < M) {
      float v[8];
      sums(ml, gm, gn, v);
      const i64 o = (i64)gm * N + gn;
      Half8 res, gam, r, xt;
      res.u = *reinterpret_cast<const uint4*>(no.res + o);
      gam.u = *reinterpret_cast<const uint4*>(no.gamma + gn);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float a = v[2 * i], b = v[2 * i + 1];
        if (bias) {
          a += __half2float(bias[gn + 2 * i]);
          b += __half2float(bias[gn + 2 * i + 1]);
        }
        const float2 y = __half22float2(__floats2half2_rn(a, b)), rf = __half22float2(res.h2[i]);
        r.h2[i] = __floats2half2_rn(y.x + rf.x, y.y + rf.y);
        const float2 rr = __half22float2(r.h2[i]), g = __half22float2(gam.h2[i]);
        sq += rr.x * rr.x + rr.y * rr.y;
        xt.h2[i] = __floats2half2_rn(rr.x * g.x, rr.y * g.y);
      }
      *reinterpret_cast<uint4*>(no.res_out + o) = r.u;
      if (no.xs) {  // x~ as the wgmma tile's x stages
        x_stage_store8(no.xs, gm, gn, N, xt.u);
      } else {
        *reinterpret_cast<uint4*>(out + o) = xt.u;
      }
    }
#pragma unroll
    for (int off = NV / 2; off; off >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, off);
    if (gm < M && idx % NV == 0) no.ss[(i64)gm * gridDim.x + blockIdx.x] = sq;
  }
}

// 8 consecutive outputs of one row: + bias, fp16, one 16-byte store when N % 8 == 0.
ONECAT_DEVICE void store_out8(__half* __restrict__ orow, int gn, int N, const float (&v)[8],
                              const __half* __restrict__ bias) {
  if ((N & 7) == 0) {
    Half8 h;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float a = v[2 * i], b = v[2 * i + 1];
      if (bias) {
        a += __half2float(bias[gn + 2 * i]);
        b += __half2float(bias[gn + 2 * i + 1]);
      }
      h.h2[i] = __floats2half2_rn(a, b);
    }
    *reinterpret_cast<uint4*>(orow + gn) = h.u;
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (gn + e < N) orow[gn + e] = __float2half_rn(bias ? v[e] + __half2float(bias[gn + e]) : v[e]);
  }
}

// ROPE's inputs of a thread's I column groups (idx = t + i THREADS of the epilogue's loops), loaded as the
// epilogue starts so that no store waits on them (position -> cos / sin is two dependent loads, ~2 us of a
// split-K tile's merge when loaded where used): the row's cache slot and the group's 4 pairs' cos / sin.
template <int I>
struct RopeIn8 {
  i64 slot[I];
  float c[I][4], s[I][4];
  template <int NV, int THREADS>
  ONECAT_DEVICE void load(const QkvRope& e, int M, int m0, int n0, int t) {
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int idx = t + i * THREADS, gm = min(m0 + idx / NV, M - 1), gn = n0 + (idx % NV) * 8;
      const int off = gn % e.head_dim;
      slot[i] = e.slots[gm];
      const float* cs = e.cos_sin + (gn < e.q_size + e.kv_size && off < e.rot ? e.positions[gm] * e.rot : 0);
#pragma unroll
      for (int p = 0; p < 4; ++p) {  // (row 0's values where not rotated: read, never used)
        c[i][p] = cs[min(off / 2 + p, e.rot / 2 - 1)];
        s[i][p] = cs[min(e.rot / 2 + off / 2 + p, e.rot - 1)];
      }
    }
  }
};

// ROPE: row gm's 8 outputs at column gn of [q | k | v] (+ bias, each rounded to FP16 first as linear's
// output is, then rotated in FP32 by rope_pair as rotary.cu does: the unfused route's bits) to q_out's row or
// the token's cache rows (slot; < 0: q only); c / s: the group's pairs' cos / sin. N, q_size, kv_size and
// head_dim are multiples of 8, rot of 8 (the provider checks). An FP8 cache gets fp8(the FP16 value) by
// attention_fp8.cuh half8_to_fp8 at scale 1: attention_cache.cu's code, so its bytes for the rotated k / v.
ONECAT_DEVICE void rope_store8(const QkvRope& e, __half* __restrict__ q_out, int gm, int gn, float (&v)[8],
                               const __half* __restrict__ bias, i64 slot, const float (&c)[4], const float (&s)[4]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = __half2float(__float2half_rn(bias ? v[i] + __half2float(bias[gn + i]) : v[i]));
  const bool is_q = gn < e.q_size, is_k = !is_q && gn < e.q_size + e.kv_size;
  __half* dst;
  i64 off = 0;  // a cache row's element
  if (is_q) {
    dst = q_out + (i64)gm * e.q_size + gn;
  } else {
    if (slot < 0) return;
    dst = is_k ? e.k_cache : e.v_cache;
    off = slot * e.kv_size + (gn - e.q_size - (is_k ? 0 : e.kv_size));
  }
  if ((is_q || is_k) && gn % e.head_dim < e.rot) {  // q_size is whole heads: k's dims line up too
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 o = rope_pair(v[2 * p], v[2 * p + 1], c[p], s[p]);
      v[2 * p] = o.x;
      v[2 * p + 1] = o.y;
    }
  }
  Half8 h;
  h.u = half8_rn(v);
  if (is_q || e.kv == KV_F16) {
    *reinterpret_cast<uint4*>(dst + off) = h.u;
    return;
  }
  *reinterpret_cast<uint2*>(reinterpret_cast<unsigned char*>(dst) + off) = half8_to_fp8(e.kv, h, 1.f);
}

// GLU tiles (gemm_rd.cu's _glu entries): a tile's first BN / 2 columns are gate rows, the rest the same
// rows of up; out [M][N / 2] = silu(gate) * up, each rounded to FP16 first as the GEMM's output is before
// activation.cu's silu_and_mul (the same expression: the unfused route's bits).
ONECAT_DEVICE void glu_out8(float (&g)[8], const float (&u)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) g[e] = silu_mul_f16(g[e], u[e]);
}

// The outputs of a GLU tile (NH 8-column groups of its N / 2 outputs per row): sums(ml, gm, c, v, u) fills
// row ml's (global gm) gate sums v and up sums u of the group at output column c; out = silu(gate) * up. xs set
// (gemm_wg.cu's _glu_xb_xs; N / 2 % 128 == 0, gemm_ops checks): the outputs go there in the wgmma tile's x-stage
// layout instead (x_stage_store8), for the projection behind (down) to copy whole; the same FP16 values.
template <int BM, int NH, int THREADS, class Sums>
ONECAT_DEVICE void glu_store(__half* __restrict__ out, int M, int N, int m0, int n0, int t, Sums sums,
                             unsigned char* __restrict__ xs = nullptr) {
  const int NO = N >> 1;
  for (int idx = t; idx < BM * NH; idx += THREADS) {
    const int ml = idx / NH, gm = m0 + ml, c = (idx % NH) * 8, gn = (n0 >> 1) + c;
    if (gm >= M || gn >= NO) continue;
    float v[8], u[8];
    sums(ml, gm, c, v, u);
    glu_out8(v, u);
    if (xs) {
      x_stage_store8(xs, gm, gn, NO, half8_rn(v));  // store_out8's rounding
    } else {
      store_out8(out + (i64)gm * NO, gn, NO, v, nullptr);
    }
  }
}

// The tile's last split-K block: cs (its own partial, staged) becomes the sum of the S splits' partials in the fixed
// order z = 0, 1, .., S - 1 (its own partial enters at z = own from cs: the value it stored to ws[own], so the bits
// are those of summing ws[0..S-1]). A thread takes MU (<= MU_MAX, its share of the tile) 4-column slots at once and
// issues the loads of up to ZB of the other splits for all of them before adding, so the last block's serial tail
// is ~(S - 1) / ZB L2 round trips per MU slots; then the unsplit block's stores (one path for both). MU_MAX x ZB
// bounds the loads a thread holds: 4 x 4 (64 registers) by default, 11 x 2 in the wgmma w64 tile (one block per SM,
// its 243 registers unchanged; 11 x 3 spilled), whose 64 x 128 tile is then one round of slots.
// s43: each store path had summed ws[0..S-1] itself, 8 columns per round trip; merged here, gemm_bench (H100, one run
// each, llama3-8b q4_0) qkv r32 x4 / x2 at M 32 / 64 16.0 / 22.6 -> 15.6 / 22.0 us, o r32 x4 / x3 13.1 / 17.5 -> 12.9
// / 17.3, down r32w x8 at M 32 28.4 -> 28.1, w64 x4 at M 64 34.8 -> 35.2 (noise ~1%). s44 (H100, gemm_trace.py, the
// same machine, benchmarks/results/h200-2026-12-06-s44/): the w64 merging block's merge at 4 x 4 took 3.5 us at x4
// and 6.0 at x8 (3 and 6 round trips), at 11 x 2 (and only the other splits loaded) 2.5 / 3.9 us.
template <int BM, int BN, int C_LD, int THREADS, int MU_MAX = 4, int ZB = 4>
ONECAT_DEVICE void merge_splits(float* __restrict__ cs, const float* __restrict__ ws, int M, int N, int m0, int n0,
                                int t, int S, int own) {
  constexpr int NQ = BN / 4, PER = (BM * NQ + THREADS - 1) / THREADS, MU = PER < MU_MAX ? PER : MU_MAX;
  const i64 MN = (i64)M * N;
  for (int base = 0; base < BM * NQ; base += MU * THREADS) {
    auto own_slot = [&](int u) {  // slot u's 4 columns in the staged tile (this thread's only)
      const int i = base + u * THREADS + t;
      return cs + (i / NQ) * C_LD + (i % NQ) * 4;
    };
    float4 acc[MU];
    i64 off[MU];  // the slot's offset in a partial (-1: outside the output)
#pragma unroll
    for (int u = 0; u < MU; ++u) {
      const int i = base + u * THREADS + t, ml = i / NQ, gm = m0 + ml, gn = n0 + (i % NQ) * 4;
      off[u] = i < BM * NQ && gm < M && gn < N ? (i64)gm * N + gn : -1;
      acc[u] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    auto add_own = [&]() {
#pragma unroll
      for (int u = 0; u < MU; ++u)
        if (off[u] >= 0) {
          const float4 v = *reinterpret_cast<const float4*>(own_slot(u));
          acc[u].x += v.x; acc[u].y += v.y; acc[u].z += v.z; acc[u].w += v.w;
        }
    };
    if ((N & 3) == 0) {
      // the other splits k = 0 .. S - 2 (z = k, or k + 1 from own on), ZB at a time: their loads first, then
      // the adds in z order, the own partial entering before the first z past it
      bool own_added = false;
      for (int k0 = 0; k0 < S - 1; k0 += ZB) {
        float4 p[ZB][MU];
#pragma unroll
        for (int dk = 0; dk < ZB; ++dk) {
          const int k = k0 + dk, z = k + (k >= own);
#pragma unroll
          for (int u = 0; u < MU; ++u)
            if (k < S - 1 && off[u] >= 0) p[dk][u] = __ldcg(reinterpret_cast<const float4*>(ws + z * MN + off[u]));
        }
#pragma unroll
        for (int dk = 0; dk < ZB; ++dk) {
          const int k = k0 + dk, z = k + (k >= own);
          if (k >= S - 1) break;
          if (!own_added && own < z) {
            add_own();
            own_added = true;
          }
#pragma unroll
          for (int u = 0; u < MU; ++u)
            if (off[u] >= 0) {
              acc[u].x += p[dk][u].x; acc[u].y += p[dk][u].y; acc[u].z += p[dk][u].z; acc[u].w += p[dk][u].w;
            }
        }
      }
      if (!own_added) add_own();
    } else {  // rows not 16-byte aligned in ws: element by element, the same order
#pragma unroll
      for (int u = 0; u < MU; ++u) {
        const int gn = n0 + ((base + u * THREADS + t) % NQ) * 4;
        if (off[u] < 0) continue;
        float v[4] = {0.f, 0.f, 0.f, 0.f};
        for (int z = 0; z < S; ++z)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (gn + e < N) v[e] += z == own ? own_slot(u)[e] : __ldcg(ws + z * MN + off[u] + e);
        acc[u] = make_float4(v[0], v[1], v[2], v[3]);
      }
    }
#pragma unroll  // a slot is read and rewritten by its own thread only
    for (int u = 0; u < MU; ++u)
      if (off[u] >= 0) *reinterpret_cast<float4*>(own_slot(u)) = acc[u];
  }
  __syncthreads();  // the merged tile, before the stores read it in their own thread mapping
}

// cs: the tile [BM][C_LD] fp32 (every thread's accumulators stored, then a barrier); t: threadIdx.x;
// tr: a block trace (common.cuh; points 4: the tile or partial stored, 5: the split-K count resolved).
// GLU: N is the [gate | up] width, out N / 2 wide (the tile's outputs: columns n0 / 2 ..). ROPE: N is the
// [q | k | v] width, out q_size wide, `rope` the rest (rope_store8). NORM: out is x~, `no` the rest
// (norm_store); rn.ss set: the outputs of row ml are scaled by its RowNorm scale first (the sums, before bias). GLU
// with no.xs set: the outputs in the x-stage layout there (glu_store), `out` unused.
// Split-K (S = gridDim.z > 1): every block stores its partial to ws[z]; the tile's last block merges them into cs
// (merge_splits) and then writes the outputs as an unsplit block does.
template <int BM, int BN, int C_LD, int THREADS, bool GLU = false, bool ROPE = false, bool NORM = false,
          int MERGE_MU = 4, int MERGE_ZB = 4>
ONECAT_DEVICE void gemm_epilogue(float* __restrict__ cs, __half* __restrict__ out, const __half* __restrict__ bias,
                                 float* __restrict__ ws, unsigned* __restrict__ counters, int M, int N, int m0, int n0,
                                 int t, unsigned& last_block, unsigned long long* tr = nullptr,
                                 const QkvRope& rope = QkvRope{}, const RowNorm& rn = RowNorm{},
                                 const NormOut& no = NormOut{}) {
  static_assert(int(GLU) + int(ROPE) + int(NORM) <= 1, "one epilogue");
  static_assert(BN % 8 == 0 && C_LD % 4 == 0, "16-byte rows of the staged tile");
  constexpr int NV = BN / 8;  // 8-column groups of an output row
  const int S = gridDim.z;
  constexpr int RI = ROPE ? BM * NV / THREADS : 1;  // ROPE: a thread's column groups
  static_assert(!ROPE || BM * NV % THREADS == 0, "ROPE: every thread the same number of column groups");
  __shared__ float inv[BM];  // RowNorm's row scales
  const bool scaled = !NORM && rn.ss != nullptr;
  auto scale = [&](int ml, float (&v)[8]) {
    if (scaled) {
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] *= inv[ml];
    }
  };
  RopeIn8<RI> rin;
  if constexpr (ROPE) rin.template load<NV, THREADS>(rope, M, m0, n0, t);
  if (S > 1) {  // split-K: this split's FP32 partial tile to ws[z]; the tile's last block goes on with the sum
    const i64 MN = (i64)M * N;
    float* part = ws + blockIdx.z * MN;
    const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
    for (int idx = t; idx < BM * NV; idx += THREADS) {
      const int ml = idx / NV, gm = m0 + ml, gn = n0 + (idx % NV) * 8;
      if (gm >= M || gn >= N) continue;
      const float* src = cs + ml * C_LD + (idx % NV) * 8;
      float* dst = part + (i64)gm * N + gn;
      if ((N & 7) == 0) {
        reinterpret_cast<float4*>(dst)[0] = *reinterpret_cast<const float4*>(src);
        reinterpret_cast<float4*>(dst)[1] = *reinterpret_cast<const float4*>(src + 4);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (gn + e < N) dst[e] = src[e];
      }
    }
    block_trace(tr, 4);
    // Release / acquire by thread 0's count (common.cuh count_acq_rel), the barriers ordering the block's
    // own stores and loads against it (as attention_merge.cuh's merge): once per block, not every thread's
    // __threadfence (a sequentially consistent MEMBAR.SC each: 6% of r32's stall samples, H200 s12 ncu).
    __syncthreads();
    if (t == 0) {
      const bool last = count_acq_rel(reinterpret_cast<int*>(counters + tile)) == S - 1;
      if (last) counters[tile] = 0;  // leave the counter as found
      last_block = last;
    }
    __syncthreads();
    block_trace(tr, 5);
    if (!last_block) return;
    merge_splits<BM, BN, C_LD, THREADS, MERGE_MU, MERGE_ZB>(cs, ws, M, N, m0, n0, t, S, blockIdx.z);
  }
  if (scaled) row_norm_inv<BM, THREADS>(rn, M, m0, t, inv);
  auto staged = [&](int ml, int c, float (&v)[8]) {  // the tile's sums of row ml, columns c .. c + 7
    const float4 lo = *reinterpret_cast<const float4*>(cs + ml * C_LD + c);
    const float4 hi = *reinterpret_cast<const float4*>(cs + ml * C_LD + c + 4);
    v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w; v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
    scale(ml, v);
  };
  if constexpr (GLU) {
    glu_store<BM, NV / 2, THREADS>(out, M, N, m0, n0, t, [&](int ml, int, int c, float (&v)[8], float (&u)[8]) {
      staged(ml, c, v);
      staged(ml, BN / 2 + c, u);
    }, no.xs);
  } else if constexpr (NORM) {
    norm_store<BM, NV, THREADS>(no, out, bias, M, N, m0, n0, t,
                                [&](int ml, int, int gn, float (&v)[8]) { staged(ml, gn - n0, v); });
  } else if constexpr (ROPE) {
#pragma unroll
    for (int i = 0; i < RI; ++i) {
      const int idx = t + i * THREADS, ml = idx / NV, gm = m0 + ml, gn = n0 + (idx % NV) * 8;
      if (gm >= M || gn >= N) continue;
      float v[8];
      staged(ml, (idx % NV) * 8, v);
      rope_store8(rope, out, gm, gn, v, bias, rin.slot[i], rin.c[i], rin.s[i]);
    }
  } else {
    for (int idx = t; idx < BM * NV; idx += THREADS) {
      const int ml = idx / NV, gm = m0 + ml, gn = n0 + (idx % NV) * 8;
      if (gm >= M || gn >= N) continue;
      float v[8];
      staged(ml, (idx % NV) * 8, v);
      store_out8(out + (i64)gm * N, gn, N, v, bias);
    }
  }
  if (S == 1) block_trace(tr, 4);
}
