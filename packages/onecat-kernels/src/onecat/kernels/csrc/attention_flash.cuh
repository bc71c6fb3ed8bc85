// attention_flash.cuh: the paged flash-attention body shared by decode/verify (attention_decode.cu)
// and prefill (attention_prefill.cu): tensor cores through PTX wmma m16n16k16 (HMMA.884 on sm_70;
// mma.h is not usable with the runtime wheel's headers), FP32 accumulation and softmax state.
//
// A block (128 threads, 4 warps) owns one request, one KV head, ROWS = 16 * WR query rows of it
// (row = q_index * group + head_in_group: the GQA heads of a KV head share every K/V byte) and one
// partition of the request's keys. Warp w = (wr, wk, wd): rows [16 wr, +16), keys [NK wk, +NK) of
// each step's KT = NK * WK keys, output columns [D / WD * wd, +D / WD).
//   decode / verify: WR = 1, WK = 4 / WD: warps split the keys, each keeps its own (m, l, O),
//     merged through shared memory at the end;
//   prefill: WK = 1: warps split the rows and share each K/V tile.
//   head dim 256: WD = 2, paired warps compute the same S = Q K^T and softmax (identical) and each
//     owns half of the output columns (the O accumulators would not fit one warp's registers).
//
// Per step: the K and V rows of the step sit in registers (128-bit loads of the paged cache, page
// ids staged in shared memory per segment of FA_SEG keys), are stored to shared memory as FP16 (FP8
// decoded on the way), and the loads of the step PF steps ahead are issued before this step's math
// (register prefetch, one shared buffer; PF = 2 for FP8 decode). S goes through shared memory (FP32)
// for the softmax, P back as FP16 (in place); the O accumulators are rescaled in registers using the row of each accumulator
// element, read once from a fragment loaded from a matrix of row indices (the mapping is fixed per
// fragment type and arch, but not documented: it is measured, not assumed).
#pragma once
#include "attention_fp8.cuh"
#include "attention_merge.cuh"

#define FA_THREADS 128
#define FA_SEG 512    // keys per page-id segment (a multiple of every KT)
#define FA_MIN_BS 8   // smallest block size: sizes the page-id table
#define FA_LOG2E 1.4426950408889634f

// ---- wmma m16n16k16 through PTX: A/B fragments 8 x f16x2 per thread, accumulators 8 floats ----
struct FaAB { unsigned r[8]; };
struct FaC { float r[8]; };

#define FA_AB_OUT "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3]), "=r"(f.r[4]), "=r"(f.r[5]), "=r"(f.r[6]), "=r"(f.r[7])
ONECAT_DEVICE unsigned fa_smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
ONECAT_DEVICE void fa_load_a(FaAB& f, const __half* p, int ldm) {  // row-major 16x16
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : FA_AB_OUT : "r"(fa_smem_addr(p)), "r"(ldm) : "memory");
}
ONECAT_DEVICE void fa_load_b_col(FaAB& f, const __half* p, int ldm) {  // B[k][n] at p[n * ldm + k]
  asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.shared.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : FA_AB_OUT : "r"(fa_smem_addr(p)), "r"(ldm) : "memory");
}
ONECAT_DEVICE void fa_load_b_row(FaAB& f, const __half* p, int ldm) {  // B[k][n] at p[k * ldm + n]
  asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : FA_AB_OUT : "r"(fa_smem_addr(p)), "r"(ldm) : "memory");
}
#define FA_MMA(LAYOUT)                                                                                     \
  asm volatile("wmma.mma.sync.aligned." LAYOUT ".m16n16k16.f32.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, "            \
               "{%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19,%20,%21,%22,%23}, {%0,%1,%2,%3,%4,%5,%6,%7};" \
               : "+f"(d.r[0]), "+f"(d.r[1]), "+f"(d.r[2]), "+f"(d.r[3]), "+f"(d.r[4]), "+f"(d.r[5]),         \
                 "+f"(d.r[6]), "+f"(d.r[7])                                                                 \
               : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(a.r[4]), "r"(a.r[5]), "r"(a.r[6]), \
                 "r"(a.r[7]), "r"(b.r[0]), "r"(b.r[1]), "r"(b.r[2]), "r"(b.r[3]), "r"(b.r[4]), "r"(b.r[5]), \
                 "r"(b.r[6]), "r"(b.r[7]))
