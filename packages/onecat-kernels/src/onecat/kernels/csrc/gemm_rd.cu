// gemm_rd.cu: the decode-batch packed GEMM with the weights dequantized straight into tensor-core
// fragments (register-direct): y[M, N] = x[M, K] @ W[N, K]^T (+ bias), M <= BM rows per block (16, 32
// or 64), q4_0 / q4_k / q6_k / awq PackedWeight as the GEMV reads it (row-major planes, no re-layout),
// K % BK == 0.
// FP16 in and out, FP32 accumulation. sm_80+ (mma.sync m16n8k16); gemm_ops admits it on those GPUs only.
// q4_k (gemm_rd_q4_k_*): the same walk (its chunks' nibbles are laid out as q4_0's), each lane loading
// one 32-bit word of its row's 16-byte super-block header per step (a super-block is two steps) and the
// 4 lanes of a row trading them by shuffles: one register per ring slot as q4_0's scale. Its weight is
// one more HFMA2 per pair (q4k_consts / q4_k_word); H200 s19 (llama3-8b matrices, against the
// shared-memory tiles / the four-row GEMV it replaces): gate_up 82 -> 36 us at M 8-16, 84 -> 45 at 32,
// 100 -> 84 at 64; decode steps batch 4 / 8 / 16 / 32 / 64: 4.47 / 6.32 / 6.39 / 6.92 / 9.34 ->
// 3.32 / 3.61 / 3.73 / 4.67 / 7.94 ms (benchmarks/results/h200-2026-11-30-s19).
// awq (gemm_rd_awq_*): q4_0's dequantization with the group's zero point in place of 8 ((1024 + q) -
// (1024 + z) = q - z exactly, one HMUL2 by s: the reference's weight), a lane loading its chunk's group
// word (s, 1024 + z) (gchunks = group / 32, a power of two); s19 steps batch 4 / 8 / 16 / 32 / 64:
// 4.34 / 5.77 / 6.27 / 7.11 / 9.63 -> 3.20 / 3.53 / 3.56 / 4.42 / 7.66 ms.
// q6_k (gemm_rd_q6_k_*: Q4_K_M's LM head and half its v / down matrices): the low nibbles as q4_0's with
// the high bits OR-ed in (packed_formats.cuh dequant8's layout; the chunk's 8 bytes of them and its scale
// word (sc0, sc1, d) ride in the ring), (1024 + q) - 1056 = q - 32 exactly, one HMUL2 by d sc rounded to
// fp16; s19 steps (every matrix q6_k) batch 4 / 16 / 32 / 64: 4.30 / 7.29 / 7.89 / 10.09 -> 3.62 / 4.02 /
// 4.92 / 8.37 ms.
//
// Why: gemm_packed.cu stores every dequantized weight to shared memory as fp16 and each warp reads
// its fragments back (wmma): ~18 shared-memory bytes per packed weight byte at M = 32, and ncu shows
// that kernel bound by L1/TEX throughput (85%) with DRAM at 13-19%. Here only x goes through shared
// memory; W goes global -> registers -> dequantized in registers -> MMA operand (~5 B per byte).
// H200 (s11, llama3-8b q4_0 matrices, M = 32): 30-43% less time than the shared-memory tiles, gate_up
// 75 -> 43 us; ncu: 11.1M instructions instead of 18.6M, now waiting on its loads (long scoreboard) at
// 2 blocks per SM. A cp.async pipeline feeding the same math (tried: 124 registers, stages in dynamic
// shared memory) was no faster: its per-step copies of x cost more instructions than it saved.
//
//  * Block: 4 warps side by side in N; a warp owns NB blocks of 8 output features (BN = 32 NB) and all
//    BM rows (MT = BM / 16 row tiles), walking K in steps of BK = 128 KS (4 KS chunks per W row: each
//    row's step is 64 KS contiguous bytes; s11's tiled-layout experiment showed the row-major walk's
//    DRAM locality mattering).
//  * Lane (g = lane / 4, q = lane % 4) of n8 block b holds W row n0 + 8b + g: its chunks KS q ..
//    KS q + KS - 1 of the step (16-byte loads; the 4 lanes of a row read the step contiguously), real
//    k 32 KS q .. 32 KS (q + 1) - 1, and their fp16 scales. Each half chunk (16 weights = 8 fp16 pairs:
//    gemv_packed.cu's LOP3 + HFMA2 trick giving q - 8 exactly, then one HMUL2 by d, the correctly
//    rounded weight as in gemm_packed.cu) is the B operand of four k16 MMAs: slice s takes pairs
//    (2s, 2s + 1) as (b0 b1, b2 b3). The MMA's k order is thus permuted (slice s, lane q, position
//    2q + r / 2q + 8 + r = the lane's k + 4s + r / + 2 + r) and the A operands follow it.
//  * x: the step's BM x BK tile in shared memory in A-operand order (one 16-byte load per slice and
//    row tile, see the layout note below), loaded into registers PDX steps ahead (two 8-byte loads per
//    16-byte slot) and stored into one of two stages: one barrier per step. W: PDW steps ahead, a ring
//    of PDW + 1 register sets; r32w's loads ask the L2 for 128 bytes of the row (ldg_pf: one step more
//    waiting in L2). Rows past M read row M - 1 (never written out), W rows past N row N - 1.
//  * Epilogue (gemm_epilogue.cuh): accumulators staged in shared memory, FP16 out or split-K partials
//    merged by the tile's last block (fixed order). The _glu entries (decode batches' gate_up,
//    linear_fused_ops' cuda_pack_gemm_rd): a tile's first BN / 2 features are gate rows n0 / 2 .., the
//    rest the same up rows (W = [gate | up], nothing re-laid out), and the epilogue writes silu(gate) *
//    up, the bits of the GEMM then silu_and_mul (H200 s17, 28672 x 4096 at M 32 / 64: 37.7 -> 36.8 /
//    72.1 -> 71.2 us per layer, tools/gpu/glu_bench.py).
//  * Programmatic dependent launch (sm_90, gemm_ops launches it with the attribute): the first PDW
//    steps of W load before pdl_wait(), everything the step writes (x, counters, partials, out) after
//    it; the next kernel may launch once this one's K loop is done.
//  * Tried (s12-s13), lost on the H200, removed: L2PF (the rest of the block's W sent towards L2 before
//    pdl_wait: gemm_bench 4-9% slower at M 32 / 64, batch 64 7,756 -> 7,511 tok/s) and NORM
//    (rms_norm_linear's norm fused in front of the 32-row tiles: llama3-8b q4_0 batch 32 6,268 -> 5,519).
#include "gemm_epilogue.cuh"
#include "gemm_dequant.cuh"

