// attention_decode_rd.cu: paged decode attention (one query token per request) with K and V going
// from global memory straight into tensor-core fragments (register-direct, as gemm_rd.cu does with
// the weights): no shared-memory round trip for K, V, S or P. sm_80+ (mma.sync m16n8k16);
// attention_ops admits it there for decode with a GQA group <= 8 and D 64 / 128 / 256, else
// attention_decode.cu (the Volta kernel) runs.
//
// Why: attention_decode.cu (wmma through shared memory) holds 242-255 registers at D 128 and is
// latency-bound at 8 warps per SM: on the H200 65-80% of copy with FP16 KV at >= 8K, 35-43% with FP8
// (the same time for half the bytes). Here a warp holds ~150 registers (160-164 with the fused merge;
// 3 blocks per SM) and its per-key work is a few MMAs, permutes and conversions (s15: FP16 78-99%,
// FP8 57-86% of copy per launch, 83-99% / 66-86% as a decode graph runs it,
// benchmarks/results/h200-2026-11-30-s15/).
//
// Grid (1, Hk, requests * nparts), 128 threads; the host plans the partitions as for the Volta
// kernel (split_kv_plan; the fused merge is attention_merge.cuh's flash_split_merge, rows = the GQA
// heads of the KV head). A block owns one request, one KV head, one partition; its 4 warps take
// (_w1 entries: one-warp blocks, 12 per SM, routed when the groups pass one wave of 4-warp blocks) contiguous
// quarters of the partition in steps of 16 keys (absolute multiples of 16; keys outside
// [kstart, kend) masked), each warp its own (m, l, O), merged through shared memory at the end. A
// step is two blocks of 8 keys (n = 0, 1: keys t + 8n ..). Lane (g = lane / 4, q = lane % 4):
//  * S^T[key][head] = K Q^T, m16n8k16 per 16 dims: A = K (row g = key t + g, row g + 8 = key
//    t + 8 + g: all 16 rows are keys), B = Q^T (column g = head g of the group; zero past it). The
//    dims are permuted (a dot product does not care): lane q's k positions of tile 2j + h are dims
//    32j + 8q + 4h + {0, 1 | 2, 3}, so its A registers are the words of one 16-byte load of keys g
//    and g + 8's dims [32j + 8q, +8) (FP8: 8 bytes, decoded), and Q's B registers the same words of
//    head g's row; the two halves h accumulate in two chains. S^T lands as c0 / c1 = keys t + g,
//    heads 2q, 2q + 1 and c2 / c3 = key t + 8 + g, the same heads.
//  * Online softmax per head (log2 domain), a lane tracking heads 2q, 2q + 1: m is a reference the
//    scores may pass by up to 2^8 (P stays <= 256 in FP16); only when some score passes it (a warp
//    vote; rare after the first steps) are the step's maxima taken (three shuffles across g) and O
//    and l rescaled. l is kept per lane and summed across g at the end.
//  * O^T[dim][head] += V^T P^T, m16n8k16 per 16 dims: B = P^T (column g = head g; k = keys 2q, 2q + 1
//    of block 0 and of block 1): the lane's P^T values (keys g | g + 8, heads 2q, 2q + 1) packed to
//    FP16 are two 8 x 8 blocks in fragment layout, transposed by movmatrix into exactly that operand.
//    A = V^T (rows = dims, k = the same keys): lane g loads keys t + 8n + 2q, + 1's dims
//    [64i + 8g, +8) (i < D / 64; 16 / 8 bytes per load, 8 lanes per 128 / 64 contiguous bytes) and
//    pairs the two keys' values per dim with one PRMT per register (hardware E4M3: the bytes paired
//    first, then one conversion). Lane dim list e' = 0 .. D/8 - 1 -> dim 64 (e' / 8) + 8g + e' % 8;
//    tile mt's row g is e' = mt, row g + 8 is e' = mt + D / 16. O^T's c0..c3 are heads 2q, 2q + 1 of
//    those dims: the lane's own heads, so a rescale needs no shuffle.
//  * FP8: E5M2 and (sm_80 / sm_86) E4M3 by attention_fp8.cuh's integer rules, E4M3 by the sm_89+
//    conversion instruction where there is one.
//  * Loads: NBUF register sets of steps (1 for FP16, 2 for FP8: 1-2 steps ahead; _deep 2 / 3), a set
//    refilled once its step's math is done; page ids staged per warp in shared memory per segment of RD_SEG
//    absolute keys, one per 8-key block (a block size is a power of 2 >= 8: the block is in one page).
//  * Entries: the route (4 warps; _w1 one-warp blocks; D 128 _deep), and for D 128, not routed: _trace
//    (per-block timestamps, tools/gpu/decode_trace.py).
//  * A/B on the H200 (tools/gpu/decode_rd_check.sh, decode_rd_ab.py --kernels): s13: 8-key steps
//    (P V by m16n8k8) 3-8% slower, one S chain ~1%, an unconditional rescale 1-5%, the integer E4M3
//    decode 15-19%, KV heads spread over a block's warps (2 or 4 per block) 2-35% slower, other
//    partition plans (2 / 4 / 6 blocks per SM) slower. s14: S = Q K^T (heads as the rows, 8 of 16
//    zero, max by shuffles every step) 1-3% slower than S^T; FP8 16-byte pieces 2-6% slower; K
//    refilled right after Q K^T no change; L2 prefetch 1-4 steps ahead 1-40% slower; FP8 with three
//    load sets (a few spills) 7-12% slower; K / V through a per-warp cp.async ring in shared memory
//    (FP8 4 steps, FP16 2; one register set) 7-15% slower at batch 4-16. s15 (against the trace's
//    imbalance between blocks): the warps' steps interleaved no change; a group's steps claimed one at a
//    time from a global counter 11-35% slower (a claim and a page-id load on every step's path);
//    partitions planned for 2 / 3 / 4 waves (the block scheduler balancing) 3-44% slower (one-warp
//    blocks up to 2.8x); FP8 with one load set and registers held to 128 for 4 blocks per SM 0-3%
//    slower. s20: steps inside [kstart, kend) without the key masks, P by ex2.approx, one 32 x 32 -> 64-bit
//    multiply-add per page: FP8 2-3% faster (E4M3 4 x 16K 41.0 -> 40.0 us, 16 x 8K 74.4 -> 72.1); lost:
//    K / V loads by ld.global.nc.L1::no_allocate (FP8 up to 12% slower), four S chains (level), FP8 with
//    three sets at 2 blocks per SM for few groups (1.5-2.5% slower; routed for many: _deep below).
//    s21 (graphed, host-written metadata; benchmarks/results/h200-2026-12-01-s21/): more bytes before
//    the wait lose: the next steps by prefetch.global.L2 3-10% slower, staged into shared memory by
//    cp.async level to 4% slower (they compete with the previous call's tail); the partitions as thread-
//    block clusters merged in distributed shared memory: a GPC holds whole clusters (28 of 12 blocks on
//    the H200, 32 needed at batch 4), cut to fit 5-7% slower, 9% faster at batch 1 x 512 but 11% slower
//    at 1 x 1024. s22: Q in shared memory instead of 16 registers (D 128 FP8) 1-3% slower, and so three
//    FP8 load sets at 3 blocks per SM (168 registers, no spills) 3-6% slower. s44 (H100, graphed,
//    benchmarks/results/h200-2026-12-06-s44): s21's shared-memory staging issued right after the wait instead
//    (FP8 2 steps, FP16 1, computed after the loop) level to 6% slower on every row.
#include "attention_flash.cuh"