ONECAT_DEVICE void fa_mma_rc(FaC& d, const FaAB& a, const FaAB& b) { FA_MMA("row.col"); }
ONECAT_DEVICE void fa_mma_rr(FaC& d, const FaAB& a, const FaAB& b) { FA_MMA("row.row"); }
ONECAT_DEVICE void fa_store_c(float* p, const FaC& d, int ldm) {
  asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.shared.f32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8}, %9;"
               :: "r"(fa_smem_addr(p)), "f"(d.r[0]), "f"(d.r[1]), "f"(d.r[2]), "f"(d.r[3]), "f"(d.r[4]),
                  "f"(d.r[5]), "f"(d.r[6]), "f"(d.r[7]), "r"(ldm) : "memory");
}
ONECAT_DEVICE void fa_load_c(FaC& d, const float* p, int ldm) {
  asm volatile("wmma.load.c.sync.aligned.row.m16n16k16.shared.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : "=f"(d.r[0]), "=f"(d.r[1]), "=f"(d.r[2]), "=f"(d.r[3]), "=f"(d.r[4]), "=f"(d.r[5]),
                 "=f"(d.r[6]), "=f"(d.r[7]) : "r"(fa_smem_addr(p)), "r"(ldm) : "memory");
}

struct FlashArgs {
  __half* out;             // [T, Hq, D]
  float* part_o;           // [nparts, T, Hq, D] (nparts > 1)
  float* part_ml;          // [nparts, T, Hq, 2]
  const __half* q;         // [T, Hq, D], token stride q_stride
  const unsigned char* kc; // [blocks, bs, Hk, D] of FP16 or FP8
  const unsigned char* vc;
  const int* block_tables; // [B, bt_stride]
  const int* seq_lens;     // [B]
  const int* qsl;          // [B + 1]
  int meta_ready;          // block_tables / seq_lens / qsl come from host copies made before the
                           // step's first kernel and no kernel writes them (a CUDA-graph decode):
                           // read before pdl_wait() (sm_90 PDL), as are the K/V of keys before this
                           // step's tokens (written by earlier steps)
  i64 q_stride;
  int n_tokens, hq, hk, group, bs_shift, bt_stride, window, nparts, part, nchunks;
  float qk_scale, soft_cap, v_mul;
};

// Row padding of the staged O (epilogue): wmma's f32 store writes 8-byte pairs, rows r, r+1, r+8,
// r+9 in one half-warp on sm_70, rows r..r+3 on sm_75+; a stride = 4 (mod 32) words keeps sm_70 at
// its minimum (rows r and r+8 always share banks, 2-way), = 8 (mod 32) makes sm_75+ conflict-free.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 750
#define FA_LDO_PAD 4
#else
#define FA_LDO_PAD 8
#endif

// Shared-memory layout (bytes) of one configuration (the sm_70 gate checks it fits Volta). The
// epilogue stages the 4 warps' O (16 x DW floats each, row stride LDO) over K/V/Q/S, dead by then.
template <int D, int KV, int WR, int WK, int WD, int NK>
struct FaTile {
  static constexpr int KT = WK * NK, ROWS = WR * 16, LDK = D + 8, LDS = NK + 4, DW = D / WD, NF = DW / 16;
  static constexpr int EB = KV == KV_F16 ? 2 : 1, L = D * EB / 16, LPT = KT * L / FA_THREADS;
  static constexpr int PF = (KV != KV_F16 && WK > 1 && D <= 128) ? 2 : 1;  // register sets in flight
  static constexpr int K_OFF = 0, V_OFF = K_OFF + KT * LDK * 2, Q_OFF = V_OFF + KT * LDK * 2;
  static constexpr int S_OFF = Q_OFF + ROWS * LDK * 2, A_OFF = S_OFF + 4 * 16 * LDS * 4;
  static constexpr int M_OFF = A_OFF + 64 * 4, L_OFF = M_OFF + 64 * 4, P_OFF = L_OFF + 64 * 4;
  static constexpr int SMEM = P_OFF + (FA_SEG / FA_MIN_BS + 2) * 4;
  static constexpr int O_OFF = K_OFF, LDO = DW + FA_LDO_PAD;
  static_assert(O_OFF + 4 * 16 * LDO * 4 <= A_OFF, "staged O overlaps the softmax state");
  static_assert(WR * WK * WD == 4 && NK % 16 == 0 && DW % 16 == 0, "warp layout");
  static_assert(LPT >= 1 && KT * L % FA_THREADS == 0 && FA_SEG % (PF * KT) == 0, "tile loads");
};

