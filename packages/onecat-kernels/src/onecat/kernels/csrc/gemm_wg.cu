// gemm_wg.cu: the decode-batch q4_0 GEMM on Hopper's warpgroup MMA (wgmma, sm_90a) for 33..64 rows of the
// wide matrices: y[M, N] = x[M, K] @ W[N, K]^T, one 64-row tile per block (so each weight is dequantized
// once for all rows), the q4_0 PackedWeight as the GEMV reads it, K % 128 == 0. FP16 in and out, FP32
// accumulation. Built for sm_90a only (build.ARCH_FEATURES); gemm_ops routes it on capability 9.0 (gate_up
// and down of a llama3-8b-sized layer, gemm_shape); elsewhere its entries trap (the sm_70 gate compiles them
// to that).
//
// Why: past 32 rows gemm_rd.cu stacks two 32-row tiles, dequantizing every weight twice, and its pace is
// the per-block dequantize-and-multiply chain, not memory (H200 s23, benchmarks/results/h200-2026-12-01-s23:
// with W's loads removed a 32-row wgmma tile still took 32 of its 40 us on gate_up). Here one warpgroup
// dequantizes once into wgmma's register A operand and the tensor cores multiply all 64 rows
// asynchronously: llama3-8b q4_0 gate_up 28672 x 4096 at M 64 72.3 -> 63.3 us, M 48 72.1 -> 61.1, down
// 4096 x 14336 38.3 -> 37.4 / 38.4 -> 35.8 (s23 call 13; qkv / o stay on gemm_rd.cu: 10% slower here);
// llama3-8b q4_0 decode steps at context 512 (call 14, one process each) batch 64 7,093 -> 6,449 us, batch
// 48 6,827 -> 6,093.
//
//  * Block: one consumer warpgroup (warps 0-3) + two producer warps (4, 5); 128 features as two m64
//    tiles (T = 0, 1), the 64 rows of x as wgmma's N; K in steps of BK = 128 (4 q4_0 chunks per W row).
//  * A = W from registers: warp w, lane (g, q) holds rows 16 w + g and 16 w + g + 8 of each tile (the
//    m16n8k16 A fragment, as wgmma lays a warp's 16 rows), chunk q of the step (one 16-byte load per
//    row, W 3 steps ahead in a register ring), dequantized by gemm_dequant.cuh's q4_0_word into 4 FP16
//    pairs per word. Word j of the chunk (weights 8j .. 8j + 7) gives slices 2j, 2j + 1 of the step:
//    pairs (0, 1) / (2, 3) are the lane's k positions (2q, 2q + 1) / (2q + 8, 2q + 9) of slice 2j, pairs
//    (4, 5) / (6, 7) those of slice 2j + 1, so the MMA's k order within a slice is permuted (position
//    2q + r <-> real k 32 q + 8 j + 4 (slice & 1) + r, 2q + 8 + r <-> that + 2) and x follows it.
//  * B = x from shared memory (K-major, no swizzle; descriptor LBO 128: a slice's two 8-k core matrices,
//    SBO 256: 8-row groups): slice s of a stage holds for row n its core matrix 0 row = the 4-byte pairs
//    x[n][32 q + 8 (s / 2) + 4 (s & 1) + {0, 1}], q = 0..3, and core matrix 1 the pairs at + 2; slices
//    16 bytes apart past their 2 KB. Producer lane (g, j) loads the pieces j (8 consecutive k: slices 2j
//    and 2j + 1) of a row's 4 chunks (4 lanes read 64 contiguous bytes: 8 lines per load instruction) and
//    stores each core-matrix row it then holds whole as one 16-byte store (the padding keeps a quarter
//    warp's 8 stores in distinct banks). s24: gate_up 28672 x 4096 at M 64 63.2 -> 58.3 us (GLU 65.9 ->
//    58.9) against a lane per chunk (16 lines per load, 4-byte stores), every llama3-8b matrix 2-10% faster.
//  * Producers take turns (step st: warp 4 + st % 2, stage st % 2): fence.proxy.async (MEMBAR.ALL.CTA +
//    FENCE.VIEW.ASYNC.S) waits for every load the warp has in flight, so a producer loads one step at a
//    time. Named barriers: FULL (x staged) and EMPTY (the step's MMAs done) per stage, 160 threads each.
//  * A step is 4 groups of 2 slices (one word per row: 4 rows x q4_0_word), each 2 slices x 2 tiles of
//    wgmma committed as one group; a group's A registers are rewritten only after wait_group 1 (the group
//    two back is done), so the dequantization of a group overlaps the MMAs of the one before.
//  * Epilogue: gemm_epilogue.cuh (FP16 out, split-K partials merged by the tile's last block, GLU).
//  * Tried on the H200 (s23, the diffs kept there): 32-row wgmma tiles (level with gemm_rd.cu on gate_up /
//    down, slower on qkv / o), x staged by the consumer warps (its proxy fence serialized each step on the
//    loads in flight), W 1-5 steps ahead, 3 wgmma groups in flight, a tiled W layout (-5%): none lifted
//    the per-block pace.
//  * Where the step goes (s25, benchmarks/results/h200-2026-12-01-s25, gate_up GLU M 64: 58.7 us): the bare SS
//    m64n64k16 pipeline takes 26.8 us (~1,260 FMA/clk/SM at N 64, mma.sync's rate), the dequantization alone
//    28.6 and does not overlap the MMAs (both, no loads: 42.4), the x handoff adds 6-12, the loads ~10 (W from
//    L2 saves only 4.5). ptxas puts every W load on one scoreboard, so the register ring's lead is ~1 step; W
//    through a cp.async ring (3 steps truly in flight) was no faster (gate_up 63.9). More K splits lose
//    (gate_up x2 74.7). Dequantizing warpgroups writing A to shared memory for an SS-only MMA warpgroup, each
//    loading its own W and x (warp-specialized-wd.diff there) were correct but 35-48% slower: a warp that fences
//    keeps no load in flight across the fence. Next: that split with W / x by TMA (async proxy) into a ring.
//  * w64b2 (s39, benchmarks/results/h200-2026-12-06-s39): the tile held to 168 registers for two blocks per SM (W one
//    step ahead; the producers' row offsets from shared memory). gate_up's 224 tiles then run as one wave instead of
//    1.7 at one block per SM: GLU M 64 59.0 -> 48.8 us, M 48 57.6 -> 47.4 (H100); the q4_0 LM head 216.6 ->
//    176.3 (s40), so gemm_ops.gemm_shape takes it wherever a grid passes one wave at one block per SM. Two
//    consumer warpgroups in one block instead (a 64-feature half each; s39 call 1, H100) were level; the x
//    producers then bound them (ncu: barrier stalls 0.52 -> 1.12 per issued instruction), and four producers with
//    four x stages (66 KB dynamic) gained 2-5% (s39 call 4).
//  * W by prefetch.global.L2 2 or 4 steps ahead of the register ring (s41, benchmarks/results/h100-2026-12-06-s41,
//    l2a.diff): w64b2 2-4% slower (gate_up GLU, LM head), w64 10% (down): the L2::128B hint already has the next
//    step's W in L2, and W's latency is not what the tile waits on.
//  * s49 (benchmarks/results/h100-2026-12-07-s49, H100): tools/gpu/wgmma_peak.py (operands fixed, no loads) runs RS
//    m64n64k16 at 937 TFLOP/s with two warpgroups an SM (95% of the card's dense FP16 peak; with a q4_0-like rebuild
//    of 8 A registers between groups 903), level with N 128 / 256 and SS. ncu's source page on w64b2 (gate_up M 64):
//    the consumers' largest stall is W's load (long scoreboard, 26% of their samples). Tried and removed (s49-s50,
//    kept in git, ba217ea..33d0aba): W and its scales through a 4-step cp.async ring in dynamic shared memory
//    (w64b2s: the same bits, gate_up GLU M 64 ~1% faster, level in a batch-64 step), that with the next step's W
//    read at a step's end (w64b2e: level) and with four A-register sets / x stages (w64b2q: 8% slower).
//  * s50 (benchmarks/results/h200-2026-12-07-s50, H200; the DIAG entries): gate_up M 64 takes 48.2 us; without W's
//    loads 40.3, without x's staging 40.0, without both 33.1, without the stage barriers too 30.8 (the bare consumer
//    loop), and that with half the dequantization 23.8. The bare loop is throughput-bound: at 1 / 2 / 3 blocks an SM
//    it costs 15.9 / 13.8 / 13.2 SM-us a tile, ~1,280 of the SM's 2,048 FMA a clock. Its dequantization and its MMAs
//    do not run side by side at full rate, so hiding a latency gains little; fewer instructions an FMA in the
//    consumer warps is what would. Prepared, not run: _qd (one HFMA2 a pair) and XB (x's stages by bulk copies).
//  * s51 (benchmarks/results/h100-2026-12-07-s51, H100): _qd 49.0 us against the route's 48.7 (the bare loop 30.3 ->
//    26.4: fewer dequantization instructions do not shorten the route). XB 44.7 against 48.8, bit-equal: routed as
//    _glu_xb for gate_up behind o's _norm entry, which writes x~ in the stage layout (NormOut.xs; linear_norm_ops).
#include "gemm_epilogue.cuh"
#include "gemm_dequant.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_OK 1
#else
#define WG_OK 0
#endif