// MT row tiles of 16 (BM = 16 MT), NB n8 blocks per warp (BN = 32 NB), KS chunks per lane and step
// (BK = 128 KS: each W row's step is 64 KS contiguous bytes, lane q reading chunks KS q .. KS q + KS - 1).
// W prefetched PDW steps ahead, x PDX <= PDW steps ahead (one ring of PDW + 1 register sets: a step
// is never shorter than the latency of the loads it waits on, and x comes from L2 under the same
// queues as W from DRAM).
//
// Shared x in MMA operand order: 16-byte slot (row pair p = 8 mt + g, k quad) holds x[r][k..k+1],
// x[r + 8][k..k+1], x[r][k+2..k+3], x[r + 8][k+2..k+3] (r = 16 mt + g): one 16-byte load is one slice's
// A operand. A row pair's quads are 4 blocks of 8 KS (one per lane q) padded to 8 KS + 2 slots, row
// pairs 4 (8 KS + 2) + 1 slots apart: the 8 lanes of a quarter warp (g, g + 1 x q = 0..3) land on
// 8 distinct bank groups (2q + g mod 8), with every offset a compile-time constant.
// One 32-bit word of q6_k's low nibbles (8 weights) with its high-bit word hb (packed_formats.cuh
// dequant8's layout): 4 fp16 pairs (q - 32) x dsc, dsc = d sc rounded to fp16 (the reference rounds
// d sc (q - 32) once: this weight is off by at most that rounding, 2^-11 of it).
ONECAT_DEVICE void q6_k_word(unsigned v, unsigned hb, __half2 dsc, unsigned magic, unsigned (&p)[4]) {
  const unsigned v2 = v >> 8, hb2 = hb >> 2;
  const __half2 one = h2c(1.f), shi = h2c(1.f / 16.f), nlo = h2c(-1056.f), nhi = h2c(-96.f);
  p[0] = h2u(__hmul2(__hfma2(u2h(lop_or_reg(v, 0x000F000Fu, magic) | (hb & 0x00300030u)), one, nlo), dsc));
  p[1] = h2u(__hmul2(__hfma2(u2h(lop_or_reg(v, 0x00F000F0u, magic) | (hb & 0x03000300u)), shi, nhi), dsc));
  p[2] = h2u(__hmul2(__hfma2(u2h(lop_or_reg(v2, 0x000F000Fu, magic) | (hb2 & 0x00300030u)), one, nlo), dsc));
  p[3] = h2u(__hmul2(__hfma2(u2h(lop_or_reg(v2, 0x00F000F0u, magic) | (hb2 & 0x03000300u)), shi, nhi), dsc));
}