// The host plans nparts x part for the longest context the launch may see (a CUDA graph's); a
// request's `span` keys are spread over as many of those partitions as keep >= KT keys each (the
// rest write empty partials at once), so a short context is split as finely as a long one.
ONECAT_DEVICE int flash_request_part(const FlashArgs& a, int KT, int span) {
  const int per = (span + a.nparts - 1) / a.nparts;
  return a.nparts > 1 ? min(a.part, max(KT, (per + KT - 1) / KT * KT)) : a.part;
}

// The partials of a partition that sees no key (rows r0 .. r0 + R - 1 of the (request, KV head)
// group, row r = token qs + r / group, head kvh * group + r % group; ONE_TOKEN: the rows are the group's
// heads of token qs): O 0, (m, l) = (-inf, 0), so the merge weighs them 0 (it counts every partition).
// Nothing when the keys are not split.
template <int D, bool ONE_TOKEN = false>
ONECAT_DEVICE void flash_empty_partials(const FlashArgs& a, int p, int qs, int kvh, int r0, int R, int tid,
                                        int nthreads) {
  if (a.nparts <= 1) return;
  for (int i = tid; i < R * D; i += nthreads) {
    const int r = r0 + i / D, tok = ONE_TOKEN ? qs : qs + r / a.group, h = kvh * a.group + (ONE_TOKEN ? r : r % a.group);
    const i64 row = ((i64)p * a.n_tokens + tok) * a.hq + h;
    a.part_o[row * D + i % D] = 0.f;
    if (i % D == 0) {
      a.part_ml[row * 2] = -INFINITY;
      a.part_ml[row * 2 + 1] = 0.f;
    }
  }
}

