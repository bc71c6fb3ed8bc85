// attention_decode.cu: paged attention for few query rows per request (decode q=1, verify q<=16),
// split-KV, plus its FP32 reduce. Any query length is correct (rows are chunked), but prefill
// belongs to attention_prefill.cu.
//
// Grid (partitions, Hk * row_chunks, requests), 128 threads. A block owns one request, one KV head
// and 16 query rows of it (row = q_index * group + head_in_group: the GQA heads of a KV head and
// the verify tokens share every K/V load), and one partition of the request's key range. The key
// range [lo, ctx) (lo > 0 only with a sliding window) is split into `nparts` partitions of
// `part` keys, chosen on the host from the context length so the GPU is full (a partition is
// walked in segments of AD_PMAX keys whose page ids are staged once); with nparts == 1 the
// block writes the FP16 output, else FP32 (o / l, m, l) partials that attention_reduce merges.
//
// Per tile of T = 4096 / D keys: K rows are read straight from the paged cache with 128-bit loads
// (8 halves or 16 FP8 bytes per lane, D / E lanes per key, page ids staged once per partition in
// shared memory), dotted with the FP32 query rows in shared memory and reduced by shuffles; V rows
// go to shared memory as FP16 (FP8 decoded on the way); the next tile's K/V loads are issued before
// the softmax and P.V phases of this one (register prefetch). Softmax state m, l in FP32, exp2 with
// log2(e) and the scales folded into the query.
#include "attention_fp8.cuh"

#define AD_THREADS 128
#define AD_ROWS 16
#define AD_PMAX 2048  // keys per page-id segment
#define AD_MIN_BS 8   // smallest block size (page-id table size)

struct DecodeArgs {
  __half* out;             // [T, Hq, D]
  float* part_o;           // [nparts, T, Hq, D] (nparts > 1)
  float* part_ml;          // [nparts, T, Hq, 2]
  const __half* q;         // [T, Hq, D], token stride q_stride
  const unsigned char* kc; // [blocks, bs, Hk, D] of FP16 or FP8
  const unsigned char* vc;
  const int* block_tables; // [B, bt_stride]
  const int* seq_lens;     // [B]
  const int* qsl;          // [B + 1]
  i64 q_stride;
  int n_tokens, hq, hk, group, bs_shift, bt_stride, window, nparts, part, nchunks;
  float qk_scale, soft_cap, v_mul;
};