template <bool QK> struct ScaleWordOf { using type = unsigned short; };  // q4_0: a chunk's fp16 d
// q4_k: a header word; q6_k: (sc0, sc1, d); awq: (s, 1024 + z)
template <> struct ScaleWordOf<true> { using type = unsigned; };
template <bool QK> using ScaleWord = typename ScaleWordOf<QK>::type;

// q4_k: one chunk's constants from its super-block header (16 bytes: fp16 d, fp16 dmin, 8 x 12-bit
// (scale, min) fields; the 4 lanes of a W row hold its words 0..3, this lane's chunk is field j).
// (1024 + q) sc - 1024 sc and (1024 + 16 q) sc / 16 - 64 sc are q sc exactly (<= 945); the weight is
// then one HFMA2, q sc x d - dmin mn, with dmin mn rounded to fp16 first (the reference's fp32 weight
// rounds once: this one is off by at most that rounding, ~2^-11 of dmin mn).
struct Q4kConsts {
  __half2 a, z, ah, zh, d, e;
};
ONECAT_DEVICE Q4kConsts q4k_consts(unsigned hw, int lane, int j) {
  const int base = lane & ~3, off = 12 * j, lw = 1 + (off >> 5);
  const unsigned w0 = __shfl_sync(0xffffffffu, hw, base);
  const unsigned lo = __shfl_sync(0xffffffffu, hw, base + lw);
  const unsigned hi = __shfl_sync(0xffffffffu, hw, base + min(lw + 1, 3));
  const unsigned f = __funnelshift_r(lo, hi, off & 31);
  const __half2 sc = __half2half2(__uint2half_rn(f & 63u)), mn = __half2half2(__uint2half_rn((f >> 6) & 63u));
  Q4kConsts c;
  c.a = sc;
  c.z = __hmul2(sc, h2c(-1024.f));
  c.ah = __hmul2(sc, h2c(1.f / 16.f));
  c.zh = __hmul2(sc, h2c(-64.f));
  c.d = __half2half2(__ushort_as_half((unsigned short)(w0 & 0xFFFF)));
  c.e = __hneg2(__hmul2(__half2half2(__ushort_as_half((unsigned short)(w0 >> 16))), mn));
  return c;
}

// One 32-bit word of q4_k nibbles (8 weights): 4 fp16 pairs as q4_0_word's.
ONECAT_DEVICE void q4_k_word(unsigned v, const Q4kConsts& c, unsigned magic, unsigned (&p)[4]) {
  const unsigned v2 = v >> 8;
  p[0] = h2u(__hfma2(__hfma2(u2h(lop_or_reg(v, 0x000F000Fu, magic)), c.a, c.z), c.d, c.e));
  p[1] = h2u(__hfma2(__hfma2(u2h(lop_or_reg(v, 0x00F000F0u, magic)), c.ah, c.zh), c.d, c.e));
  p[2] = h2u(__hfma2(__hfma2(u2h(lop_or_reg(v2, 0x000F000Fu, magic)), c.a, c.z), c.d, c.e));
  p[3] = h2u(__hfma2(__hfma2(u2h(lop_or_reg(v2, 0x00F000F0u, magic)), c.ah, c.zh), c.d, c.e));
}

template <int F, int MT, int NB, int KS, int PDW, int PDX, int PF = 0, bool GLU = false, bool ROPE = false,
          bool NORM = false>