#define RD_SEG 512
#define RD_SEG_PAGES (RD_SEG / FA_MIN_BS + 1)
#define RD_LAZY_LOG2 8.f  // lazy rescale: scores may pass the reference max by 2^8 before O is rescaled

// One step's loads of a lane (16 keys from t): K of keys t + 8n + g (n < 2; D / 32 pieces of 8 dims),
// V of keys t + 8 (e / 2) + 2q + e % 2 (e < 4; D / 64 pieces of 8 dims each). FP16: uint4 pieces;
// FP8: uint2 (8 bytes).
template <int KV> struct RdPiece { using T = uint2; };  // 8 FP8 bytes
template <> struct RdPiece<KV_F16> { using T = uint4; };  // 8 halves
#define RD_KS 16  // keys per step
template <bool B> struct RdMasked { static constexpr bool value = B; };  // a step's keys masked or not
template <int D, int KV>
struct RdStep {
  using P = typename RdPiece<KV>::T;
  P k[RD_KS / 8][D / 32];
  P v[RD_KS / 4][D / 64];
};

// E4M3 on sm_89+: cvt.rn.f16x2.e4m3x2 (the value itself; attention_fp8.cuh's integer decode gives
// value * 2^-8, which the host folds into the scales: FP8_E4M3_UNIT, taken back out by the entries)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define RD_E4M3_HW 1
#else
#define RD_E4M3_HW 0
#endif
// 4 FP8 bytes (byte 0 first) -> 2 FP16 pairs (element 0 in the low half of lo)
template <int KV>
ONECAT_DEVICE void rd_fp8x4(unsigned w, unsigned& lo, unsigned& hi) {
#if RD_E4M3_HW
  if constexpr (KV == KV_E4M3) {
    asm("{.reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;}"
        : "=r"(lo), "=r"(hi) : "r"(w));
    return;
  }
#endif
  fp8x4_to_half2x2<KV>(w, lo, hi);
}
// A piece as 4 words of FP16 pairs (dims +0/1, +2/3, +4/5, +6/7).
template <int KV>
ONECAT_DEVICE void piece_words(const uint4& p, unsigned (&w)[4]) {
  w[0] = p.x; w[1] = p.y; w[2] = p.z; w[3] = p.w;
}
template <int KV>
ONECAT_DEVICE void piece_words(const uint2& p, unsigned (&w)[4]) {
  rd_fp8x4<KV>(p.x, w[0], w[1]);
  rd_fp8x4<KV>(p.y, w[2], w[3]);
}
// V^T's A registers of lane dim entries e' = 0 .. D/8 - 1 for keys (x, y) = (2q, 2q + 1) of an 8-key
// block: each the pair (x, y) at dim 64 (e' / 8) + 8g + e' % 8. Hardware E4M3: the bytes paired first,
// one conversion per register; else the pieces decoded, then paired with one PRMT per register.
template <int D, int KV, class P>
ONECAT_DEVICE void v_pairs(const P (&x)[D / 64], const P (&y)[D / 64], unsigned (&av)[D / 8]) {
  if constexpr (KV == KV_E4M3 && RD_E4M3_HW) {
#pragma unroll
    for (int i = 0; i < D / 64; ++i)
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        const unsigned a = w ? x[i].y : x[i].x, b = w ? y[i].y : y[i].x;
        rd_fp8x4<KV>(__byte_perm(a, b, 0x5140), av[8 * i + 4 * w], av[8 * i + 4 * w + 1]);
        rd_fp8x4<KV>(__byte_perm(a, b, 0x7362), av[8 * i + 4 * w + 2], av[8 * i + 4 * w + 3]);
      }
  } else {
    unsigned xw[D / 64][4], yw[D / 64][4];
#pragma unroll
    for (int i = 0; i < D / 64; ++i) {
      piece_words<KV>(x[i], xw[i]);
      piece_words<KV>(y[i], yw[i]);
    }
#pragma unroll
    for (int e = 0; e < D / 8; ++e)
      av[e] = __byte_perm(xw[e / 8][(e % 8) / 2], yw[e / 8][(e % 8) / 2], (e & 1) ? 0x7632u : 0x5410u);
  }
}