template <int D, int KV, int WR, int WK, int WD, int NK>
__device__ __forceinline__ void flash_body(const FlashArgs& a) {
  using C = FaTile<D, KV, WR, WK, WD, NK>;
  constexpr int KT = C::KT, ROWS = C::ROWS, LDK = C::LDK, LDS = C::LDS, DW = C::DW, NF = C::NF;
  constexpr int L = C::L, LPT = C::LPT, PF = C::PF;
  __shared__ __align__(128) unsigned char smem[C::SMEM];
  __half* ks = reinterpret_cast<__half*>(smem + C::K_OFF);
  __half* vs = reinterpret_cast<__half*>(smem + C::V_OFF);
  __half* qsm = reinterpret_cast<__half*>(smem + C::Q_OFF);
  float* sb = reinterpret_cast<float*>(smem + C::S_OFF);
  float* alpha_s = reinterpret_cast<float*>(smem + C::A_OFF);
  float* m_s = reinterpret_cast<float*>(smem + C::M_OFF);
  float* l_s = reinterpret_cast<float*>(smem + C::L_OFF);
  int* pages = reinterpret_cast<int*>(smem + C::P_OFF);

  // sm_90 with PDL: launched while the previous kernel (the qkv projection) runs. With meta_ready the
  // request's lengths and page ids are read before waiting on it (two global round trips off the
  // chain), Q and K/V (this step's token) after; otherwise everything after.
  pdl_launch_dependents();
  if (!a.meta_ready) pdl_wait();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wd = warp % WD, wk = (warp / WD) % WK, wr = warp / (WD * WK);
  const int chunk = a.nchunks - 1 - (int)blockIdx.x;  // last rows (most keys) first
  const int kvh = blockIdx.y, b = blockIdx.z / a.nparts, p = blockIdx.z % a.nparts;
  const int qs = a.qsl[b], ql = a.qsl[b + 1] - qs, ctx = a.seq_lens[b];
  const int r0 = chunk * ROWS, rows_total = ql * a.group;
  if (r0 >= rows_total) return;
  const int R = min(ROWS, rows_total - r0);
  const int lo = a.window > 0 ? max(0, ctx - ql - a.window + 1) : 0;
  const int part = flash_request_part(a, KT, ctx - lo);
  const int pstart = lo + p * part, pend = min(pstart + part, ctx);
  const int qi_min = r0 / a.group, qi_max = (r0 + R - 1) / a.group;
  const int clo = a.window > 0 ? max(0, ctx - ql + qi_min - a.window + 1) : 0;
  const int kstart = max(pstart, clo), kend = min(pend, ctx - ql + qi_max + 1);

  if (kstart >= kend) {  // nothing visible in this partition: empty partials (counted by the fused merge too)
    pdl_wait();
    flash_empty_partials<D>(a, p, qs, kvh, r0, R, tid, FA_THREADS);
    return;
  }

  const int* bt = a.block_tables + (i64)b * a.bt_stride;
  const int bs = 1 << a.bs_shift;
  const i64 row_bytes = (i64)a.hk * D * C::EB, head_off = (i64)kvh * D * C::EB;
  int first_page = 0;
  auto stage_pages = [&](int seg) {
    const int seg_end = min(seg + FA_SEG, kend);
    first_page = seg >> a.bs_shift;
    for (int i = tid, n = ((seg_end - 1) >> a.bs_shift) - first_page + 1; i < n; i += FA_THREADS)
      pages[i] = bt[first_page + i];
  };
  uint4 kr[PF][LPT], vr[PF][LPT];
  auto load_step = [&](int t0, uint4 (&kr)[LPT], uint4 (&vr)[LPT]) {
#pragma unroll
    for (int i = 0; i < LPT; ++i) {
      const int c = tid + i * FA_THREADS, kp = t0 + c / L;
      if (kp < kend) {
        const i64 off = ((i64)pages[(kp >> a.bs_shift) - first_page] * bs + (kp & (bs - 1))) * row_bytes +
                        head_off + (c % L) * 16;
        kr[i] = *reinterpret_cast<const uint4*>(a.kc + off);
        vr[i] = *reinterpret_cast<const uint4*>(a.vc + off);
      } else {
        kr[i] = vr[i] = make_uint4(0, 0, 0, 0);
      }
    }
  };
  auto store_step = [&](const uint4 (&kr)[LPT], const uint4 (&vr)[LPT]) {
#pragma unroll
    for (int i = 0; i < LPT; ++i) {
      const int c = tid + i * FA_THREADS, j = c / L;
      if constexpr (KV == KV_F16) {
        const int col = (c % L) * 8;
        *reinterpret_cast<uint4*>(ks + j * LDK + col) = kr[i];
        *reinterpret_cast<uint4*>(vs + j * LDK + col) = vr[i];
      } else {
        const int col = (c % L) * 16;
        uint4 x, y;
        fp8x16_to_half<KV>(kr[i], x, y);
        *reinterpret_cast<uint4*>(ks + j * LDK + col) = x;
        *reinterpret_cast<uint4*>(ks + j * LDK + col + 8) = y;
        fp8x16_to_half<KV>(vr[i], x, y);
        *reinterpret_cast<uint4*>(vs + j * LDK + col) = x;
        *reinterpret_cast<uint4*>(vs + j * LDK + col + 8) = y;
      }
    }
  };

  // Softmax ownership: LPR = 2, 4 or 8 lanes per row (as few rows as this warp's 16 hold: decode at
  // GQA group 4 has 4, and 2 lanes per row would leave 3/4 of the lanes' exp2 / shared loads on empty
  // rows), lane -> row lr = lane / LPR, columns [CPL * (lane % LPR), +CPL), CPL = NK / LPR. Uniform
  // per block; rows lr >= 32 / LPR (all past R) are never read. Prefill (WK = 1, full row tiles)
  // keeps LPR = 2 as a constant.
  const int rv = min(16, max(0, R - wr * 16));
  const int lpr_log = WK == 1 || rv > 8 ? 1 : rv > 4 ? 2 : 3, lpr = 1 << lpr_log, cpl = NK >> lpr_log;
  const int lr = lane >> lpr_log, c0 = (lane & (lpr - 1)) * cpl, crow = wr * 16 + lr;
  const bool row_ok = crow < R;
  const int qpos = ctx - ql + (r0 + crow) / a.group;
  float m_run = -INFINITY, l_run = 0.f;
  FaC o[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f)
#pragma unroll
    for (int i = 0; i < 8; ++i) o[f].r[i] = 0.f;

  // Steps of KT keys; PF register sets of K/V loads in flight (PF = 2 for FP8 decode: half the bytes
  // per load, so two steps ahead keep as many bytes in flight as FP16 does with one). The first
  // steps' loads go out before the query rows are read: the chain to the first S is page ids, then
  // K/V with Q alongside (not Q, then page ids, then K/V: one global round trip less per block).
  // With meta_ready the keys before this step's tokens (< ctx - ql) were written by earlier steps:
  // their first steps' K/V load before the wait too, under the previous kernel (the qkv projection).
  stage_pages(kstart);
  __syncthreads();
  const int ready_end = a.meta_ready ? ctx - ql : kstart;  // keys below this are in the cache already
#pragma unroll
  for (int u = 0; u < PF; ++u)  // FA_SEG >= PF * KT
    if (min(kstart + (u + 1) * KT, kend) <= ready_end) load_step(kstart + u * KT, kr[u], vr[u]);
  pdl_wait();  // (a no-op after the first) this step's K/V and Q are the previous kernels' outputs
#pragma unroll
  for (int u = 0; u < PF; ++u)
    if (min(kstart + (u + 1) * KT, kend) > ready_end) load_step(kstart + u * KT, kr[u], vr[u]);

  // Query rows -> shared memory (FP16 as given; the scale is applied to S in FP32); read by the
  // step loop after its barriers. All of a thread's loads first (one round trip), then the stores.
  {
    constexpr int QPT = ROWS * D / 8 / FA_THREADS;
    static_assert(ROWS * D / 8 % FA_THREADS == 0, "query tile loads");
    uint4 qv[QPT];
#pragma unroll
    for (int t = 0; t < QPT; ++t) {
      const int i = tid + t * FA_THREADS, r = i / (D / 8), c = (i % (D / 8)) * 8, rr = r0 + r;
      qv[t] = r < R ? *reinterpret_cast<const uint4*>(a.q + (i64)(qs + rr / a.group) * a.q_stride +
                                                      (i64)(kvh * a.group + rr % a.group) * D + c)
                    : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int t = 0; t < QPT; ++t) {
      const int i = tid + t * FA_THREADS;
      *reinterpret_cast<uint4*>(qsm + (i / (D / 8)) * LDK + (i % (D / 8)) * 8) = qv[t];
    }
  }
  // The row of each accumulator element: load a matrix of row indices into a fragment.
  float* sw = sb + warp * 16 * LDS;
  for (int i = lane; i < 256; i += 32) sw[(i >> 4) * LDS + (i & 15)] = (float)(i >> 4);
  __syncwarp();
  int rowmap[8];
  {
    FaC t;
    fa_load_c(t, sw, LDS);
#pragma unroll
    for (int i = 0; i < 8; ++i) rowmap[i] = (int)t.r[i];
  }
  __syncwarp();

  for (int tb = kstart; tb < kend; tb += PF * KT) {
#pragma unroll
  for (int u = 0; u < PF; ++u) {
    const int t0 = tb + u * KT;
    if (t0 >= kend) break;
    __syncthreads();  // the previous step is done with ks / vs / pages
    store_step(kr[u], vr[u]);
    const int tn = t0 + PF * KT;
    if (tn < kend && (tn - kstart) % FA_SEG == 0) stage_pages(tn);
    __syncthreads();
    if (tn < kend) load_step(tn, kr[u], vr[u]);  // in flight during the next PF steps' math

    // S = Q K^T over the warp's 16 rows x NK keys.
    FaC s[NK / 16];
#pragma unroll
    for (int n = 0; n < NK / 16; ++n)
#pragma unroll
      for (int i = 0; i < 8; ++i) s[n].r[i] = 0.f;
#pragma unroll
    for (int kd = 0; kd < D / 16; ++kd) {
      FaAB qa;
      fa_load_a(qa, qsm + wr * 16 * LDK + kd * 16, LDK);
#pragma unroll
      for (int n = 0; n < NK / 16; ++n) {
        FaAB kb;
        fa_load_b_col(kb, ks + (wk * NK + n * 16) * LDK + kd * 16, LDK);
        fa_mma_rc(s[n], qa, kb);
      }
    }
#pragma unroll
    for (int n = 0; n < NK / 16; ++n) fa_store_c(sw + n * 16, s[n], LDS);
    __syncwarp();

    // Online softmax (log2 domain, FP32), P back in place as FP16. The keys a row sees are one
    // contiguous range (partition end, causal diagonal, window start): the lane's columns j in
    // [j_lo, j_hi) keep their scores, two compares with the unrolled j instead of the per-key
    // position tests. 2^x by the MUFU alone (ex2_approx: -inf gives 0).
    float v[NK / 2];
    float mx = -INFINITY;
    const int kp0 = t0 + wk * NK + c0;
    const int j_hi = row_ok ? min(kend, qpos + 1) - kp0 : 0;
    const int j_lo = a.window > 0 ? qpos - a.window + 1 - kp0 : 0;
#pragma unroll
    for (int j = 0; j < NK / 2; ++j) {
      if (j >= cpl) break;
      float x = sw[lr * LDS + c0 + j] * a.qk_scale;
      if (a.soft_cap > 0.f) x = a.soft_cap * tanhf(x / a.soft_cap) * FA_LOG2E;
      v[j] = j >= j_lo && j < j_hi ? x : -INFINITY;
      mx = fmaxf(mx, v[j]);
    }
    for (int o = 1; o < lpr; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float m_new = fmaxf(m_run, mx);
    const float alpha = m_new == -INFINITY ? 1.f : ex2_approx(m_run - m_new);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < NK / 2; ++j) {
      if (j >= cpl) break;
      v[j] = m_new == -INFINITY ? 0.f : ex2_approx(v[j] - m_new);
      sum += v[j];
    }
    for (int o = 1; o < lpr; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    l_run = l_run * alpha + sum;
    m_run = m_new;
    __syncwarp();  // every lane has read its S before P overwrites the rows
    __half* pw = reinterpret_cast<__half*>(sw);
#pragma unroll
    for (int j = 0; j < NK / 2; j += 2) {
      if (j >= cpl) break;
      *reinterpret_cast<__half2*>(pw + lr * 2 * LDS + c0 + j) = __floats2half2_rn(v[j], v[j + 1]);
    }
    if ((lane & (lpr - 1)) == 0) alpha_s[warp * 16 + lr] = alpha;
    __syncwarp();

    // O = O * alpha + P V over the warp's columns. Prefill: once the rows' maxima settle (most
    // steps) every alpha is exactly 1 and the rescale (NF x 8 multiplies, 8 shared loads per lane) is
    // skipped (H200: prefill +3-6%); decode keeps it unconditional (the branch cost it 2-3%).
    if (WK > 1 || __any_sync(0xffffffffu, alpha != 1.f)) {
#pragma unroll
      for (int f = 0; f < NF; ++f)
#pragma unroll
        for (int i = 0; i < 8; ++i) o[f].r[i] *= alpha_s[warp * 16 + rowmap[i]];
    }
#pragma unroll
    for (int kk = 0; kk < NK / 16; ++kk) {
      FaAB pa;
      fa_load_a(pa, pw + kk * 16, 2 * LDS);
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        FaAB vb;
        fa_load_b_row(vb, vs + (wk * NK + kk * 16) * LDK + wd * DW + f * 16, LDK);
        fa_mma_rr(o[f], pa, vb);
      }
    }
    __syncwarp();  // P (aliasing S) is read before the next step's S store
  }
  }

  // Merge the WK key slices of each row (decode) and write out. Every warp stages all its O
  // fragments at once (two barriers in all, not two per 16 columns); thread e then takes column
  // pair e of the block's rows in output order: 256 contiguous bytes per warp from shared memory,
  // full-row half2 / float2 stores, and only the R valid rows are visited.
  if ((lane & (lpr - 1)) == 0) {
    m_s[warp * 16 + lr] = m_run;
    l_s[warp * 16 + lr] = l_run;
  }
  constexpr int LDO = C::LDO, CP = DW / 2;
  float* ob = reinterpret_cast<float*>(smem + C::O_OFF);
  __syncthreads();  // every warp is done with K / V / Q / S
#pragma unroll
  for (int f = 0; f < NF; ++f) fa_store_c(ob + warp * 16 * LDO + f * 16, o[f], LDO);
  __syncthreads();
  // Not unrolled: unrolling grows prefill's registers (sm_90 d256 FP8 +2) for a loop of few trips.
#pragma unroll 1
  for (int e = tid; e < R * WD * CP; e += FA_THREADS) {
    const int rr = e / (WD * CP), gwd = (e / CP) % WD, c = (e % CP) * 2;
    const int gwr = rr >> 4, r = rr & 15;
    float M = -INFINITY;
#pragma unroll
    for (int k = 0; k < WK; ++k) M = fmaxf(M, m_s[((gwr * WK + k) * WD + gwd) * 16 + r]);
    float o0 = 0.f, o1 = 0.f, Ls = 0.f;
#pragma unroll
    for (int k = 0; k < WK; ++k) {
      const int w = (gwr * WK + k) * WD + gwd;
      const float m = m_s[w * 16 + r];
      if (m == -INFINITY) continue;
      const float sc = exp2f(m - M);
      Ls += l_s[w * 16 + r] * sc;
      const float2 x = *reinterpret_cast<const float2*>(ob + (w * 16 + r) * LDO + c);
      o0 += x.x * sc;
      o1 += x.y * sc;
    }
    const int grow = r0 + rr, tok = qs + grow / a.group, h = kvh * a.group + grow % a.group;
    const int col = gwd * DW + c;
    const float inv = Ls > 0.f ? 1.f / Ls : 0.f;
    if (a.nparts == 1) {
      *reinterpret_cast<__half2*>(a.out + ((i64)tok * a.hq + h) * D + col) =
          __floats2half2_rn(o0 * inv * a.v_mul, o1 * inv * a.v_mul);
    } else {
      const i64 prow = ((i64)p * a.n_tokens + tok) * a.hq + h;
      *reinterpret_cast<float2*>(a.part_o + prow * D + col) = make_float2(o0 * inv, o1 * inv);
      if (col == 0) {
        a.part_ml[prow * 2] = M;
        a.part_ml[prow * 2 + 1] = Ls;
      }
    }
  }
}

