// attention_decode_rd.cu: paged decode attention (one query token per request) with K and V going
// from global memory straight into tensor-core fragments (register-direct, as gemm_rd.cu does with
// the weights): no shared-memory round trip for K, V, S or P. sm_80+ (mma.sync m16n8k16 / m16n8k8);
// attention_ops admits it there for decode with a GQA group <= 8, else attention_decode.cu runs.
//
// Why: attention_decode.cu (the Volta kernel, wmma through shared memory) holds 242-255 registers at
// D 128 and is latency-bound at 8 warps per SM: 65-80% of copy with FP16 KV at >= 8K, 35-43% with
// FP8 (the same time for half the bytes). Here a warp is ~150 registers and its per-key work is a
// few MMAs and permutes, so enough warps stay resident to keep the KV reads in flight.
//
// Grid (1, Hk, requests * nparts), 128 threads; the host plans the partitions as for the Volta
// kernel (split_kv_plan; the fused merge is attention_flash.cuh's flash_split_merge, rows = the GQA
// heads of the KV head). A block owns one request, one KV head, one partition; its 4 warps take
// contiguous quarters of the partition in steps of 8 keys (absolute key multiples of 8; keys outside
// [kstart, kend) masked), each warp its own (m, l, O), merged through shared memory at the end.
// Lane (g = lane / 4, q = lane % 4):
//  * S[head][key] = Q K^T, m16n8k16 per 16 dims: A = Q (row g = head g of the group; rows 8..15
//    zero), B = K^T (column g = key t + g). The dims are permuted (a dot product does not care): lane
//    q's k positions of tile t = 2j + h are dims 32j + 8q + 4h + {0, 1 | 2, 3}, so its B registers are
//    the words of one 16-byte load of key g's dims [32j + 8q, +8) (FP8: 8 bytes, decoded), and Q's A
//    registers the same words of head g's row. S lands as c0 / c1 = S[head g][keys 2q, 2q + 1].
//  * Online softmax per head (log2 domain): the max over the step's 8 keys by two shuffles across
//    q; l is kept per lane and summed at the end.
//  * O^T[dim][head] += V^T P^T, m16n8k8 per 16 dims: B = P^T (column g = head g, keys 2q, 2q + 1:
//    exactly the lane's own c0 / c1, packed to FP16), A = V^T (rows = dims, k = keys 2q, 2q + 1):
//    lane g loads keys 2q and 2q + 1's dims [64i + 8g, +8) (i < D / 64; 16 / 8 bytes per load, 8
//    lanes per 128 / 64 contiguous bytes) and pairs the two keys' values per dim with one PRMT per
//    register. Lane dim list e' = 0 .. D/8 - 1 -> dim 64 (e' / 8) + 8g + e' % 8; tile mt's row g is
//    e' = mt, row g + 8 is e' = mt + D / 16. O^T's c0..c3 are heads 2q, 2q + 1 of those dims; the
//    rescale by alpha takes heads 2q, 2q + 1's alpha from lanes 4 (2q), 4 (2q + 1).
//  * Loads: NBUF register sets of steps (2 for FP16, 3 for FP8: about as many bytes in flight), a
//    set refilled once its step's math is done; page ids staged per warp in shared memory per
//    segment of RD_SEG absolute keys.
#include "attention_flash.cuh"

#define RD_SEG 512
#define RD_SEG_PAGES (RD_SEG / FA_MIN_BS + 1)

ONECAT_DEVICE void mma_16816_f32(float (&d)[4], unsigned a0, unsigned a2, unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));  // A rows 8..15 (heads 8..15) zero
#else
  __trap();  // sm_80+ only: attention_ops never launches these kernels below
#endif
}
ONECAT_DEVICE void mma_1688_f32(float (&d)[4], unsigned a0, unsigned a1, unsigned b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
#else
  __trap();
#endif
}

// One step's loads of a lane: K of key t + g (D / 32 pieces of 8 dims), V of keys t + 2q, t + 2q + 1
// (D / 64 pieces of 8 dims each). FP16: uint4 pieces; FP8: uint2 (8 bytes).
template <int KV> struct RdPiece { using T = uint2; };  // 8 FP8 bytes
template <> struct RdPiece<KV_F16> { using T = uint4; };  // 8 halves
template <int D, int KV>
struct RdStep {
  using P = typename RdPiece<KV>::T;
  P k[D / 32];
  P v[2][D / 64];
};