__device__ void gemm_rd(__half* __restrict__ out, const __half* __restrict__ x, const unsigned char* __restrict__ q,
                        const unsigned char* __restrict__ qh, const unsigned char* __restrict__ meta,
                        const __half* __restrict__ bias, float* __restrict__ ws, unsigned* __restrict__ counters,
                        int M, int N, int K, int gchunks, int steps_per_split, unsigned long long* tr = nullptr,
                        const QkvRope& rope = QkvRope{}, const RowNorm& rn = RowNorm{},
                        const NormOut& no = NormOut{}) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // mma.sync m16n8k16 is sm_80+: gemm_ops never admits these tiles below RD_MIN_CAPABILITY, so the
             // sm_70 build is this trap alone (the body's registers there proved nothing and spilled)
#else
  constexpr int THREADS = 128, BM = 16 * MT, WN = 8 * NB, BN = 4 * WN, BK = 128 * KS;
  constexpr int QS = 8 * KS + 2, PS = 4 * QS + 1;  // slots per lane block (padded), per row pair
  constexpr int SLOTS = BM / 2 * BK / 4;           // logical 16-byte slots of a step's x
  constexpr int XV = SLOTS / THREADS;              // ... per thread
  constexpr int STAGE = BM / 2 * PS * 8;           // halves
  constexpr int C_LD = BN + 4, R = PDW + 1;
  constexpr int AB = 2 * STAGE * 2, CB = BM * C_LD * 4, BYTES = AB > CB ? AB : CB;
  static_assert(XV * THREADS == SLOTS && BYTES <= 48 * 1024, "x slots per thread; static shared memory");
  static_assert(1 <= PDX && PDX <= PDW, "x is prefetched at most as far as W");
  static_assert(F == F_Q4_0 || ((F == F_Q4_K || F == F_AWQ || F == F_Q6_K) && KS == 1),
                "q4_0, or q4_k / awq / q6_k one chunk per lane and step");
  constexpr bool QK = F == F_Q4_K, AW = F == F_AWQ, Q6 = F == F_Q6_K;  // scales: q4_0 one fp16 per chunk,
  // q6_k one word per chunk (sc0, sc1, d) and 8 bytes of high bits, q4_k a header word
  // per lane, awq its group's (s, 1024 + z) (gchunks = group / 32 chunks: a power of two, gemm_ops)
  __shared__ __align__(128) unsigned char smem[BYTES];
  __shared__ unsigned last_block;
  __half* sh = reinterpret_cast<__half*>(smem);

  block_trace(tr, 0);
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5, g = lane >> 2, qd = lane & 3;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const int nch = K >> 5, nsteps = nch / (4 * KS);
  const int s_begin = blockIdx.z * steps_per_split, s_end = min(nsteps, s_begin + steps_per_split);
  // this lane's W chunks (KS x 16 B per step) and their scales, row offsets applied once
  const uint4* wp[NB];
  const unsigned short* sp[NB];  // q4_0: this lane's chunks' scales
  const unsigned* hp[NB];        // q4_k: word qd of its row's super-block headers; awq: its row's groups;
                                 // q6_k: its chunks' scale words
  const uint2* qp[NB];           // q6_k: its chunks' high bits
  const int gshift = AW ? __ffs(gchunks) - 1 : 0;
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    // zero-extended (a row is >= 0): the index arithmetic, so the SASS, of the kernels timed in s13.
    // GLU: the tile's first BN / 2 features are gate rows n0 / 2 .., the rest the same rows of up
    const int f = warp * WN + 8 * b + g;
    const i64 row = (unsigned)min(GLU ? (f < BN / 2 ? 0 : N / 2 - BN / 2) + n0 / 2 + f : n0 + f, N - 1);
    wp[b] = reinterpret_cast<const uint4*>(q + row * nch * 16) + KS * qd;
    if constexpr (Q6) {
      hp[b] = reinterpret_cast<const unsigned*>(meta) + row * nch + qd;
      qp[b] = reinterpret_cast<const uint2*>(qh) + row * nch + qd;
      pin_pointer(hp[b]);
      pin_pointer(qp[b]);
    } else if constexpr (QK || AW) {
      hp[b] = reinterpret_cast<const unsigned*>(meta) + (QK ? row * (nch >> 1) + qd : row * (nch >> gshift));
      pin_pointer(hp[b]);
    } else {
      sp[b] = reinterpret_cast<const unsigned short*>(meta) + row * nch + KS * qd;
      pin_pointer(sp[b]);
    }
    pin_pointer(wp[b]);
  }
  // this thread's x slots: 4 values of rows r and r + 8 at column k (two 8-byte loads), stored as one
  const __half* xp0[XV];
  const __half* xp1[XV];
  int xs_st[XV];