// FLASH_ENTRY: the plain entry (prefill): partials for attn_reduce when nparts > 1.
// FLASH_ENTRY_FUSED (decode / verify): one more argument, the counter array (after part_ml) of the
// fused merge (flash_split_merge); null for the two-launch path (partials, then attn_reduce).
#define FLASH_ENTRY(NAME, D, KV, WR, WK, WD, NK)                                                         \
  extern "C" __global__ void __launch_bounds__(FA_THREADS)                                               \
      NAME(__half* out, float* part_o, float* part_ml, const __half* q, const unsigned char* kc,           \
           const unsigned char* vc, const int* block_tables, const int* seq_lens, const int* qsl,         \
           int meta_ready, i64 q_stride, int n_tokens, int hq, int hk, int group, int bs_shift, int bt_stride, int window, \
           int nparts, int part, int nchunks, float qk_scale, float soft_cap, float v_mul) {              \
    const FlashArgs a{out, part_o, part_ml, q, kc, vc, block_tables, seq_lens, qsl, meta_ready, q_stride, \
                      n_tokens, hq, hk, group, bs_shift, bt_stride, window, nparts, part, nchunks,         \
                      qk_scale, soft_cap, v_mul};                                                         \
    flash_body<D, KV, WR, WK, WD, NK>(a);                                                                \
  }