// shared-memory matrix descriptor: no swizzle, LBO 128 bytes (k direction), SBO 256 bytes (8-row groups)
ONECAT_DEVICE unsigned long long wg_desc(unsigned saddr) {
  return (unsigned long long)((saddr & 0x3FFFFu) >> 4) | (8ull << 16) | (16ull << 32);
}
ONECAT_DEVICE void wg_fence() {
#if WG_OK
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
ONECAT_DEVICE void wg_commit() {
#if WG_OK
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
ONECAT_DEVICE void wg_wait() {
#if WG_OK
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
ONECAT_DEVICE void fence_proxy_async() {
#if WG_OK
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
// XB (s50, not routed): x's stages by one bulk copy (cp.async.bulk, the async proxy: no producer registers, no proxy
// fence) from stages the kernel in front would write (gemm_ops.wg_x_stages), completed on an mbarrier a stage
ONECAT_DEVICE void mbar_init(unsigned a, unsigned count) {
#if WG_OK
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(count) : "memory");
#endif
}
ONECAT_DEVICE void bulk_stage(unsigned dst, const void* src, unsigned bytes, unsigned mbar) {
#if WG_OK
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mbar), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(mbar) : "memory");
#endif
}
ONECAT_DEVICE void mbar_wait(unsigned a, unsigned parity) {
#if WG_OK
  asm volatile("{\n.reg .pred p;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT;\n}"
               ::"r"(a), "r"(parity) : "memory");
#endif
}
template <int N>
ONECAT_DEVICE void wg_pin(float (&d)[N]) {  // accumulators ordered after the wait (not read early)
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (64 x 64, fp32) += A (64 x 16 from registers) . B (16 x 64, shared descriptor); a thread's d[4 j + e]
// are rows 16 warp + g (+ 8 for e >= 2), columns 8 j + 2 q + (e & 1)
ONECAT_DEVICE void wg_mma64(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
#if WG_OK
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
      "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, 1, 1, 1, 0;"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b)
      : "memory");
#else
  __trap();
#endif
}