template <int D, int KV>
__device__ __forceinline__ void decode_body(const DecodeArgs& a) {
  constexpr int E = KV == KV_F16 ? 8 : 16;       // elements per 128-bit load
  constexpr int L = D / E;                        // lanes per key row
  constexpr int KPW = 32 / L;                     // keys per warp per round
  constexpr int T = 4096 / D;                     // keys per tile
  constexpr int KPT = T * L / AD_THREADS;         // K loads per thread per tile
  constexpr int VPT = T * D / E / AD_THREADS;     // V loads per thread per tile
  constexpr int CH = D / 8;                       // 8-wide output chunks per row
  constexpr int RS = AD_THREADS / CH;             // row stride between a thread's rows
  constexpr int RPT = AD_ROWS / RS;               // rows per thread in P.V
  constexpr int EB = KV == KV_F16 ? 2 : 1;        // bytes per element
  static_assert(KPT >= 1 && VPT >= 1 && RPT >= 1, "tile shape");

  __shared__ __align__(16) float q_s[AD_ROWS][D];
  __shared__ float s_s[AD_ROWS][T];
  __shared__ __align__(16) __half v_s[T][D];
  __shared__ int pages[AD_PMAX / AD_MIN_BS + 2];
  __shared__ float m_s[AD_ROWS], l_s[AD_ROWS], alpha_s[AD_ROWS];
  __shared__ int qpos_s[AD_ROWS];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int b = blockIdx.z, chunk = blockIdx.y % a.nchunks, kvh = blockIdx.y / a.nchunks, p = blockIdx.x;
  const int qs = a.qsl[b], ql = a.qsl[b + 1] - qs, ctx = a.seq_lens[b];
  const int r0 = chunk * AD_ROWS, rows_total = ql * a.group;
  if (r0 >= rows_total) return;
  const int R = min(AD_ROWS, rows_total - r0);
  const int lo = a.window > 0 ? max(0, ctx - ql - a.window + 1) : 0;
  const int pstart = lo + p * a.part, pend = min(pstart + a.part, ctx);
  const int qi_min = r0 / a.group, qi_max = (r0 + R - 1) / a.group;
  const int clo = a.window > 0 ? max(0, ctx - ql + qi_min - a.window + 1) : 0;
  const int kstart = max(pstart, clo), kend = min(pend, ctx - ql + qi_max + 1);
  const int bs = 1 << a.bs_shift;

  // Rows of this block: token, query head; an empty partition still writes its (empty) partials.
  if (kstart >= kend) {
    if (a.nparts > 1) {
      for (int i = tid; i < R * D; i += AD_THREADS) {
        const int r = r0 + i / D, tok = qs + r / a.group, h = kvh * a.group + r % a.group;
        const i64 row = ((i64)p * a.n_tokens + tok) * a.hq + h;
        a.part_o[row * D + i % D] = 0.f;
        if (i % D == 0) {
          a.part_ml[row * 2] = -INFINITY;
          a.part_ml[row * 2 + 1] = 0.f;
        }
      }
    }
    return;
  }
  for (int i = tid; i < AD_ROWS * D / 8; i += AD_THREADS) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    float f[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (r < R) {
      const int rr = r0 + r;
      load_vec<8>(a.q + (i64)(qs + rr / a.group) * a.q_stride + (i64)(kvh * a.group + rr % a.group) * D + c, f);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) q_s[r][c + j] = f[j] * a.qk_scale;
  }
  const int* bt = a.block_tables + (i64)b * a.bt_stride;
  if (tid < AD_ROWS) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.f;
    qpos_s[tid] = ctx - ql + (r0 + tid) / a.group;
  }

  const i64 row_bytes = (i64)a.hk * D * EB;  // one cache slot (all KV heads)
  const i64 head_off = (i64)kvh * D * EB;
  int first_page = 0, seg_end = 0;
  auto slot_ptr = [&](const unsigned char* base, int kp) -> const uint4* {
    const int pg = pages[(kp >> a.bs_shift) - first_page];
    return reinterpret_cast<const uint4*>(base + ((i64)pg * bs + (kp & (bs - 1))) * row_bytes + head_off);
  };
  uint4 kreg[KPT], vreg[VPT];
  auto load_tile = [&](int t0) {
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
      const int kp = t0 + i * (4 * KPW) + warp * KPW + lane / L;
      kreg[i] = kp < seg_end ? slot_ptr(a.kc, kp)[lane % L] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int c = tid + i * AD_THREADS, kp = t0 + c / L;
      vreg[i] = kp < seg_end ? slot_ptr(a.vc, kp)[c % L] : make_uint4(0, 0, 0, 0);
    }
  };

  const int ch = tid % CH, rb = tid / CH;
  float acc[RPT][8];