// A piece as 4 words of FP16 pairs (dims +0/1, +2/3, +4/5, +6/7).
template <int KV>
ONECAT_DEVICE void piece_words(const uint4& p, unsigned (&w)[4]) {
  w[0] = p.x; w[1] = p.y; w[2] = p.z; w[3] = p.w;
}
template <int KV>
ONECAT_DEVICE void piece_words(const uint2& p, unsigned (&w)[4]) {
  fp8x4_to_half2x2<KV>(p.x, w[0], w[1]);
  fp8x4_to_half2x2<KV>(p.y, w[2], w[3]);
}

template <int D, int KV>
__device__ __forceinline__ void decode_rd_body(const FlashArgs& a) {
  constexpr int EB = KV == KV_F16 ? 2 : 1, NBUF = KV == KV_F16 ? 2 : 3, NT = D / 16, NV = D / 64;
  using S = RdStep<D, KV>;
  using Piece = typename S::P;
  __shared__ int pages_s[4][RD_SEG_PAGES];
  __shared__ __align__(16) float o_s[4][8][D];
  __shared__ float m_s[4][8], l_s[4][8];

  pdl_launch_dependents();
  if (!a.meta_ready) pdl_wait();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  const int kvh = blockIdx.y, b = blockIdx.z / a.nparts, p = blockIdx.z % a.nparts;
  const int qs = a.qsl[b], ctx = a.seq_lens[b];
  const int lo = a.window > 0 ? max(0, ctx - a.window) : 0;
  const int part = flash_request_part(a, 32, ctx - lo);
  const int kstart = lo + p * part, kend = min(kstart + part, ctx);
  const int group = a.group;

  if (kstart >= kend) {  // nothing in this partition: empty partials (the fused merge counts them)
    pdl_wait();
    if (a.nparts > 1)
      for (int i = threadIdx.x; i < group * D; i += FA_THREADS) {
        const i64 row = ((i64)p * a.n_tokens + qs) * a.hq + kvh * group + i / D;
        a.part_o[row * D + i % D] = 0.f;
        if (i % D == 0) {
          a.part_ml[row * 2] = -INFINITY;
          a.part_ml[row * 2 + 1] = 0.f;
        }
      }
    return;
  }

  // This warp's steps: [s_lo, s_hi) of the partition's 8-key steps from kstart rounded down to 8.
  const int base = kstart & ~7, nsteps = (kend - base + 7) >> 3, per = (nsteps + 3) >> 2;
  const int s_lo = min(nsteps, warp * per), s_hi = min(nsteps, s_lo + per);
  const int* bt = a.block_tables + (i64)b * a.bt_stride;
  const int bs_mask = (1 << a.bs_shift) - 1;
  const i64 row_bytes = (i64)a.hk * D * EB;
  const unsigned char* kc = a.kc + (i64)kvh * D * EB;
  const unsigned char* vc = a.vc + (i64)kvh * D * EB;
  int* pages = pages_s[warp];
  int seg = -1, first_page = 0;
  auto stage = [&](int key) {  // page ids of the RD_SEG-key segment holding `key` (warp-uniform)
    __syncwarp();
    seg = key / RD_SEG;
    const int k0 = max(seg * RD_SEG, kstart), k1 = min((seg + 1) * RD_SEG, kend);
    first_page = k0 >> a.bs_shift;
    for (int i = lane, n = ((k1 - 1) >> a.bs_shift) - first_page + 1; i < n; i += 32) pages[i] = bt[first_page + i];
    __syncwarp();
  };
  auto key_off = [&](int key) -> i64 {
    return ((i64)pages[(key >> a.bs_shift) - first_page] * (bs_mask + 1) + (key & bs_mask)) * row_bytes;
  };
  auto load = [&](int step, S& r) {
    const int t = base + 8 * step;
    if (t / RD_SEG != seg) stage(max(t, kstart));
    const int kk = t + g, kv0 = t + 2 * q;
    const bool k_ok = kk >= kstart && kk < kend;
    const i64 ko = k_ok ? key_off(kk) : 0;
#pragma unroll
    for (int j = 0; j < D / 32; ++j)
      r.k[j] = k_ok ? *reinterpret_cast<const Piece*>(kc + ko + (32 * j + 8 * q) * EB) : Piece{};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int kv = kv0 + e;
      const bool ok = kv >= kstart && kv < kend;
      const i64 vo = ok ? key_off(kv) : 0;
#pragma unroll
      for (int i = 0; i < NV; ++i)
        r.v[e][i] = ok ? *reinterpret_cast<const Piece*>(vc + vo + (64 * i + 8 * g) * EB) : Piece{};
    }
  };

  // Steps whose keys all precede this step's token were written by earlier steps: with meta_ready
  // they load before waiting on the kernel ahead (the qkv projection writing the new token's K/V).
  const int ready_end = a.meta_ready ? ctx - 1 : kstart;
  S buf[NBUF];