// Named barriers (id >= 1; 0 is __syncthreads) between the consumer warpgroup and the producer warps.
ONECAT_DEVICE void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
ONECAT_DEVICE void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }

// NS shared stages of x, W PDW steps ahead, W loads with an L2 prefetch of PF bytes; warps 0-3 the
// consumer warpgroup (W, dequantization, wgmma), warps 4 and 5 the producers of x. BPS: blocks per SM the
// registers are held to (2: 168 registers, so the producers read their rows' offsets from shared memory).
// DIAG (diagnostics, outputs wrong; the _nw / _nx / _nwx entries): bit 0 no W loads (the consumers dequantize words
// made from the step number), bit 1 no x staging (the producers only take and give the stages' barriers), bit 2 no
// handoff (the producers stop at once, the consumers take no stage barrier: with bits 0 and 1, _nwxb, the consumer loop
// alone, gemm_wg.cu's counterpart of tools/gpu/wgmma_peak.py's dq rows): route - entry is what W's loads / x's
// staging / the stage barriers cost the tile. Bit 3 (_nwxbh, with the others): half the dequantization (tile 1
// multiplies tile 0's A, as wgmma_peak.py's dq rows do): what the dequantization's share of the loop is. Bit 4 (_qd,
// and _nwxbq with bits 0-2): q x d by gemm_dequant.cuh's q4_0_word_qd, one HFMA2 a pair and two HMUL2 a row a step
// (the -8 d offset left out): what that cheaper dequantization would save.
// XL1 (a diagnostic, outputs wrong): every step stages the x of the split's first step, so after it x comes from
// L1, not L2: the time it saves is what x's L2 traffic costs (every block reads its rows' x whole, 64 x K x 2
// bytes: at M 64 gate_up's 224 blocks read 117 MB of x from L2 beside 66 MB of W).
template <int NS, int PDW, int PF, bool GLU, bool NORM = false, int BPS = 1, bool XL1 = false, int DIAG = 0,
          bool XB = false>