#pragma unroll
  for (int i = 0; i < XV; ++i) {
    const int L = t + i * THREADS, p = (unsigned)L / (BK / 4), kq = (unsigned)L % (BK / 4);
    const int r = 16 * (p >> 3) + (p & 7);
    xp0[i] = x + (i64)min(m0 + r, M - 1) * K + 4 * kq;
    xp1[i] = x + (i64)min(m0 + r + 8, M - 1) * K + 4 * kq;
    xs_st[i] = (p * PS + (int)((unsigned)kq / (8 * KS)) * QS + (int)((unsigned)kq % (8 * KS))) * 8;
    pin_pointer(xp0[i]);
    pin_pointer(xp1[i]);
    pin_int(xs_st[i]);
  }
  int a_off = (g * PS + qd * QS) * 8;  // this lane's slots in row pair g of tile 0 (halves)
  pin_int(a_off);
  unsigned magic = 0x64006400u;
  asm volatile("" : "+r"(magic));

  struct Regs {  // one ring slot: a step's W chunks and scales, and (between its load and its stash) x
    uint4 w[NB][KS];
    ScaleWord<QK || AW || Q6> s[NB][KS];
    uint2 hb[Q6 ? NB : 1];  // q6_k: the chunk's high bits
    uint2 x0[XV], x1[XV];
  };
  auto fetch_w = [&](Regs& r, int st) {
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int j = 0; j < KS; ++j) {
        r.w[b][j] = ldg_pf<PF>(wp[b] + 4 * KS * st + j);
        if constexpr (Q6) {
          r.s[b][j] = ldg_pf<PF>(hp[b] + 4 * st);
          r.hb[b] = __ldg(qp[b] + 4 * st);
        } else if constexpr (QK)
          r.s[b][j] = ldg_pf<PF>(hp[b] + 4 * (st >> 1));  // a super-block is two steps
        else if constexpr (AW)
          r.s[b][j] = ldg_pf<PF>(hp[b] + ((4 * st + qd) >> gshift));  // chunk 4 st + qd's group
        else
          r.s[b][j] = ldg_pf<PF>(sp[b] + 4 * KS * st + j);
      }
  };
  auto fetch_x = [&](Regs& r, int st) {
#pragma unroll
    for (int i = 0; i < XV; ++i) {
      r.x0[i] = __ldg(reinterpret_cast<const uint2*>(xp0[i] + st * BK));
      r.x1[i] = __ldg(reinterpret_cast<const uint2*>(xp1[i] + st * BK));
    }
  };
  auto stash_x = [&](const Regs& r, int buf) {
#pragma unroll
    for (int i = 0; i < XV; ++i)
      *reinterpret_cast<uint4*>(sh + buf * STAGE + xs_st[i]) = make_uint4(r.x0[i].x, r.x1[i].x, r.x0[i].y, r.x1[i].y);
  };

  float acc[NB][MT][4];
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[b][mt][i] = 0.f;

  // One step from shared stage buf and W set r: per half chunk (16 weights of each n8 block's row =
  // 8 pairs = 4 MMA slices) the dequantized B operands, then per slice the row tiles' 16-byte shared
  // loads (A operands) and MT x NB MMAs (independent accumulators back to back).
  auto compute = [&](const Regs& r, int buf, int st) {
    const __half* xa = sh + buf * STAGE + a_off;
#pragma unroll
    for (int j = 0; j < KS; ++j) {
      Q4kConsts kc[QK ? NB : 1];  // q4_k: chunk 4 st + qd is field 4 (st & 1) + qd of its header
      if constexpr (QK) {
#pragma unroll
        for (int b = 0; b < NB; ++b) kc[b] = q4k_consts(r.s[b][0], lane, 4 * (st & 1) + qd);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned bf[NB][8];
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          unsigned lo[4], hi[4];
          if constexpr (Q6) {  // half h: words (x, y) or (z, w), scale sc_h, high bits hb.x or hb.y
            const unsigned mw = r.s[b][0], hw = h ? r.hb[b].y : r.hb[b].x;
            const __half d = __ushort_as_half((unsigned short)(mw >> 16));
            const __half2 dsc = __half2half2(__hmul(d, __int2half_rn((int)(signed char)((mw >> (8 * h)) & 0xFF))));
            q6_k_word(h ? r.w[b][j].z : r.w[b][j].x, hw, dsc, magic, lo);
            q6_k_word(h ? r.w[b][j].w : r.w[b][j].y, __funnelshift_r(hw, hw, 8), dsc, magic, hi);
          } else if constexpr (QK) {
            q4_k_word(h ? r.w[b][j].z : r.w[b][j].x, kc[b], magic, lo);
            q4_k_word(h ? r.w[b][j].w : r.w[b][j].y, kc[b], magic, hi);
          } else if constexpr (AW) {
            const unsigned mw = r.s[b][0];
            const __half2 sc = __half2half2(__ushort_as_half((unsigned short)(mw & 0xFFFF)));
            const __half2 nlo = __hneg2(__half2half2(__ushort_as_half((unsigned short)(mw >> 16))));
            const __half2 nhi = __hadd2(nlo, h2c(960.f));  // -(64 + z): exact
            q4_0_word(h ? r.w[b][j].z : r.w[b][j].x, sc, magic, lo, nlo, nhi);
            q4_0_word(h ? r.w[b][j].w : r.w[b][j].y, sc, magic, hi, nlo, nhi);
          } else {
            const __half2 d = __half2half2(__ushort_as_half(r.s[b][j]));
            q4_0_word(h ? r.w[b][j].z : r.w[b][j].x, d, magic, lo);
            q4_0_word(h ? r.w[b][j].w : r.w[b][j].y, d, magic, hi);
          }
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            bf[b][i] = lo[i];
            bf[b][4 + i] = hi[i];
          }
        }
#pragma unroll
        for (int s = 0; s < 4; ++s) {  // slice-major: MT x NB independent accumulators between dependent MMAs
          uint4 a[MT];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) a[mt] = *reinterpret_cast<const uint4*>(xa + (mt * 8 * PS + 8 * j + 4 * h + s) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int b = 0; b < NB; ++b)
              mma_16816(acc[b][mt], a[mt].x, a[mt].y, a[mt].z, a[mt].w, bf[b][2 * s], bf[b][2 * s + 1]);
        }
      }
    }
  };

  Regs rs[R];
  if (s_begin < s_end) {
#pragma unroll
    for (int u = 0; u < PDW; ++u)
      if (s_begin + u < s_end) fetch_w(rs[u], s_begin + u);
  }
  pdl_wait();  // sm_90 with PDL: the weights above load while the previous kernel finishes; x after it
  if (s_begin < s_end) {
#pragma unroll
    for (int u = 0; u < PDX; ++u)
      if (s_begin + u < s_end) fetch_x(rs[u], s_begin + u);
    stash_x(rs[0], 0);
  }
  __syncthreads();
  block_trace(tr, 1);
  for (int st0 = s_begin; st0 < s_end; st0 += R) {
#pragma unroll
    for (int u = 0; u < R; ++u) {  // step st: its W in rs[u], its x in stage (st - s_begin) & 1
      const int st = st0 + u;
      if (st < s_end) {
        const int buf = (st - s_begin) & 1;
        if (st + PDW < s_end) fetch_w(rs[(u + PDW) % R], st + PDW);
        if (st + PDX < s_end) fetch_x(rs[(u + PDX) % R], st + PDX);
        compute(rs[u], buf, st);
        if (st + 1 < s_end) stash_x(rs[(u + 1) % R], buf ^ 1);
        __syncthreads();
        if (st == s_begin) block_trace(tr, 2);
      }
    }
  }
  block_trace(tr, 3);

  pdl_launch_dependents();  // the next kernel's blocks may start during this epilogue
  // epilogue: accumulators -> fp32 staging [BM][C_LD] (the stages are free after the last barrier)
  float* cs = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float* c = cs + (mt * 16 + g) * C_LD + warp * WN + 8 * b + 2 * qd;
      *reinterpret_cast<float2*>(c) = make_float2(acc[b][mt][0], acc[b][mt][1]);
      *reinterpret_cast<float2*>(c + 8 * C_LD) = make_float2(acc[b][mt][2], acc[b][mt][3]);
    }
  __syncthreads();
  gemm_epilogue<BM, BN, C_LD, THREADS, GLU, ROPE, NORM>(cs, out, bias, ws, counters, M, N, m0, n0, t, last_block, tr,
                                                        rope, rn, no);