#pragma unroll
  for (int u = 0; u < NBUF; ++u)
    if (s_lo + u < s_hi && base + 8 * (s_lo + u + 1) <= ready_end) load(s_lo + u, buf[u]);
  pdl_wait();
#pragma unroll
  for (int u = 0; u < NBUF; ++u)
    if (s_lo + u < s_hi && base + 8 * (s_lo + u + 1) > ready_end) load(s_lo + u, buf[u]);

  // Q's A registers: head g's dims [32j + 8q, +8) (zero past the group)
  unsigned qa[D / 32][4];
  {
    const __half* qrow = a.q + (i64)qs * a.q_stride + (i64)(kvh * group + g) * D;
#pragma unroll
    for (int j = 0; j < D / 32; ++j) {
      const uint4 v = g < group ? *reinterpret_cast<const uint4*>(qrow + 32 * j + 8 * q) : make_uint4(0, 0, 0, 0);
      qa[j][0] = v.x; qa[j][1] = v.y; qa[j][2] = v.z; qa[j][3] = v.w;
    }
  }
  float o[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
  float m_run = -INFINITY, l_run = 0.f;

  for (int s0 = s_lo; s0 < s_hi; s0 += NBUF) {
#pragma unroll
    for (int u = 0; u < NBUF; ++u) {
      const int step = s0 + u;
      if (step >= s_hi) break;
      const int t = base + 8 * step;
      // S = Q K^T: 8 keys x the group's heads
      float sc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int j = 0; j < D / 32; ++j) {
        unsigned w[4];
        piece_words<KV>(buf[u].k[j], w);
        mma_16816_f32(sc, qa[j][0], qa[j][1], w[0], w[1]);
        mma_16816_f32(sc, qa[j][2], qa[j][3], w[2], w[3]);
      }

      // online softmax of head g over keys t + 2q, t + 2q + 1
      float x[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v = sc[e] * a.qk_scale;
        if (a.soft_cap > 0.f) v = a.soft_cap * tanhf(v / a.soft_cap) * FA_LOG2E;
        const int kp = t + 2 * q + e;
        x[e] = kp >= kstart && kp < kend ? v : -INFINITY;
      }
      float mx = fmaxf(x[0], x[1]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_run, mx);
      const float alpha = m_new == -INFINITY ? 1.f : exp2f(m_run - m_new);
      const float p0 = m_new == -INFINITY ? 0.f : exp2f(x[0] - m_new);
      const float p1 = m_new == -INFINITY ? 0.f : exp2f(x[1] - m_new);
      l_run = l_run * alpha + p0 + p1;
      m_run = m_new;
      const float al0 = __shfl_sync(0xffffffffu, alpha, 8 * q), al1 = __shfl_sync(0xffffffffu, alpha, 8 * q + 4);
      const __half2 ph = __floats2half2_rn(p0, p1);
      const unsigned pb = *reinterpret_cast<const unsigned*>(&ph);
      // O^T = O^T alpha + V^T P^T
      unsigned vw[2][NV][4];
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int i = 0; i < NV; ++i) piece_words<KV>(buf[u].v[e][i], vw[e][i]);
#pragma unroll
      for (int mt = 0; mt < NT; ++mt) {
        const int e0 = mt, e1 = mt + NT;  // lane dim entries of rows g, g + 8
        const unsigned sel0 = (e0 & 1) ? 0x7632u : 0x5410u, sel1 = (e1 & 1) ? 0x7632u : 0x5410u;
        const unsigned a0 = __byte_perm(vw[0][e0 / 8][(e0 % 8) / 2], vw[1][e0 / 8][(e0 % 8) / 2], sel0);
        const unsigned a1 = __byte_perm(vw[0][e1 / 8][(e1 % 8) / 2], vw[1][e1 / 8][(e1 % 8) / 2], sel1);
        o[mt][0] *= al0; o[mt][1] *= al1; o[mt][2] *= al0; o[mt][3] *= al1;
        mma_1688_f32(o[mt], a0, a1, pb);
      }
      if (step + NBUF < s_hi) load(step + NBUF, buf[u]);  // in flight during the next NBUF - 1 steps
    }
  }

  // Merge the 4 warps: (m, l) per head, O per head and dim through shared memory.
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
  if (q == 0) {
    m_s[warp][g] = m_run;
    l_s[warp][g] = l_run;
  }