__device__ void gemm_wg(__half* __restrict__ out, const __half* __restrict__ x, const unsigned char* __restrict__ q,
                        const unsigned char* __restrict__ meta, const __half* __restrict__ bias,
                        float* __restrict__ ws, unsigned* __restrict__ counters, int M, int N, int K,
                        int steps_per_split, const RowNorm& rn = RowNorm{}, const NormOut& no = NormOut{},
                        unsigned long long* tr = nullptr) {
  constexpr int NT = 64, P = 2, THREADS = 128 + 32 * P, BN = 128, BK = 128, R = PDW + 1;
  constexpr int SYNC = 128 + 32;  // threads at a stage's barriers: the warpgroup and the stage's producer
  static_assert(NS % P == 0, "a producer warp keeps its stages");
  constexpr int RG = NT / 8;                    // 8-row groups of x
  // bytes of a slice, of its place in a stage (padded by 16 so that a producer's 16-byte stores of one
  // row's slices fall in distinct banks), of a step's x
  constexpr int SL = RG * 256, SLP = SL + 16, STAGE = 8 * SLP;
  constexpr int C_LD = BN + 4, CB = NT * C_LD * 4, AB = NS * STAGE, BYTES = AB > CB ? AB : CB;
  static_assert(NS >= 2 && 1 + 2 * NS <= 16 && BYTES <= 48 * 1024, "tile");
  static_assert(SLP == WG_X_SLICE, "the x-stage layout norm_store writes (NormOut.xs)");
  __shared__ __align__(128) unsigned char smem[BYTES];
  __shared__ unsigned last_block;
  __shared__ __align__(8) unsigned long long xfull[XB ? NS : 1];  // XB: stage s's bulk copy landed

  block_trace(tr, 0);
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5, g = lane >> 2, qd = lane & 3;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * NT;
  const int nch = K >> 5, nsteps = nch / 4;
  const int s_begin = blockIdx.z * steps_per_split, s_end = min(nsteps, s_begin + steps_per_split);
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  // stage of step st: (st - s_begin) % NS; barriers FULL 1 + s (x staged), EMPTY 1 + NS + s (its MMAs done)

  if constexpr (XB) {
    if (t == 0)
      for (int s = 0; s < NS; ++s) mbar_init((unsigned)__cvta_generic_to_shared(&xfull[s]), 1);
    __syncthreads();
  }

  float acc[2][NT / 2];
#pragma unroll
  for (int T = 0; T < 2; ++T)
#pragma unroll
    for (int i = 0; i < NT / 2; ++i) acc[T][i] = 0.f;

  if (XB && warp >= 4) {  // warp 4 takes each stage back (EMPTY) and has lane 0 copy the step's x into it
    pdl_wait();
    for (int st = s_begin; warp == 4 && st < s_end; ++st) {
      const int stage = (st - s_begin) % NS;
      if (st - s_begin >= NS) bar_sync(1 + NS + stage, SYNC);  // the MMAs of step st - NS are done
      if (lane == 0)
        bulk_stage(sbase + stage * STAGE, reinterpret_cast<const unsigned char*>(x) +
                   ((i64)blockIdx.y * nsteps + st) * STAGE, STAGE, (unsigned)__cvta_generic_to_shared(&xfull[stage]));
    }
  } else if (warp >= 4) {  // producer warp pw: every row of x for the steps st = s_begin + pw (mod P)
    const int pw = warp - 4;
    // lane (g, j = qd) loads pieces j of the 4 chunks of its row: 64 bytes of a row per 4 lanes, 8 lines per
    // load instruction (16 with a lane per chunk: s24, 8% slower on gate_up)
    // BPS 1: a pointer per row group, held. BPS 2 (168 registers, of which a step's x takes 128): the row groups'
    // element offsets read per step from shared memory by volatile loads, which ptxas cannot hoist into held
    // registers (hoisted, 6 of them spilled)
    constexpr bool XO = BPS == 2;
    const __half* xp[XO ? 1 : RG];
    const __half* xb = XO ? x + 8 * qd : nullptr;
    __shared__ __align__(16) unsigned xo_s[XO ? 8 : 1][RG];
    if constexpr (!XO) {
#pragma unroll
      for (int rg = 0; rg < RG; ++rg) {
        xp[rg] = x + (i64)min(m0 + 8 * rg + g, M - 1) * K + 8 * qd;
        pin_pointer(xp[rg]);
      }
    } else {
      if (qd < RG / 4)
#pragma unroll
        for (int r = 0; r < 4; ++r)
          xo_s[g][4 * qd + r] = (unsigned)min(m0 + 8 * (4 * qd + r) + g, M - 1) * (unsigned)K;  // (+ 8 qd: xb)
      __syncwarp();
    }
    pdl_wait();
    // The proxy fence below waits for every load the warp has in flight, so a warp loads one step at a
    // time: P warps take turns to keep P steps' loads in flight.
    for (int st = s_begin + pw; !(DIAG & 4) && st < s_end; st += P) {
      uint4 v[RG][4];
      unsigned xo[RG];
      if constexpr (XO) {
        const unsigned sa = (unsigned)__cvta_generic_to_shared(&xo_s[g][0]);
#pragma unroll
        for (int h = 0; h < RG / 4; ++h)
          asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(xo[4 * h]), "=r"(xo[4 * h + 1]), "=r"(xo[4 * h + 2]), "=r"(xo[4 * h + 3])
                       : "r"(sa + 16 * h));
      }
#pragma unroll
      for (int rg = 0; rg < RG && !(DIAG & 2); ++rg) {
        const __half* row = XO ? xb + xo[rg] : xp[rg];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          v[rg][i] = __ldg(reinterpret_cast<const uint4*>(row + (XL1 ? s_begin : st) * BK + 32 * i));
      }
      const int stage = (st - s_begin) % NS;
      if (st - s_begin >= NS) bar_sync(1 + NS + stage, SYNC);  // the MMAs of step st - NS are done
      // piece j of chunk i = word j of W's chunk i: slices 2j (pairs x, y) and 2j + 1 (pairs z, w) at
      // position i of their core-matrix row g: the lane's 4 chunks make one 16-byte row per store
#pragma unroll
      for (int rg = 0; rg < RG && !(DIAG & 2); ++rg) {
        uint4* p = reinterpret_cast<uint4*>(smem + stage * STAGE + 2 * qd * SLP + g * 16 + 256 * rg);
        const uint4* u = v[rg];
        p[0] = make_uint4(u[0].x, u[1].x, u[2].x, u[3].x);  // slice 2j, core matrix 0
        p[8] = make_uint4(u[0].y, u[1].y, u[2].y, u[3].y);  // slice 2j, core matrix 1 (+ 128 bytes)
        p[SLP / 16] = make_uint4(u[0].z, u[1].z, u[2].z, u[3].z);
        p[SLP / 16 + 8] = make_uint4(u[0].w, u[1].w, u[2].w, u[3].w);
      }
      fence_proxy_async();
      bar_arrive(1 + stage, SYNC);
    }
  } else {  // consumer warpgroup
    // this lane's W rows i = 2 T + r: feature 64 T + 16 warp + g + 8 r (GLU: gate rows, then the same up rows)
    const uint4* wp[4];
    const unsigned short* sp[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int f = 64 * (i >> 1) + 16 * warp + g + 8 * (i & 1);
      const i64 row = (unsigned)min(GLU ? (f < BN / 2 ? 0 : N / 2 - BN / 2) + n0 / 2 + f : n0 + f, N - 1);
      wp[i] = reinterpret_cast<const uint4*>(q + row * nch * 16) + qd;
      sp[i] = reinterpret_cast<const unsigned short*>(meta) + row * nch + qd;
      pin_pointer(wp[i]);
      pin_pointer(sp[i]);
    }
    unsigned magic = 0x64006400u, magic_hi = 0x54005400u;
    asm volatile("" : "+r"(magic), "+r"(magic_hi));
    struct Regs {
      uint4 w[4];
      unsigned short s[4];
    };
    auto fetch_w = [&](Regs& r, int st) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (DIAG & 1) {  // no W traffic: words from the step (not hoistable), scale 2^-4
          const unsigned v = (unsigned)st * 0x9E3779B1u + (unsigned)(i * 0x85EBCA6Bu + t);
          r.w[i] = make_uint4(v, v ^ 0x5A5A5A5Au, v + 0x01234567u, v ^ 0xA5A5A5A5u);
          r.s[i] = 0x2C00;
        } else {
          r.w[i] = ldg_pf<PF>(wp[i] + 4 * st);
          r.s[i] = ldg_pf<PF>(sp[i] + 4 * st);
        }
      }
    };
    // word j of the step (slices 2j, 2j + 1): A of both tiles, then 2 x 2 wgmma as one group
    unsigned a[2][2][2][4];  // [group parity][tile][slice][a0..a3]
    __half2 qc[(DIAG & 16) ? 4 : 1][2];  // DIAG bit 4: a step's -1024 d / -64 d a row (q4_0_word_qd)
    auto group = [&](const Regs& r, int stage, int j) {
      unsigned (&ag)[2][2][4] = a[j & 1];
#pragma unroll
      for (int i = 0; i < ((DIAG & 8) ? 2 : 4); ++i) {  // row i = 2 T + rr (DIAG bit 3: tile 0's rows only)
        unsigned p[4];
        const unsigned v = j == 0 ? r.w[i].x : j == 1 ? r.w[i].y : j == 2 ? r.w[i].z : r.w[i].w;
        if constexpr ((DIAG & 16) != 0)
          q4_0_word_qd(v, __half2half2(__ushort_as_half(r.s[i])), qc[i][0], qc[i][1], magic, magic_hi, p);
        else
          q4_0_word(v, __half2half2(__ushort_as_half(r.s[i])), magic, p);
        const int T = i >> 1, rr = i & 1;
        ag[T][0][rr] = p[0];      // slice 2j: (row g | g + 8, k 2q..) <- pair (0, 1)
        ag[T][0][2 + rr] = p[1];  //           (row g | g + 8, k 2q + 8..) <- pair (2, 3)
        ag[T][1][rr] = p[2];      // slice 2j + 1: pairs (4, 5), (6, 7)
        ag[T][1][2 + rr] = p[3];
      }
      wg_fence();
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const unsigned long long d = wg_desc(sbase + stage * STAGE + (2 * j + s) * SLP);
#pragma unroll
        for (int T = 0; T < 2; ++T) wg_mma64(acc[T], ag[(DIAG & 8) ? 0 : T][s], d);
      }
      wg_commit();
    };
    Regs rs[R];
    if (s_begin < s_end) {
#pragma unroll
      for (int u = 0; u < PDW; ++u)
        if (s_begin + u < s_end) fetch_w(rs[u], s_begin + u);
    }
    pdl_wait();
    block_trace(tr, 1);
    for (int st0 = s_begin; st0 < s_end; st0 += R) {
#pragma unroll
      for (int u = 0; u < R; ++u) {
        const int st = st0 + u;
        if (st < s_end) {
          const int stage = (st - s_begin) % NS;
          if (st + PDW < s_end) fetch_w(rs[(u + PDW) % R], st + PDW);
          if constexpr ((DIAG & 16) != 0)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const __half2 d = __half2half2(__ushort_as_half(rs[u].s[i]));
              qc[i][0] = __hmul2(d, h2c(-1024.f));
              qc[i][1] = __hmul2(d, h2c(-64.f));
            }
          if constexpr (XB)
            mbar_wait((unsigned)__cvta_generic_to_shared(&xfull[stage]), ((st - s_begin) / NS) & 1);
          else if (!(DIAG & 4))
            bar_sync(1 + stage, SYNC);  // x of step st staged
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            wg_wait<1>();  // the group that last used these A registers (two back) is done
            if (!(DIAG & 4) && j == 1 && st > s_begin && st - 1 + NS < s_end)  // step st - 1's last group is done too
              bar_arrive(1 + NS + (st - 1 - s_begin) % NS, SYNC);
            group(rs[u], stage, j);
          }
          // the first step's MMAs issued (not waited on). Not on the two-block tile: there this store inside the
          // wgmma pipeline made ptxas serialize every wgmma of the _trace entry (C7513; s44's w64b2 traces ran so)
          if (BPS == 1 && st == s_begin) block_trace(tr, 2);
        }
      }
    }
    wg_wait<0>();
    wg_pin(acc[0]);
    wg_pin(acc[1]);
    block_trace(tr, 3);
  }
  pdl_launch_dependents();
  __syncthreads();  // every MMA done, the stages free: the tile goes through the same shared memory
  float* cs = reinterpret_cast<float*>(smem);
  if (warp < 4) {
#pragma unroll
    for (int T = 0; T < 2; ++T)
#pragma unroll
      for (int jn = 0; jn < NT / 8; ++jn) {  // acc 4 jn + e: feature f (+ 8 for e >= 2), row 8 jn + 2 qd + (e & 1)
        const int f = 64 * T + 16 * warp + g, r0 = 8 * jn + 2 * qd;
        cs[r0 * C_LD + f] = acc[T][4 * jn];
        cs[(r0 + 1) * C_LD + f] = acc[T][4 * jn + 1];
        cs[r0 * C_LD + f + 8] = acc[T][4 * jn + 2];
        cs[(r0 + 1) * C_LD + f + 8] = acc[T][4 * jn + 3];
      }
  }
  __syncthreads();
  // split-K merge (merge_splits): at one block per SM the registers allow 11 slots x 2 splits of loads in flight
  constexpr int MERGE_MU = BPS == 1 ? 11 : 4, MERGE_ZB = BPS == 1 ? 2 : 4;
  gemm_epilogue<NT, BN, C_LD, THREADS, GLU, false, NORM, MERGE_MU, MERGE_ZB>(cs, out, bias, ws, counters, M, N, m0, n0, t,
                                                                           last_block, tr, QkvRope{}, rn, no);
}