#endif
}

// gemm_rd_<format>_<tile> (gemm_ops.RD_TILES): rows x features per block, K per step. The packed GEMM's
// launch signature (qh: q6_k's high bits, gchunks: awq's chunks per group). q4_0's _trace entries (not
// routed; tools/gpu/gemm_trace.py) take a trace pointer after it and record (common.cuh block_trace) at
// point 0 entry, 1 the first W / x loads out and x's first step stashed, 2 the first step done, 3 the K
// loop done, 4 the tile (or split-K partial) stored, 5 the split-K count resolved, 6 block end.
// _glu entries (gemm_ops.gemm_launch(glu=True)): W = [gate | up] (N rows), out = silu(gate) * up (N / 2
// wide), a tile's features half gate rows, half the same up rows (N / 2 a multiple of BN / 2).
// _rope entries (gemm_ops.gemm_launch(rope=...), linear_fused_ops' rms_norm_qkv_rotary_cache for decode
// batches): W = [q | k | v] (N rows), out = q rotated ([M][q_size]), k rotated and v written into the paged
// cache, FP16 or FP8 (kv: KV_F16 / KV_E4M3 / KV_E5M2, scale 1) (gemm_epilogue.cuh rope_store8: linear then
// rotary_and_cache, bit for bit); one launch where the unfused route takes two, three with FP8 (H200 s27,
// llama3-8b q4_0: qkv + rotary 14.88 -> 13.81 us a layer at batch 32, busy per step -1.6% / -1.2% at batch
// 32 / 64; benchmarks/results/h200-2026-12-02-s27; E4M3 steps -4.3% at batch 32, s28).
// _glu and _rope entries take a RowNorm after steps_per_split (ss, ss_tiles, eps; ss null: unscaled): x is then
// a _norm entry's x~ and each row's sums are scaled by its RMSNorm scale (linear_norm_ops).
// _norm entries (gemm_ops.gemm_launch(norm=...), linear_norm_ops for decode batches: o / down in front of the
// next norm): out = x~ = fp16(gamma r'), res_out = r' = fp16(res + y), ss = the tile's sums of r'^2 (N % BN == 0).
#define GEMM_RD_ENTRY(NAME, F, MT, NB, KS, PDW, PDX, PF, GLU, ROPE, NORM, TR, RA, RN, NO, ...)              \
  extern "C" __global__ void __launch_bounds__(128) NAME(                                                \
      __half* out, const __half* x, const unsigned char* q, const unsigned char* qh,                     \
      const unsigned char* meta, const __half* bias, float* ws, unsigned* counters, int M, int N,        \
      int K, int gchunks, int steps_per_split __VA_ARGS__) {                                             \
    gemm_rd<F, MT, NB, KS, PDW, PDX, PF, GLU, ROPE, NORM>(out, x, q, qh, meta, bias, ws, counters, M, N, \
                                                          K, gchunks, steps_per_split, TR, RA, RN, NO);  \
    block_trace(TR, 6);                                                                                  \
  }