#pragma unroll
  for (int k = 0; k < RPT; ++k)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[k][j] = 0.f;

  // Segments of at most AD_PMAX keys: page ids staged once per segment, reused by every tile.
  for (int seg = kstart; seg < kend; seg += AD_PMAX) {
  seg_end = min(seg + AD_PMAX, kend);
  first_page = seg >> a.bs_shift;
  __syncthreads();
  for (int i = tid, n = ((seg_end - 1) >> a.bs_shift) - first_page + 1; i < n; i += AD_THREADS)
    pages[i] = bt[first_page + i];
  __syncthreads();
  load_tile(seg);
  for (int t0 = seg; t0 < seg_end; t0 += T) {
    // V tile -> shared memory as FP16.
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int c = tid + i * AD_THREADS, kt = c / L, col = (c % L) * E;
      if constexpr (KV == KV_F16) {
        *reinterpret_cast<uint4*>(&v_s[kt][col]) = vreg[i];
      } else {
        uint4 x, y;
        fp8x16_to_half<KV>(vreg[i], x, y);
        *reinterpret_cast<uint4*>(&v_s[kt][col]) = x;
        *reinterpret_cast<uint4*>(&v_s[kt][col + 8]) = y;
      }
    }
    // Scores: each group of L lanes owns one key; dot with every row, reduce over the group.
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
      const int kt = i * (4 * KPW) + warp * KPW + lane / L, kp = t0 + kt;
      float kf[E];
      if constexpr (KV == KV_F16) {
        Half8 h;
        h.u = kreg[i];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 t = __half22float2(h.h2[j]);
          kf[2 * j] = t.x;
          kf[2 * j + 1] = t.y;
        }
      } else {
        uint4 x, y;
        fp8x16_to_half<KV>(kreg[i], x, y);
        const unsigned int w[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float2 t = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
          kf[2 * j] = t.x;
          kf[2 * j + 1] = t.y;
        }
      }
      const float* qrow = &q_s[0][(lane % L) * E];
#pragma unroll 1
      for (int r = 0; r < R; ++r) {
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < E; j += 4) {
          const float4 qv = *reinterpret_cast<const float4*>(qrow + r * D + j);
          s = fmaf(qv.x, kf[j], s);
          s = fmaf(qv.y, kf[j + 1], s);
          s = fmaf(qv.z, kf[j + 2], s);
          s = fmaf(qv.w, kf[j + 3], s);
        }
#pragma unroll
        for (int o = L / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane % L == 0) {
          const int qp = qpos_s[r];
          const bool ok = kp < seg_end && kp <= qp && (a.window <= 0 || kp > qp - a.window);
          if (a.soft_cap > 0.f) s = a.soft_cap * tanhf(s / a.soft_cap) * 1.4426950408889634f;
          s_s[r][kt] = ok ? s : -INFINITY;
        }
      }
    }
    __syncthreads();
    if (t0 + T < seg_end) load_tile(t0 + T);  // next tile's loads fly during softmax and P.V
    // Online softmax, one warp per row.
    for (int r = warp; r < R; r += 4) {
      float mx = -INFINITY;
      for (int t = lane; t < T; t += 32) mx = fmaxf(mx, s_s[r][t]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_old = m_s[r], m_new = fmaxf(m_old, mx);
      float sum = 0.f;
      for (int t = lane; t < T; t += 32) {
        const float e = m_new == -INFINITY ? 0.f : exp2f(s_s[r][t] - m_new);
        s_s[r][t] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        const float alpha = m_new == -INFINITY ? 1.f : exp2f(m_old - m_new);
        alpha_s[r] = alpha;
        l_s[r] = l_s[r] * alpha + sum;
        m_s[r] = m_new;
      }
    }
    __syncthreads();
    // P.V: each thread owns 8 columns of RPT rows.
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      const int r = rb + k * RS;
      const float al = r < R ? alpha_s[r] : 1.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[k][j] *= al;
    }
#pragma unroll 4
    for (int t = 0; t < T; ++t) {
      float vf[8];
      load_vec<8>(&v_s[t][ch * 8], vf);
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        const int r = rb + k * RS;
        if (r < R) {
          const float pw = s_s[r][t];
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[k][j] = fmaf(pw, vf[j], acc[k][j]);
        }
      }
    }
    __syncthreads();
  }
  }