// Trace entries (_trace, tools/gpu/decode_trace.py; common.cuh block_trace) record at point i: 0 entry,
// 1 after the wait and the first loads, 2 warp 0's first step done, 3 warp 0's loop done, 4 all warps
// done, 5 partials written, 6 block end (after the fused merge's count, or its merge); row[7] has the
// empty flag (1 << 16); row[15] = clock64 when the merge's count has resolved (flash_split_merge).

// W warps per block (4: they split the partition's keys and merge; 1: a block is one warp); tr: trace;
// part_mul: the factor on a split partition's partial O (see DECODE_RD_ENTRY). Returns the request's
// token (qs) for the fused merge.
template <int D, int KV, int NBUF, int W>
__device__ __forceinline__ int decode_rd_body(const FlashArgs& a, unsigned long long* tr = nullptr,
                                              float part_mul = 1.f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // mma.sync m16n8k16 / movmatrix: attention_ops admits this kernel from sm_80 only, so the sm_70
  return 0;  // build is a trap (the body there would prove nothing and only cost the CI's compile)
#else
  static_assert(W == 1 || W == 4, "warps per block");
  constexpr int EB = KV == KV_F16 ? 2 : 1, NT = D / 16, NV = D / 64, KS = RD_KS, NB = KS / 8;
  constexpr int W_LOG2 = W == 4 ? 2 : 0;  // the warp split as a shift (signed /: other SASS than timed)
  using S = RdStep<D, KV>;
  using Piece = typename S::P;
  __shared__ int pages_s[W][RD_SEG_PAGES];
  __shared__ __align__(16) float o_s[W][8][D];
  __shared__ float m_s[W][8], l_s[W][8];

  block_trace(tr, 0);
  pdl_launch_dependents();
  if (!a.meta_ready) pdl_wait();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  const int kvh = blockIdx.y, b = blockIdx.z / a.nparts, p = blockIdx.z % a.nparts;
  const int* bt = a.block_tables + (i64)b * a.bt_stride;
  // This warp's first of a partition's ns KS-key steps (contiguous quarters; ns when it has none)
  auto warp_first_step = [&](int ns) { return min(ns, warp * ((ns + W - 1) >> W_LOG2)); };
  // The pages of the RD_SEG-key segment sg within a partition [ks, ke): the first page, returns the count
  auto segment_pages = [&](int sg, int ks, int ke, int& fp) {
    const int k0 = max(sg * RD_SEG, ks), k1 = min((sg + 1) * RD_SEG, ke);
    fp = k0 >> a.bs_shift;
    return ((k1 - 1) >> a.bs_shift) - fp + 1;
  };
  // The first segment this warp stages (below) for a partition [ks, ke): its segment, first page and
  // page count; false when the warp has no step there.
  auto first_segment = [&](int ks, int ke, int& sg, int& fp, int& n) {
    const int bse = ks & ~(KS - 1), ns = (ke - bse + KS - 1) / KS, sl = warp_first_step(ns);
    sg = max(bse + KS * sl, ks) / RD_SEG;
    n = segment_pages(sg, ks, ke, fp);
    return sl < ns;
  };
  // Speculative staging: the page ids of that segment for the partition the plan gives a request that
  // fills it (keys [p part, (p + 1) part), no window: the long-context case), loaded with the request's
  // length instead of after it (one dependent round trip less before the first K / V loads); used
  // below only if the request's partition is exactly that one.
  const int sp_ks = p * a.part;
  int sp_seg, sp_first, sp_n, sp_page = 0;
  const bool sp = a.window <= 0 && first_segment(sp_ks, sp_ks + a.part, sp_seg, sp_first, sp_n) && sp_n <= 32;
  if (sp && lane < sp_n && sp_first + lane < a.bt_stride) sp_page = bt[sp_first + lane];
  const int qs = a.qsl[b], ctx = a.seq_lens[b];
  const int lo = a.window > 0 ? max(0, ctx - a.window) : 0;
  const int part = flash_request_part(a, 4 * KS, ctx - lo);
  const int kstart = lo + p * part, kend = min(kstart + part, ctx);
  const int group = a.group;

  if (kstart >= kend) {  // nothing in this partition: empty partials (the fused merge counts them)
    pdl_wait();
    flash_empty_partials<D, true>(a, p, qs, kvh, 0, group, threadIdx.x, 32 * W);
    if (tr && threadIdx.x == 0) block_trace_row(tr)[7] |= 1u << 16;
    return qs;
  }

  // This warp's steps [s_lo, s_hi) of the partition's KS-key steps from kstart rounded down to KS
  const int base = kstart & ~(KS - 1), nsteps = (kend - base + KS - 1) / KS, per = (nsteps + W - 1) >> W_LOG2;
  const int s_lo = warp_first_step(nsteps), s_hi = min(nsteps, s_lo + per);
  const int bs_mask = (1 << a.bs_shift) - 1;
  // a token's row of all KV heads and a page of them in bytes (32-bit: a page is at most a few MB)
  const unsigned row_bytes = (unsigned)a.hk * D * EB, page_bytes = row_bytes << a.bs_shift;
  int* pages = pages_s[warp];
  int seg = -1, first_page = 0;
  auto stage = [&](int key) {  // page ids of the RD_SEG-key segment holding `key` (warp-uniform)
    __syncwarp();
    seg = key / RD_SEG;
    for (int i = lane, n = segment_pages(seg, kstart, kend, first_page); i < n; i += 32) pages[i] = bt[first_page + i];
    __syncwarp();
  };
  if (sp && kstart == sp_ks && kend == sp_ks + a.part) {  // the speculation holds: stage() would load these
    if (lane < sp_n) pages[lane] = sp_page;
    seg = sp_seg;
    first_page = sp_first;
    __syncwarp();
  }
  // An 8-key block (t multiple of 8) lies in one page (block size >= 8, a power of 2): one page id per
  // block; the lane's K piece g rows past the block's first key, its V pieces 2q and 2q + 1 rows past it.
  const unsigned char* kc = a.kc + (i64)kvh * D * EB + g * row_bytes + (8 * q) * EB;
  const unsigned char* vc = a.vc + (i64)kvh * D * EB + (2 * q) * row_bytes + (8 * g) * EB;
  pin_pointer(kc);  // held, not rebuilt from the lane id per step
  pin_pointer(vc);
  // A step wholly inside [kstart, kend) (all but a partition's first and last at most) loads and
  // computes without the key masks: load / step_math take RdMasked<false> there, RdMasked<true> else.
  auto interior = [&](int step) {
    const int t0 = base + KS * step;
    return t0 >= kstart && t0 + KS <= kend;
  };
  auto load = [&](auto masked, int step, S& r) {
    constexpr bool MASKED = decltype(masked)::value;
    const int t0 = base + KS * step;
    if (t0 / RD_SEG != seg) stage(max(t0, kstart));  // KS divides RD_SEG: a step is in one segment
#pragma unroll
    for (int n = 0; n < NB; ++n) {
      const int t = t0 + 8 * n;
      // one 32 x 32 -> 64-bit multiply-add per block (was three 64-bit multiplies' worth)
      const unsigned page = pages[((MASKED ? max(t, kstart) : t) >> a.bs_shift) - first_page];
      const unsigned long long off = (unsigned long long)page * page_bytes + (unsigned)(t & bs_mask) * row_bytes;
      const bool k_ok = !MASKED || (t + g >= kstart && t + g < kend);
      const unsigned char* kp = kc + off;
#pragma unroll
      for (int j = 0; j < D / 32; ++j)
        r.k[n][j] = k_ok ? *reinterpret_cast<const Piece*>(kp + 32 * j * EB) : Piece{};
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool ok = !MASKED || (t + 2 * q + e >= kstart && t + 2 * q + e < kend);
        const unsigned char* vp = vc + off + e * row_bytes;
#pragma unroll
        for (int i = 0; i < NV; ++i)
          r.v[2 * n + e][i] = ok ? *reinterpret_cast<const Piece*>(vp + 64 * i * EB) : Piece{};
      }
    }
  };

  // Steps whose keys all precede this step's token were written by earlier steps: with meta_ready
  // they load before waiting on the kernel ahead (the qkv projection writing the new token's K/V).
  const int ready_end = a.meta_ready ? ctx - 1 : kstart;
  S buf[NBUF];