#define FLASH_ENTRY_FUSED(NAME, D, KV, WR, WK, WD, NK)                                                   \
  extern "C" __global__ void __launch_bounds__(FA_THREADS)                                               \
      NAME(__half* out, float* part_o, float* part_ml, int* counters, const __half* q,                    \
           const unsigned char* kc, const unsigned char* vc, const int* block_tables, const int* seq_lens, \
           const int* qsl, int meta_ready, i64 q_stride, int n_tokens, int hq, int hk, int group,         \
           int bs_shift,                                                                                  \
           int bt_stride, int window, int nparts, int part, int nchunks, float qk_scale, float soft_cap,   \
           float v_mul) {                                                                                 \
    const FlashArgs a{out, part_o, part_ml, q, kc, vc, block_tables, seq_lens, qsl, meta_ready, q_stride, \
                      n_tokens, hq, hk, group, bs_shift, bt_stride, window, nparts, part, nchunks,         \
                      qk_scale, soft_cap, v_mul};                                                         \
    flash_body<D, KV, WR, WK, WD, NK>(a);                                                                \
    if (nparts > 1 && counters) /* every block of the grid, its partials written (or no rows) */       \
      flash_split_merge<D, 16 * WR>(out, part_o, part_ml, counters, qsl, n_tokens, hq, group, nparts,    \
                                    nchunks, v_mul);                                                     \
  }