// gemm_wg_q4_0_w64[_glu|_norm]: gemm_rd.cu's launch signature (qh, gchunks unused); 192 threads, one block per
// SM (243 registers on sm_90a); x in two stages, W three steps ahead. _glu takes gemm_rd.cu's RowNorm after
// steps_per_split, _norm its NormOut (gemm_epilogue.cuh; linear_norm_ops). gemm_wg_q4_0_w64b2[...]: the same tile
// held to two blocks per SM (168 registers), W one step ahead (deeper spills: 2 steps 48-56 bytes, 3 steps 768+).
// _trace entries (not routed; tools/gpu/gemm_trace.py, as gemm_rd.cu's): a trace pointer after the signature, and
// _xl1 entries (not routed; tools/gpu/gemm_xl1.py): the XL1 diagnostic above, plain outputs' signature.
// common.cuh block_trace by thread 0 (a consumer) at 0 entry, 1 W's first steps out and the wait passed, 2 the first
// step's MMAs issued (w64 only), 3 the K loop's MMAs done, 4 the tile or split-K partial stored, 5 the count resolved, 6 end.
#define GEMM_WG_ENTRY(NAME, GLU, NORM, PDW, BPS, XL1, DIAG, RN, NO, TR, ...)                               \
  extern "C" __global__ void __launch_bounds__(192, BPS) NAME(                                            \
      __half* out, const __half* x, const unsigned char* q, const unsigned char* qh,                      \
      const unsigned char* meta, const __half* bias, float* ws, unsigned* counters, int M, int N,         \
      int K, int gchunks, int steps_per_split __VA_ARGS__) {                                              \
    gemm_wg<2, PDW, 128, GLU, NORM, BPS, XL1, DIAG>(out, x, q, meta, bias, ws, counters, M, N, K,           \
                                                    steps_per_split, RN, NO, TR);                         \
    block_trace(TR, 6);                                                                                   \
  }
