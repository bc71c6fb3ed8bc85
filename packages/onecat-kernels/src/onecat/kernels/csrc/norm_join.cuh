// norm_join.cuh: the operands of the residual add + RMSNorm split over two projections' epilogues (linear_norm_ops),
// one pair for both forms: the register-direct GEMMs (gemm_epilogue.cuh, decode batches) and the M = 1 GEMVs
// (gemv_epilogue.cuh, batch 1).
#pragma once
#include "common.cuh"

// The producer (o / down in front of a norm): y = its output (+ bias), rounded to FP16 as linear's; r' = fp16(y +
// res) (rms_norm.cu's residual add) to res_out; x~ = fp16(r' gamma) to its output; its partial sums of r'^2 to ss.
// GEMM: ss[gm][blockIdx.x], a tile's columns (N % BN == 0, gemm_ops checks); GEMV: ss[n0 / R], a warp's R rows.
struct NormOut {
  const __half* res;    // [M][N] the residual stream
  __half* res_out;      // [M][N] the new one
  const __half* gamma;  // [N] the next RMSNorm's weight
  float* ss;            // the partial sums (above)
  unsigned char* xs;    // GEMM only, null unless set: x~ in gemm_wg.cu's x-stage layout here, not row-major to the
                        // output (the wgmma tile behind copies its stages whole: gemm_ops.wg_x_stages, XStages)
};
// bytes of one k16 slice of 64 rows in a wgmma x stage, padded (gemm_wg.cu's SLP; gemm_ops.WG_X_SLICE)
#define WG_X_SLICE 2064
// 8 FP16 values of x [M][K] (K % 128 == 0), row gm, columns gn .. gn + 7 (gn % 8 == 0), stored where gemm_wg.cu's
// x stages hold them (x_stages.wg_x_stages): row gm = 64 tile + 8 rg + g, its columns gn + 2 p (p = 2 hs + hc) =
// 128 step + 32 i + 8 j + 2 p: slice 2 j + hs of the step, core matrix hc, 8-row group rg, row g, pair i. The
// writers: a _norm entry's x~ (NormOut.xs) and a GLU entry's output (gemm_wg.cu's _glu_xb_xs).
ONECAT_DEVICE void x_stage_store8(unsigned char* __restrict__ xs, int gm, int gn, int K, uint4 h) {
  unsigned char* s = xs + ((i64)(gm >> 6) * (K >> 7) + (gn >> 7)) * (8 * WG_X_SLICE) +
                     2 * ((gn >> 3) & 3) * WG_X_SLICE + (((gm >> 3) & 7) * 16 + (gm & 7)) * 16 + ((gn >> 5) & 3) * 4;
  *reinterpret_cast<unsigned*>(s) = h.x;
  *reinterpret_cast<unsigned*>(s + 128) = h.y;
  *reinterpret_cast<unsigned*>(s + WG_X_SLICE) = h.z;
  *reinterpret_cast<unsigned*>(s + WG_X_SLICE + 128) = h.w;
}
// The consumer (x = x~): row gm's sums scaled by rsqrt(sum_t ss[gm][t] / hidden + eps); ss null: no scaling (the
// entries' plain use).
struct RowNorm {
  const float* ss;  // [M][tiles], the producer's
  int tiles, hidden;
  float eps;
};
