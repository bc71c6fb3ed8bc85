// attention_fp8.cuh: FP8 KV-cache bit rules (Volta has no FP8 hardware: integer ops only).
// Semantics are reference.py's: stored = fp8(x / scale) rounded to nearest even, saturating to the
// largest finite value; read = float(stored) * scale.
//  * E5M2 -> FP16 is exact: the byte is the FP16 high byte.
//  * E4M3 (fn) -> FP16: ((b & 0x7f) << 7) | ((b & 0x80) << 8) is FP16 bits of value * 2^-8, for
//    normals and subnormals alike (E4M3 subnormals land on FP16 subnormals exactly); callers fold
//    the 2^8 into the scale (FP8_E4M3_UNIT). 0x7f/0xff (NaN) decode to 480: never written.
#pragma once
#include "common.cuh"

#define KV_F16 0
#define KV_E4M3 1
#define KV_E5M2 2
#define FP8_E4M3_UNIT 256.0f  // decoded E4M3 halves are value * 2^-8
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// 4 FP8 bytes of `w` (byte 0 first) -> 2 half2 words (element 0 in the low half of lo).
template <int KV>
ONECAT_DEVICE void fp8x4_to_half2x2(unsigned int w, unsigned int& lo, unsigned int& hi) {
  lo = __byte_perm(w, 0u, 0x1404);  // [0, b0, 0, b1]: each byte in the high byte of its half
  hi = __byte_perm(w, 0u, 0x3424);  // [0, b2, 0, b3]
  if constexpr (KV == KV_E4M3) {
    lo = ((lo >> 1) & 0x3f803f80u) | (lo & 0x80008000u);
    hi = ((hi >> 1) & 0x3f803f80u) | (hi & 0x80008000u);
  }
}

// 16 FP8 bytes (one 128-bit load) -> 16 halves as two uint4.
template <int KV>
ONECAT_DEVICE void fp8x16_to_half(const uint4 v, uint4& a, uint4& b) {
  fp8x4_to_half2x2<KV>(v.x, a.x, a.y);
  fp8x4_to_half2x2<KV>(v.y, a.z, a.w);
  fp8x4_to_half2x2<KV>(v.z, b.x, b.y);
  fp8x4_to_half2x2<KV>(v.w, b.z, b.w);
}

// float -> FP8 byte, round to nearest even, saturating; x is already divided by the scale.
template <int KV>
ONECAT_DEVICE unsigned int float_to_fp8(float x) {
  const unsigned int u = __float_as_uint(x);
  const unsigned int sign = (u >> 24) & 0x80u;
  const unsigned int a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | (KV == KV_E4M3 ? 0x7fu : 0x7fu);  // NaN stays NaN
  const float af = __uint_as_float(a);
  unsigned int r;
  if constexpr (KV == KV_E4M3) {
    if (af >= 448.0f) return sign | 0x7eu;                        // saturate (inf included)
    if (af < 0.015625f) return sign | (unsigned int)__float2int_rn(af * 512.0f);  // subnormal: m * 2^-9
    r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;                  // RNE to 3 mantissa bits
    r -= (127u - 7u) << 3;                                        // rebias exponent
  } else {
    if (af >= 57344.0f) return sign | 0x7bu;
    if (af < 6.103515625e-05f) return sign | (unsigned int)__float2int_rn(af * 65536.0f);  // m * 2^-16
    r = (a + 0xfffffu + ((a >> 21) & 1u)) >> 21;                  // RNE to 2 mantissa bits
    r -= (127u - 15u) << 2;
  }
  return sign | r;
}

// The same byte for a cache whose element is known at run time only (kv: KV_E4M3 or KV_E5M2): the fused
// qkv + rotary epilogues (gemm_epilogue.cuh rope_store8, gemv_packed.cu rope_put).
ONECAT_DEVICE unsigned int float_to_fp8(int kv, float x) {
  return kv == KV_E4M3 ? float_to_fp8<KV_E4M3>(x) : float_to_fp8<KV_E5M2>(x);
}

// 8 halves -> 8 FP8 bytes fp8(h[j] / scale), byte j = element j: what attention_cache.cu stores for a row's
// 8 elements, and what the fused epilogues store with scale 1 (x / 1 is x: the division is skipped there).
template <int KV>
ONECAT_DEVICE uint2 half8_to_fp8(const Half8& h, float scale) {
  uint2 b = make_uint2(0u, 0u);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float x = __half2float(h.h[j]);
    (j < 4 ? b.x : b.y) |= float_to_fp8<KV>(scale == 1.f ? x : __fdiv_rn(x, scale)) << (8 * (j % 4));
  }
  return b;
}
ONECAT_DEVICE uint2 half8_to_fp8(int kv, const Half8& h, float scale) {
  return kv == KV_E4M3 ? half8_to_fp8<KV_E4M3>(h, scale) : half8_to_fp8<KV_E5M2>(h, scale);
}