#pragma unroll
  for (int mt = 0; mt < NT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {  // row g (e' = mt) and row g + 8 (e' = mt + NT)
      const int e = mt + r * NT, dim = 64 * (e / 8) + 8 * g + e % 8;
      o_s[warp][2 * q][dim] = o[mt][2 * r];
      o_s[warp][2 * q + 1][dim] = o[mt][2 * r + 1];
    }
  __syncthreads();
  for (int i = threadIdx.x; i < group * (D / 2); i += FA_THREADS) {
    const int h = i / (D / 2), c = (i % (D / 2)) * 2;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < 4; ++w) M = fmaxf(M, m_s[w][h]);
    float L = 0.f, o0 = 0.f, o1 = 0.f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      if (m_s[w][h] == -INFINITY) continue;
      const float sc = exp2f(m_s[w][h] - M);
      L += l_s[w][h] * sc;
      const float2 v = *reinterpret_cast<const float2*>(&o_s[w][h][c]);
      o0 += v.x * sc;
      o1 += v.y * sc;
    }
    const float inv = L > 0.f ? 1.f / L : 0.f;
    const i64 row = (i64)qs * a.hq + kvh * group + h;
    if (a.nparts == 1) {
      *reinterpret_cast<__half2*>(a.out + row * D + c) = __floats2half2_rn(o0 * inv * a.v_mul, o1 * inv * a.v_mul);
    } else {
      const i64 prow = (i64)p * a.n_tokens * a.hq + row;
      *reinterpret_cast<float2*>(a.part_o + prow * D + c) = make_float2(o0 * inv, o1 * inv);
      if (c == 0) {
        a.part_ml[prow * 2] = M;
        a.part_ml[prow * 2 + 1] = L;
      }
    }
  }
}

// Same arguments as attention_decode.cu's fused entries (nchunks is 1: the group's <= 8 heads are
// one row chunk of flash_split_merge's 16).
#define DECODE_RD_ENTRY(D, KV, NAME)                                                                    \
  extern "C" __global__ void __launch_bounds__(FA_THREADS, 3)                                          \
      NAME(__half* out, float* part_o, float* part_ml, int* counters, const __half* q,                 \
           const unsigned char* kc, const unsigned char* vc, const int* block_tables, const int* seq_lens, \
           const int* qsl, int meta_ready, i64 q_stride, int n_tokens, int hq, int hk, int group,      \
           int bs_shift, int bt_stride, int window, int nparts, int part, int nchunks, float qk_scale,  \
           float soft_cap, float v_mul) {                                                              \
    const FlashArgs a{out, part_o, part_ml, q, kc, vc, block_tables, seq_lens, qsl, meta_ready, q_stride, \
                      n_tokens, hq, hk, group, bs_shift, bt_stride, window, nparts, part, nchunks,      \
                      qk_scale, soft_cap, v_mul};                                                      \
    decode_rd_body<D, KV>(a);                                                                          \
    if (nparts > 1 && counters)                                                                        \
      flash_split_merge<D, 16>(out, part_o, part_ml, counters, qsl, n_tokens, hq, group, nparts, nchunks, \
                               v_mul);                                                                 \
  }
#define DECODE_RD_ENTRIES(D)                                \
  DECODE_RD_ENTRY(D, KV_F16, attn_decode_rd_d##D##_f16)     \
  DECODE_RD_ENTRY(D, KV_E4M3, attn_decode_rd_d##D##_e4m3)   \
  DECODE_RD_ENTRY(D, KV_E5M2, attn_decode_rd_d##D##_e5m2)
DECODE_RD_ENTRIES(64)
DECODE_RD_ENTRIES(128)