#define GEMM_WG_KINDS(T, PDW, BPS)                                                                          \
  GEMM_WG_ENTRY(gemm_wg_q4_0_##T, false, false, PDW, BPS, false, 0, RowNorm{}, NormOut{}, nullptr, )           \
  GEMM_WG_ENTRY(gemm_wg_q4_0_##T##_glu, true, false, PDW, BPS, false, 0, GEMM_RN_ARGS, NormOut{}, nullptr,     \
                GEMM_RN_PARAMS)                                                                              \
  GEMM_WG_ENTRY(gemm_wg_q4_0_##T##_norm, false, true, PDW, BPS, false, 0, RowNorm{}, GEMM_NORM_ARGS, nullptr,  \
                GEMM_NORM_PARAMS)                                                                            \
  GEMM_WG_ENTRY(gemm_wg_q4_0_##T##_trace, false, false, PDW, BPS, false, 0, RowNorm{}, NormOut{}, trace,       \
                , unsigned long long* trace)                                                                 \
  GEMM_WG_ENTRY(gemm_wg_q4_0_##T##_xl1, false, false, PDW, BPS, true, 0, RowNorm{}, NormOut{}, nullptr, )
GEMM_WG_KINDS(w64, 3, 1)
GEMM_WG_KINDS(w64b2, 1, 2)
// w64b2's diagnostics (not routed; outputs wrong by design): _nw no W loads, _nx no x staging, _nwx neither, _nwxb
// neither and no stage barriers, _nwxbh that with half the dequantization, _qd / _nwxbq the route / _nwxb with
// q4_0_word_qd
GEMM_WG_ENTRY(gemm_wg_q4_0_w64b2_nw, false, false, 1, 2, false, 1, RowNorm{}, NormOut{}, nullptr, )
GEMM_WG_ENTRY(gemm_wg_q4_0_w64b2_nx, false, false, 1, 2, false, 2, RowNorm{}, NormOut{}, nullptr, )
GEMM_WG_ENTRY(gemm_wg_q4_0_w64b2_nwx, false, false, 1, 2, false, 3, RowNorm{}, NormOut{}, nullptr, )
GEMM_WG_ENTRY(gemm_wg_q4_0_w64b2_nwxb, false, false, 1, 2, false, 7, RowNorm{}, NormOut{}, nullptr, )
GEMM_WG_ENTRY(gemm_wg_q4_0_w64b2_nwxbh, false, false, 1, 2, false, 15, RowNorm{}, NormOut{}, nullptr, )
GEMM_WG_ENTRY(gemm_wg_q4_0_w64b2_qd, false, false, 1, 2, false, 16, RowNorm{}, NormOut{}, nullptr, )
GEMM_WG_ENTRY(gemm_wg_q4_0_w64b2_nwxbq, false, false, 1, 2, false, 23, RowNorm{}, NormOut{}, nullptr, )
// w64b2 with x's stages by bulk copies (XB): `x` is x's stages (gemm_ops.wg_x_stages, or written so by a _norm entry's
// NormOut.xs), the same bits as w64b2. _glu_xb: gate_up behind o's _norm entry (linear_norm_ops, XStages); the plain
// entry for the tests and gemm_bench (s51 H100: gate_up M 64 48.8 -> 44.7 us, M 48 47.9 -> 44.0).
#define WG_XB 0, true  // DIAG 0, XB (template arguments through the entry macro's DIAG)
GEMM_WG_ENTRY(gemm_wg_q4_0_w64b2_xb, false, false, 1, 2, false, WG_XB, RowNorm{}, NormOut{}, nullptr, )
GEMM_WG_ENTRY(gemm_wg_q4_0_w64b2_glu_xb, true, false, 1, 2, false, WG_XB, GEMM_RN_ARGS, NormOut{}, nullptr,
              GEMM_RN_PARAMS)
// XB behind XB (s53): gate_up's _glu_xb_xs writes its GLU output, down's x, as x stages at `out` (gemm_epilogue.cuh
// glu_store; x_stages.XStages) and down's w64 tile copies them whole: _norm_xb (down in front of the next layer's
// norm: linear_norm_ops), _xb (plain: the last layer's down, the tests, gemm_bench).
#define WG_XS_OUT (NormOut{nullptr, nullptr, nullptr, nullptr, reinterpret_cast<unsigned char*>(out)})
GEMM_WG_ENTRY(gemm_wg_q4_0_w64b2_glu_xb_xs, true, false, 1, 2, false, WG_XB, GEMM_RN_ARGS, WG_XS_OUT, nullptr,
              GEMM_RN_PARAMS)
GEMM_WG_ENTRY(gemm_wg_q4_0_w64_xb, false, false, 3, 1, false, WG_XB, RowNorm{}, NormOut{}, nullptr, )
GEMM_WG_ENTRY(gemm_wg_q4_0_w64_norm_xb, false, true, 3, 1, false, WG_XB, RowNorm{}, GEMM_NORM_ARGS, nullptr,
              GEMM_NORM_PARAMS)