#pragma unroll
  for (int u = 0; u < NBUF; ++u)
    if (s_lo + u < s_hi && base + KS * (s_lo + u + 1) <= ready_end) load(RdMasked<true>{}, s_lo + u, buf[u]);
  pdl_wait();
#pragma unroll
  for (int u = 0; u < NBUF; ++u)
    if (s_lo + u < s_hi && base + KS * (s_lo + u + 1) > ready_end) load(RdMasked<true>{}, s_lo + u, buf[u]);
  block_trace(tr, 1);

  // Q's A registers: head g's dims [32j + 8q, +8) (zero past the group). Q_SHARED (D 256 with an FP16
  // cache, whose one load set is 128 registers): the block's Q rows in shared memory instead, read back
  // per step (8 LDS.128; a row padded by 64 bytes so a quarter warp's 8 reads cover the 32 banks once).
  constexpr bool Q_SHARED = D == 256 && KV == KV_F16;
  constexpr int QJ = Q_SHARED ? 1 : D / 32;
  unsigned qa[QJ][4];
  __shared__ __align__(16) uint4 q_s[Q_SHARED ? 8 : 1][D / 8 + 4];
  {
    if constexpr (Q_SHARED) {
      const __half* q0 = a.q + (i64)qs * a.q_stride + (i64)(kvh * group) * D;
      for (int i = threadIdx.x; i < 8 * (D / 8); i += 32 * W) {
        const int h = i / (D / 8), c = i % (D / 8);
        q_s[h][c] = h < group ? *reinterpret_cast<const uint4*>(q0 + (i64)h * D + 8 * c) : make_uint4(0, 0, 0, 0);
      }
      __syncthreads();
    } else {
      const __half* qrow = a.q + (i64)qs * a.q_stride + (i64)(kvh * group + g) * D;
#pragma unroll
      for (int j = 0; j < D / 32; ++j) {
        const uint4 v = g < group ? *reinterpret_cast<const uint4*>(qrow + 32 * j + 8 * q) : make_uint4(0, 0, 0, 0);
        qa[j][0] = v.x; qa[j][1] = v.y; qa[j][2] = v.z; qa[j][3] = v.w;
      }
    }
  }
  // Q's words for dims [32j + 8q, +8) of head g: registers, or (Q_SHARED) a volatile shared load per
  // step, so the compiler cannot hoist the 32 registers back out of the loop
  auto q_words = [&](int j, unsigned (&w)[4]) {
    if constexpr (Q_SHARED) {
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                   : "r"((unsigned)__cvta_generic_to_shared(&q_s[g][4 * j + q])));
    } else {
      w[0] = qa[j][0]; w[1] = qa[j][1]; w[2] = qa[j][2]; w[3] = qa[j][3];
    }
  };
  float o[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
  // m_run: the reference maxima of the lane's heads 2q, 2q + 1 (scores may pass them by up to
  // RD_LAZY_LOG2: P <= 2^8 in FP16); O and l are rescaled only when some score passes its head's (warp
  // vote: rare after the first steps); l_run: the lane's sums, added across g at the end
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f}, alpha[2];
  float m_thr[2] = {-INFINITY, -INFINITY};  // m_run + RD_LAZY_LOG2, updated with m_run
  const bool capped = a.soft_cap > 0.f;

  // One step's math on register set r (keys t0 ..)
  auto step_math = [&](auto masked, const S& r, int t0) {
    constexpr bool MASKED = decltype(masked)::value;
    unsigned pb[NB];  // B = P^T of block n: P[head g][keys 8n + 2q, + 1]
    // S^T = K Q^T, m16n8k16 per 16 dims: A = K (row g = key t0 + g: block 0's load, row g + 8 = key
    // t0 + 8 + g: block 1's), B = Q^T (column g = head g); two chains (the dims' halves h). S^T
    // lands as c0, c1 = (key g, heads 2q, 2q + 1), c2, c3 = (key g + 8, the same heads).
    float sc[2][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) sc[0][i] = sc[1][i] = 0.f;
#pragma unroll
    for (int j = 0; j < D / 32; ++j) {
      unsigned w0[4], w1[4], qw[4];
      piece_words<KV>(r.k[0][j], w0);
      piece_words<KV>(r.k[1][j], w1);
      q_words(j, qw);
      mma_16816(sc[0], w0[0], w1[0], w0[1], w1[1], qw[0], qw[1]);
      mma_16816(sc[1], w0[2], w1[2], w0[3], w1[3], qw[2], qw[3]);
    }
    // online softmax of heads 2q + (i & 1) over keys t0 + g + 8 (i >> 1) (x index i); the lane's
    // two heads' reference maxima m_run[0], m_run[1] (the same in every lane of a q)
    float x[4];
    bool over = false;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = (sc[0][i] + sc[1][i]) * a.qk_scale;
      if (capped) v = a.soft_cap * tanhf(v / a.soft_cap) * FA_LOG2E;
      const int kp = t0 + g + 8 * (i >> 1);
      x[i] = !MASKED || (kp >= kstart && kp < kend) ? v : -INFINITY;
      over |= x[i] > m_thr[i & 1];
    }
    if (__any_sync(0xffffffffu, over)) {  // some head's max passed its reference: the step's maxima
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = fmaxf(x[h], x[h + 2]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        const float m_new = fmaxf(m_run[h], mx);
        alpha[h] = m_new == -INFINITY ? 1.f : ex2_approx(m_run[h] - m_new);  // m_run -inf: 0
        l_run[h] *= alpha[h];
        m_run[h] = m_new;
        m_thr[h] = m_new + RD_LAZY_LOG2;
      }
#pragma unroll
      for (int mt = 0; mt < NT; ++mt) {  // O^T's c0..c3: heads 2q, 2q + 1
        o[mt][0] *= alpha[0]; o[mt][1] *= alpha[1]; o[mt][2] *= alpha[0]; o[mt][3] *= alpha[1];
      }
    }
    float p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // unmasked, every x is finite and so (after the vote above) every m_run
      p[i] = MASKED && x[i] == -INFINITY ? 0.f : ex2_approx(x[i] - m_run[i & 1]);
      l_run[i & 1] += p[i];
    }
    // P^T's 8 x 8 blocks (keys g | g + 8, heads 2q, 2q + 1) transposed: P[head g][keys 2q, 2q + 1]
    __half2 ph = __floats2half2_rn(p[0], p[1]);
    pb[0] = movmatrix_trans(*reinterpret_cast<const unsigned*>(&ph));
    ph = __floats2half2_rn(p[2], p[3]);
    pb[1] = movmatrix_trans(*reinterpret_cast<const unsigned*>(&ph));
    // O^T += V^T P^T
    unsigned av[NB][D / 8];
