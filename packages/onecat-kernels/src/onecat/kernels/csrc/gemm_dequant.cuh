// gemm_dequant.cuh: the q4_0 pieces the register-direct GEMMs share (gemm_rd.cu: mma.sync tiles,
// gemm_wg.cu: wgmma tiles on sm_90a): a q4_0 word dequantized to FP16 pairs in registers, and the
// W / scale loads with an L2 prefetch size.
#pragma once
#include "packed_formats.cuh"

ONECAT_DEVICE unsigned h2u(__half2 h) { return *reinterpret_cast<unsigned*>(&h); }

// (v & mask) | 0x64006400 as one LOP3 (the constant in a register: NVRTC otherwise emits two).
ONECAT_DEVICE unsigned lop_or_reg(unsigned v, unsigned mask, unsigned magic) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(v), "r"(mask), "r"(magic));
  return d;
}

// One 32-bit word of q4_0 nibbles (8 weights) times the block scale d: 4 fp16 pairs, weights (0,1) ..
// (6,7). (1024 + q) - 1032 and (1024 + 16 q) / 16 - 72 are q - 8 exactly; one HMUL2 by d rounds the
// exact product once (the weight gemm_packed.cu and the reference compute).
// awq: nlo = -(1024 + z), nhi = -(64 + z) give q - z exactly, one HMUL2 by s (the reference's weight).
ONECAT_DEVICE void q4_0_word(unsigned v, __half2 d, unsigned magic, unsigned (&p)[4], __half2 nlo = h2c(-1032.f),
                             __half2 nhi = h2c(-72.f)) {
  const unsigned v2 = v >> 8;
  const __half2 one = h2c(1.f), shi = h2c(1.f / 16.f);
  p[0] = h2u(__hmul2(__hfma2(u2h(lop_or_reg(v, 0x000F000Fu, magic)), one, nlo), d));
  p[1] = h2u(__hmul2(__hfma2(u2h(lop_or_reg(v, 0x00F000F0u, magic)), shi, nhi), d));
  p[2] = h2u(__hmul2(__hfma2(u2h(lop_or_reg(v2, 0x000F000Fu, magic)), one, nlo), d));
  p[3] = h2u(__hmul2(__hfma2(u2h(lop_or_reg(v2, 0x00F000F0u, magic)), shi, nhi), d));
}

// q4_0_word's weights without their -8 d offset, q x d, in one HFMA2 a pair instead of two instructions (s50;
// gemm_wg.cu's DIAG bit 4 times it): low nibbles as (1024 + q) d + c_lo with c_lo = -1024 d, high ones under magic
// 0x5400 as (64 + q) d + c_hi with c_hi = -64 d; each product is exact before the one rounding. A GEMM on it owes
// the -8 d x (sum of the block's x) term elsewhere.
ONECAT_DEVICE void q4_0_word_qd(unsigned v, __half2 d, __half2 c_lo, __half2 c_hi, unsigned magic_lo, unsigned magic_hi,
                                unsigned (&p)[4]) {
  const unsigned v2 = v >> 8;
  p[0] = h2u(__hfma2(u2h(lop_or_reg(v, 0x000F000Fu, magic_lo)), d, c_lo));
  p[1] = h2u(__hfma2(u2h(lop_or_reg(v, 0x00F000F0u, magic_hi)), d, c_hi));
  p[2] = h2u(__hfma2(u2h(lop_or_reg(v2, 0x000F000Fu, magic_lo)), d, c_lo));
  p[3] = h2u(__hfma2(u2h(lop_or_reg(v2, 0x00F000F0u, magic_hi)), d, c_hi));
}

// A W / scale load with an L2 prefetch size (PF bytes: 0 none, or 128: sm_75+): the L2 fetches 128
// bytes of the row around the 64 a step reads, so the next step's W waits in L2. H200 s16 (call 11,
// benchmarks/results/h200-2026-11-30-s16): r32w's gate_up 43.1 -> 40.0 us at M 32, 77.0 -> 73.0 at M 64,
// down 26.8 -> 26.2 / 39.0 -> 38.4 (that A/B's scale loads asked for 256 bytes; with 128 as routed,
// call 13: gate_up 39.4 / 72.7, down 26.0 / 38.9); 256-byte W loads 1-2% behind; r32 (SM-bound at 3
// blocks per SM) level, so it keeps plain loads.
// One load of W (uint4), q4_0's scales (u16) or the other formats' scale words (u32).
template <int PF, class T>
ONECAT_DEVICE T ldg_pf(const T* p) {
  static_assert(PF == 0 || PF == 128, "L2 prefetch size: none or 128 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  if constexpr (PF == 128) {
    T v;
    if constexpr (sizeof(T) == 16)
      asm("ld.global.nc.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    else if constexpr (sizeof(T) == 4)
      asm("ld.global.nc.L2::128B.u32 %0, [%1];" : "=r"(v) : "l"(p));
    else
      asm("ld.global.nc.L2::128B.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
  }
#endif
  return __ldg(p);
}