#define GEMM_RD_ROPE_PARAMS                                                                               \
  , const i64 *positions, const i64 *slots, const float *cos_sin, __half *k_cache, __half *v_cache,      \
      int q_size, int kv_size, int head_dim, int rot, int kv
#define GEMM_RD_ROPE_ARGS QkvRope{positions, slots, cos_sin, k_cache, v_cache, q_size, kv_size, head_dim, rot, kv}
#define GEMM_RD_FMT(FMT, F, TILE, MT, NB, KS, PDW, PDX, PF)                                               \
  GEMM_RD_ENTRY(gemm_rd_##FMT##_##TILE, F, MT, NB, KS, PDW, PDX, PF, false, false, false, nullptr,        \
                QkvRope{}, RowNorm{}, NormOut{}, )                                                        \
  GEMM_RD_ENTRY(gemm_rd_##FMT##_##TILE##_glu, F, MT, NB, KS, PDW, PDX, PF, true, false, false, nullptr,   \
                QkvRope{}, GEMM_RN_ARGS, NormOut{}, GEMM_RN_PARAMS)                                       \
  GEMM_RD_ENTRY(gemm_rd_##FMT##_##TILE##_rope, F, MT, NB, KS, PDW, PDX, PF, false, true, false, nullptr,  \
                GEMM_RD_ROPE_ARGS, GEMM_RN_ARGS, NormOut{}, GEMM_RN_PARAMS GEMM_RD_ROPE_PARAMS)           \
  GEMM_RD_ENTRY(gemm_rd_##FMT##_##TILE##_norm, F, MT, NB, KS, PDW, PDX, PF, false, false, true, nullptr,  \
                QkvRope{}, RowNorm{}, GEMM_NORM_ARGS, GEMM_NORM_PARAMS)