#pragma unroll
  for (int k = 0; k < RPT; ++k) {
    const int r = rb + k * RS;
    if (r >= R) continue;
    const int rr = r0 + r, tok = qs + rr / a.group, h = kvh * a.group + rr % a.group;
    const float l = l_s[r], inv = l > 0.f ? 1.f / l : 0.f;
    float o[8];
    if (a.nparts == 1) {
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = acc[k][j] * inv * a.v_mul;
      store_vec<8>(a.out + ((i64)tok * a.hq + h) * D + ch * 8, o);
    } else {
      const i64 row = ((i64)p * a.n_tokens + tok) * a.hq + h;
      float4* dst = reinterpret_cast<float4*>(a.part_o + row * D + ch * 8);
      dst[0] = make_float4(acc[k][0] * inv, acc[k][1] * inv, acc[k][2] * inv, acc[k][3] * inv);
      dst[1] = make_float4(acc[k][4] * inv, acc[k][5] * inv, acc[k][6] * inv, acc[k][7] * inv);
      if (ch == 0) {
        a.part_ml[row * 2] = m_s[r];
        a.part_ml[row * 2 + 1] = l;
      }
    }
  }
}

#define DECODE_ENTRY(NAME, D, KV)                                                                        \
  extern "C" __global__ void __launch_bounds__(AD_THREADS)                                               \
      NAME(__half* out, float* part_o, float* part_ml, const __half* q, const unsigned char* kc,           \
           const unsigned char* vc, const int* block_tables, const int* seq_lens, const int* qsl,         \
           i64 q_stride, int n_tokens, int hq, int hk, int group, int bs_shift, int bt_stride, int window, \
           int nparts, int part, int nchunks, float qk_scale, float soft_cap, float v_mul) {              \
    const DecodeArgs a{out, part_o, part_ml, q, kc, vc, block_tables, seq_lens, qsl, q_stride,            \
                       n_tokens, hq, hk, group, bs_shift, bt_stride, window, nparts, part, nchunks,        \
                       qk_scale, soft_cap, v_mul};                                                        \
    decode_body<D, KV>(a);                                                                               \
  }

DECODE_ENTRY(attn_decode_d64_f16, 64, KV_F16)
DECODE_ENTRY(attn_decode_d128_f16, 128, KV_F16)
DECODE_ENTRY(attn_decode_d256_f16, 256, KV_F16)
DECODE_ENTRY(attn_decode_d64_e4m3, 64, KV_E4M3)
DECODE_ENTRY(attn_decode_d128_e4m3, 128, KV_E4M3)
DECODE_ENTRY(attn_decode_d256_e4m3, 256, KV_E4M3)
DECODE_ENTRY(attn_decode_d64_e5m2, 64, KV_E5M2)
DECODE_ENTRY(attn_decode_d128_e5m2, 128, KV_E5M2)
DECODE_ENTRY(attn_decode_d256_e5m2, 256, KV_E5M2)

// Merge of the partitions' (o / l, m, l): grid (tokens, Hq), D threads (one column each).
// Partitions with l == 0 saw no visible key and weigh nothing.
extern "C" __global__ void __launch_bounds__(256) attn_reduce(__half* out, const float* part_o, const float* part_ml,
                                                              int n_tokens, int hq, int d, int nparts, float v_mul) {
  const i64 row = (i64)blockIdx.x * hq + blockIdx.y;
  const i64 pstride = (i64)n_tokens * hq;
  float m = -INFINITY;
  for (int p = 0; p < nparts; ++p) {
    const float2 ml = *reinterpret_cast<const float2*>(part_ml + (p * pstride + row) * 2);
    if (ml.y > 0.f) m = fmaxf(m, ml.x);
  }
  float acc = 0.f, wsum = 0.f;
  for (int p = 0; p < nparts; ++p) {
    const float2 ml = *reinterpret_cast<const float2*>(part_ml + (p * pstride + row) * 2);
    if (ml.y > 0.f) {
      const float w = ml.y * exp2f(ml.x - m);
      wsum += w;
      acc = fmaf(w, part_o[(p * pstride + row) * d + threadIdx.x], acc);
    }
  }
  out[row * d + threadIdx.x] = __float2half_rn(wsum > 0.f ? acc / wsum * v_mul : 0.f);
}