#pragma unroll
    for (int n = 0; n < NB; ++n) v_pairs<D, KV>(r.v[2 * n], r.v[2 * n + 1], av[n]);
#pragma unroll
    for (int mt = 0; mt < NT; ++mt)  // lane dim entries mt (row g) and mt + NT (row g + 8); k = the blocks
      mma_16816(o[mt], av[0][mt], av[0][mt + NT], av[1][mt], av[1][mt + NT], pb[0], pb[1]);
  };
  for (int s0 = s_lo; s0 < s_hi; s0 += NBUF) {
#pragma unroll
    for (int u = 0; u < NBUF; ++u) {
      const int k = s0 + u;
      if (k >= s_hi) break;
      if (interior(k)) step_math(RdMasked<false>{}, buf[u], base + KS * k);
      else step_math(RdMasked<true>{}, buf[u], base + KS * k);
      if (k + NBUF < s_hi) {  // in flight during the next NBUF - 1 steps
        if (interior(k + NBUF)) load(RdMasked<false>{}, k + NBUF, buf[u]);
        else load(RdMasked<true>{}, k + NBUF, buf[u]);
      }
      if (k == s_lo) block_trace(tr, 2);
    }
  }
  block_trace(tr, 3);

  // Merge the W warps: (m, l) per head, O per head and dim through shared memory.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 4);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 8);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 16);
    if (g == 0) {
      m_s[warp][2 * q + h] = m_run[h];
      l_s[warp][2 * q + h] = l_run[h];
    }
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
  block_trace(tr, 4);
  const i64 row0 = (i64)qs * a.hq + kvh * group, prow0 = (i64)p * a.n_tokens * a.hq + row0;
  if (threadIdx.x < group) {  // head h's M, L and the warps' weights 2^(m_w - M) / L, in place of m_s
    const int h = threadIdx.x;
    float M = -INFINITY, L = 0.f, sc[W];
#pragma unroll
    for (int w = 0; w < W; ++w) M = fmaxf(M, m_s[w][h]);
#pragma unroll
    for (int w = 0; w < W; ++w) {
      sc[w] = m_s[w][h] == -INFINITY ? 0.f : exp2f(m_s[w][h] - M);  // a warp that saw no key: 0
      L += l_s[w][h] * sc[w];
    }
    const float inv = (L > 0.f ? 1.f / L : 0.f) * (a.nparts == 1 ? a.v_mul : part_mul);
#pragma unroll
    for (int w = 0; w < W; ++w) m_s[w][h] = sc[w] * inv;
    if (a.nparts > 1) {
      a.part_ml[(prow0 + h) * 2] = M;
      a.part_ml[(prow0 + h) * 2 + 1] = L;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * (D / 2); i += 32 * W) {  // O = the warps' O weighted
    const int h = i / (D / 2), c = (i % (D / 2)) * 2;
    float o0 = 0.f, o1 = 0.f;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float2 v = *reinterpret_cast<const float2*>(&o_s[w][h][c]);
      o0 += v.x * m_s[w][h];
      o1 += v.y * m_s[w][h];
    }
    if (a.nparts == 1)
      *reinterpret_cast<__half2*>(a.out + (row0 + h) * D + c) = __floats2half2_rn(o0, o1);
    else
      *reinterpret_cast<float2*>(a.part_o + (prow0 + h) * D + c) = make_float2(o0, o1);
  }
  block_trace(tr, 5);
  return qs;