#define GEMM_RD_Q4_0(TILE, MT, NB, KS, PDW, PDX, PF)                                                      \
  GEMM_RD_FMT(q4_0, F_Q4_0, TILE, MT, NB, KS, PDW, PDX, PF)                                               \
  GEMM_RD_ENTRY(gemm_rd_q4_0_##TILE##_trace, F_Q4_0, MT, NB, KS, PDW, PDX, PF, false, false, false, trace, \
                QkvRope{}, RowNorm{}, NormOut{}, , unsigned long long* trace)
#define GEMM_RD(TILE, MT, NB, KS, PDW, PDX, PF)                                                           \
  GEMM_RD_Q4_0(TILE, MT, NB, KS, PDW, PDX, PF) GEMM_RD_FMT(q4_k, F_Q4_K, TILE, MT, NB, KS, PDW, PDX, PF)    \
  GEMM_RD_FMT(awq, F_AWQ, TILE, MT, NB, KS, PDW, PDX, PF) GEMM_RD_FMT(q6_k, F_Q6_K, TILE, MT, NB, KS, PDW, PDX, PF)
GEMM_RD(r32, 2, 2, 1, 2, 2, 0)     // 32 x 64, K-steps of 128, W and x two steps ahead (route: 17..64 rows)
GEMM_RD(r32w, 2, 4, 1, 2, 1, 128)  // 32 x 128, x one step ahead, W with L2 prefetch (route: 17..64 rows,
                                   // N >= 16384 or K >= 8192)
GEMM_RD_Q4_0(r64, 4, 2, 1, 2, 2, 0)  // 64 x 64 (A/B since s16: the 32-row tiles two high beat it, gemm_ops.gemm_shape)
GEMM_RD(r16, 1, 2, 1, 2, 2, 0)     // 16 x 64: one row tile (half r32's MMAs and x; route: 3..16 rows)
GEMM_RD(r16w, 1, 4, 1, 2, 1, 128)  // 16 x 128: r32w at one row tile (route: 3..16 rows, as r32w's matrices)
// Timed on the H200 and dropped (s11-s12, benchmarks/results/h200-2026-11-30-s12): K-steps of 256 (KS 2),
// W refilled right after its step's MMAs (a ring of PDW sets: r32 157 -> 128 registers), W 3 or 4 steps
// ahead, 8-warp blocks of r32's / r64's warp tile (half the x traffic per W byte): none beat the three
// above by more than 1% on a llama3-8b matrix, so neither W latency nor x traffic is what holds them back.
// s15: registers held for one more block per SM (r64 / r32w at 3, r32 at 4; a few spills, W or x one step
// ahead) 8-100% slower on every llama3-8b matrix at M 32 / 64.
// s16 (benchmarks/results/h200-2026-11-30-s16): one n8 block per warp (r32n 124 registers, 4 blocks per SM;
// r64n 217): r32n 15-51% slower at M 32, r64n 23-58% at M 64; r32w with x two steps ahead (216) 49.2 / 29.8
// us on gate_up / down (r32w 43.0 / 26.7), W three ahead too (248) 43.1 / 27.5; streamed (stream-K: 264
// blocks sharing tiles x K-steps evenly, so no SM holds one block beside SMs holding two) 1.2-1.6x slower
// on every matrix: each extra tile a block starts pays the W pipeline's ramp again (~3.5 us) and its
// parts' merge (~4.5 us), more than the balance saves.
// Where the K loop's time goes (s29, benchmarks/results/h200-2026-12-02-s29, this kernel with one part removed at
// M 32): gate_up GLU 40.7 us; without the MMAs 17.0 (every load and dequantization kept: memory-bound, 3.9 TB/s on
// the row-major planes), the MMAs alone 26.5, without dequantization / barrier / half the x loads level. The
// MMAs run at ~55% of mma.sync's measured rate (1,344 FMA/clk/SM) and barely overlap the rest: ptxas spaces a
// warp's HMMAs 6 cycles apart and two warps share a scheduler. The lever left is MMA warps that only issue MMAs.