#endif
}

// Same arguments as attention_decode.cu's fused entries (nchunks is 1: the group's <= 8 heads are
// one row chunk of flash_split_merge's 16). With E4M3 decoded in hardware the host's 2^8 unit
// (FP8_E4M3_UNIT, folded into qk_scale and v_mul) is taken back out here; split partials carry no
// v_mul (the merge applies it): the fused merge the corrected one, but without counters the host's
// attn_reduce applies the host's, so there the partials are stored x 2^-8 (the integer decode's units).
// BPS: blocks per SM the registers are held to (__launch_bounds__). TR: the trace pointer (an extra last
// argument, __VA_ARGS__) or nullptr.
#define DECODE_RD_ENTRY(D, KV, NAME, NBUF, W, BPS, TR, ...)                                           \
  extern "C" __global__ void __launch_bounds__(32 * W, BPS)                                            \
      NAME(__half* out, float* part_o, float* part_ml, int* counters, const __half* q,                 \
           const unsigned char* kc, const unsigned char* vc, const int* block_tables, const int* seq_lens, \
           const int* qsl, int meta_ready, i64 q_stride, int n_tokens, int hq, int hk, int group,      \
           int bs_shift, int bt_stride, int window, int nparts, int part, int nchunks, float qk_scale,  \
           float soft_cap, float v_mul __VA_ARGS__) {                                                  \
    if (KV == KV_E4M3 && RD_E4M3_HW) {                                                                 \
      qk_scale *= 1.f / FP8_E4M3_UNIT;                                                                 \
      v_mul *= 1.f / FP8_E4M3_UNIT;                                                                    \
    }                                                                                                  \
    const FlashArgs a{out, part_o, part_ml, q, kc, vc, block_tables, seq_lens, qsl, meta_ready, q_stride, \
                      n_tokens, hq, hk, group, bs_shift, bt_stride, window, nparts, part, nchunks,      \
                      qk_scale, soft_cap, v_mul};                                                      \
    const bool hw_e4m3 = KV == KV_E4M3 && RD_E4M3_HW;                                                  \
    const int qs = decode_rd_body<D, KV, NBUF, W>(a, TR, hw_e4m3 && !counters ? 1.f / FP8_E4M3_UNIT : 1.f); \
    if (nparts > 1 && counters)                                                                        \
      flash_split_merge<D, 16>(out, part_o, part_ml, counters, qsl, n_tokens, hq, group, nparts, nchunks, \
                               v_mul, qs, block_trace_row_or_null(TR));                                         \
    block_trace(TR, 6);                                                                                   \
  }
// FP16: one load set (the next step's loads issued after a step's math); FP8, half the bytes: two.
#define DECODE_RD_KINDS(D, W, SUFFIX, BPS, TR, ...)                                                   \
  DECODE_RD_ENTRY(D, KV_F16, attn_decode_rd_d##D##_f16##SUFFIX, 1, W, BPS, TR, __VA_ARGS__)          \
  DECODE_RD_ENTRY(D, KV_E4M3, attn_decode_rd_d##D##_e4m3##SUFFIX, 2, W, BPS, TR, __VA_ARGS__)        \
  DECODE_RD_ENTRY(D, KV_E5M2, attn_decode_rd_d##D##_e5m2##SUFFIX, 2, W, BPS, TR, __VA_ARGS__)
// the route: 4-warp blocks (3 per SM), _w1 one-warp blocks (12 per SM; attention_ops.decode_rd_form
// routes them for many (request, KV head) groups); _trace: the 4-warp D 128 kernel with per-block
// timestamps (tools/gpu/decode_trace.py)
DECODE_RD_KINDS(64, 4, , 3, nullptr, )
DECODE_RD_KINDS(64, 1, _w1, 12, nullptr, )
DECODE_RD_KINDS(128, 1, _w1, 12, nullptr, )
DECODE_RD_KINDS(128, 4, , 3, nullptr, )
DECODE_RD_KINDS(128, 4, _trace, 3, trace, , unsigned long long* trace)
// D 256 (Gemma 3's head dim): one register set of loads, 2 blocks of 4 warps per SM (sm_90: E4M3 200,
// E5M2 217, FP16 241 registers). FP16's set is 128 registers: with Q's 32 besides it spilled in the loop
// (s21: 72 bytes at 255), so Q_SHARED keeps Q in shared memory. H200, graphed, against
// attention_decode.cu: batch 8 x 16K, 32/4 heads, E4M3 166.3 -> 78.3 us (80.6% of copy), E5M2 171.0 ->
// 78.0 (s21); FP16 178.2 -> 134.8 us (71.2 -> 94.2%), 4 x 8K 16/8 heads 90.3 -> 72.5 (s22; the spilling
// s21 form 149.7 at 8 x 16K). Q in shared memory for FP8 (D 128 / 256) and two FP8 sets at D 256 lost
// 0-3% (s22 call 2).
DECODE_RD_ENTRY(256, KV_F16, attn_decode_rd_d256_f16, 1, 4, 2, nullptr, )
DECODE_RD_ENTRY(256, KV_E4M3, attn_decode_rd_d256_e4m3, 1, 4, 2, nullptr, )
DECODE_RD_ENTRY(256, KV_E5M2, attn_decode_rd_d256_e5m2, 1, 4, 2, nullptr, )
// _deep (D 128): deeper loads at 2 blocks of 4 warps per SM, FP16 two register sets, FP8 three (200-220
// registers); attention_ops.decode_rd_form routes them for 1-4 (request, KV head) groups per SM (H200
// s20 call 9, graphed: FP16 batch 32 / 64 x 512 21.1 / 42.2 -> 19.7 / 38.9 us, x 1024 37.3 / 74.9 ->
// 36.2 / 71.5; E4M3 batch 64 x 512 27.0 -> 24.7; fewer groups keep the route's 4-warp blocks: there deep
// FP8 was 1.5-2.5% slower at 4 / 16 x 8K-16K and deep FP16 slowed the batch-1 decode step 3-5%).
#define DECODE_RD_DEEP(D)                                                                           \
  DECODE_RD_ENTRY(D, KV_F16, attn_decode_rd_d##D##_f16_deep, 2, 4, 2, nullptr, )                    \
  DECODE_RD_ENTRY(D, KV_E4M3, attn_decode_rd_d##D##_e4m3_deep, 3, 4, 2, nullptr, )                  \
  DECODE_RD_ENTRY(D, KV_E5M2, attn_decode_rd_d##D##_e5m2_deep, 3, 4, 2, nullptr, )
DECODE_RD_DEEP(128)
