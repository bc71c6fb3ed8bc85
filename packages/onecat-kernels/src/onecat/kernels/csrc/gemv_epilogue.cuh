// gemv_epilogue.cuh: the M = 1 packed GEMV's (gemv_packed.cu gemv_rows) epilogues: EPI_ROPE's rotary + paged-cache
// write, EPI_NORM's residual add in front of a norm, and the RowNorm scale its consumers read.
#pragma once
#include "attention_fp8.cuh"
#include "norm_join.cuh"  // NormOut, RowNorm

enum { EPI_NONE = 0, EPI_GLU = 1, EPI_ROPE = 2, EPI_NORM = 3 };
struct GemvRope {  // EPI_ROPE: the rows are [q | k | v] of one token (unused otherwise)
  const i64* positions;  // [1]
  const i64* slots;      // [1]: the cache row; < 0 is padding (q only)
  const float* cos_sin;  // [max_pos, rot]: cos then sin
  __half* k_cache;       // [blocks, block_size, Hk, D] (slot-major rows of kv elements; FP8: bytes)
  __half* v_cache;
  int q_size, kv_size, head_dim, rot, neox;
  int kv;                // the caches' element: KV_F16, KV_E4M3 or KV_E5M2 (attention_fp8.cuh)
};

// EPI_ROPE's rows: a warp's R rows must hold whole rotation pairs. GPT-J pairs (2j, 2j + 1) are
// adjacent rows, so the natural rows n0 + r do; NeoX pairs (j, j + rot / 2) are not: a warp whose
// rows start inside a head's rotary part takes pairs j0 .. j0 + R/2 - 1 (j0 = its offset / 2), rows
// r < R/2 the first halves, the rest the second (a bijection on [0, rot); rot % R == 0). Elsewhere
// (past rot, v) the natural rows.
template <int R>
ONECAT_DEVICE int rope_row(const GemvRope& e, int n0, int r) {
  const int off = n0 % e.head_dim;
  if (!e.neox || n0 >= e.q_size + e.kv_size || off >= e.rot) return n0 + r;
  return n0 - off + (off >> 1) + (r < R / 2 ? r : e.rot / 2 + r - R / 2);
}

// Rows n, n + 1 (P = 2; n even) or row n (P = 1) of [q | k | v], FP32 values: q to `out`, k / v to their cache
// rows (nothing for a padding slot), rounded to FP16, FP8 caches then fp8 of that (attention_fp8.cuh's
// float_to_fp8, as attention_cache.cu at scale 1 for the FP16 k / v the unfused route would give it).
template <int P>
ONECAT_DEVICE void rope_put(__half* out, const GemvRope& e, i64 slot, int n, float a, float b = 0.f) {
  const __half2 h = __floats2half2_rn(a, b);
  __half* dst = out + n;
  i64 i = 0;
  if (n >= e.q_size) {
    if (slot < 0) return;
    const bool k = n < e.q_size + e.kv_size;
    dst = k ? e.k_cache : e.v_cache;
    i = slot * e.kv_size + (n - e.q_size - (k ? 0 : e.kv_size));
    if (e.kv != KV_F16) {
      unsigned char* c = reinterpret_cast<unsigned char*>(dst) + i;
      auto q8 = [&](__half v) { return float_to_fp8(e.kv, __half2float(v)); };
      if constexpr (P == 2)
        *reinterpret_cast<unsigned short*>(c) = (unsigned short)(q8(__low2half(h)) | (q8(__high2half(h)) << 8));
      else
        *c = (unsigned char)q8(__low2half(h));
      return;
    }
  }
  if constexpr (P == 2)
    *reinterpret_cast<__half2*>(dst + i) = h;
  else
    dst[i] = __low2half(h);
}

// EPI_ROPE's inputs of one warp's R rows (R / 2 rotation pairs), loaded early so that the epilogue
// waits on none of them: the position and slot as the kernel starts, the pairs' cos / sin once the
// position has arrived (after the norm prologue), all in flight across the main loop. Pair p is
// j = off / 2 + p (NeoX: rows r, r + R/2 of rope_row; GPT-J: rows off + 2p, +1); its values are
// loaded where it is rotated (off + 2p < rot GPT-J, off < rot NeoX), else stay 1 / 0.
template <int R>
struct RopeIn {
  i64 pos, slot;
  float c[R / 2], s[R / 2];
  ONECAT_DEVICE void start(const GemvRope& e) {
    pos = e.positions[0];
    slot = e.slots[0];
  }
  ONECAT_DEVICE void load_cos_sin(const GemvRope& e, int n0) {
    const int off = n0 % e.head_dim;
    const bool qk = n0 < e.q_size + e.kv_size;
    const float* cs = e.cos_sin + pos * e.rot;
#pragma unroll
    for (int p = 0; p < R / 2; ++p) {
      const bool rot = qk && (e.neox ? off < e.rot : off + 2 * p < e.rot);
      const int j = (off >> 1) + p;
      c[p] = rot ? cs[j] : 1.f;
      s[p] = rot ? cs[(e.rot >> 1) + j] : 0.f;
    }
  }
};

// EPI_ROPE's epilogue for one warp's R rows (y already rounded to fp16 as linear's output): q and k
// rows rotated in FP32 by rope_pair as rotary.cu does (pair j: cos_sin[pos][j], [rot / 2 + j]) on their first
// `rot` dims, then written where rope_dst says (unrotated pairs: c = 1, s = 0 is exact).
template <int R>
ONECAT_DEVICE void gemv_rope_cache(__half* out, const GemvRope& e, const RopeIn<R>& in, int n0, const float (&y)[R]) {
  const int off = n0 % e.head_dim;
  const bool qk = n0 < e.q_size + e.kv_size, rotated = qk && off < e.rot;
  if (e.neox && rotated) {  // pairs (r, r + R/2): rows j and j + rot / 2
#pragma unroll
    for (int r = 0; r < R / 2; ++r) {
      const float2 o = rope_pair(y[r], y[r + R / 2], in.c[r], in.s[r]);
      rope_put<1>(out, e, in.slot, rope_row<R>(e, n0, r), o.x);
      rope_put<1>(out, e, in.slot, rope_row<R>(e, n0, r + R / 2), o.y);
    }
    return;
  }
#pragma unroll
  for (int r = 0; r < R; r += 2) {  // GPT-J pairs (n0 + r, n0 + r + 1), or unrotated rows
    float a = y[r], b = y[r + 1];
    if (qk && !e.neox && off + r < e.rot) {
      const float2 o = rope_pair(y[r], y[r + 1], in.c[r / 2], in.s[r / 2]);
      a = o.x;
      b = o.y;
    }
    rope_put<2>(out, e, in.slot, n0 + r, a, b);
  }
}

// EPI_NORM (the _norm entries; linear_norm_ops at one row: o / down in front of a norm): y = fp16(sum (+ bias)) as
// linear's output, r' = fp16(y + res) (rms_norm.cu's residual add) to res_out, x~ = fp16(r' gamma) to `out`, and
// the warp's sum of r'^2 over its R rows to ss[n0 / R] (N % R == 0: N / R partials, linear_norm_ops checks).
template <int R>
ONECAT_DEVICE void gemv_norm_store(const NormOut& no, __half* __restrict__ out, const __half* __restrict__ bias,
                                   int N, int n0, const float (&val)[R]) {
  float sq = 0.f;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int n = n0 + r;
    if (n >= N) break;
    const float y = __half2float(__float2half_rn(bias ? val[r] + __half2float(bias[n]) : val[r]));
    const __half h = __float2half_rn(y + __half2float(no.res[n]));
    const float rf = __half2float(h);
    sq += rf * rf;
    no.res_out[n] = h;
    out[n] = __float2half_rn(rf * __half2float(no.gamma[n]));
  }
  no.ss[n0 / R] = sq;
}

// RS consumers (the _rs_glu / _rs_rope entries): x is an EPI_NORM kernel's x~ and the row's RMSNorm scale
// inv = rsqrt(sum of ss / K + eps) is formed by the whole block (16-byte loads where tiles % 4 == 0, a fixed order:
// every block gets the same bits; ends with a barrier). The x~ chunks are scaled by fp16(inv) as they load (the
// HFMA2 chains then see x of the normalized range, as the NORM_IN kernels' x) and the sums by inv / fp16(inv).
ONECAT_DEVICE float gemv_row_norm_inv(const RowNorm& rn) {
  __shared__ float red[32];
  float s = 0.f;
  if ((rn.tiles & 3) == 0) {
    const float4* p = reinterpret_cast<const float4*>(rn.ss);
    for (int j = threadIdx.x; j < rn.tiles >> 2; j += blockDim.x) {
      const float4 v = __ldcg(p + j);
      s += (v.x + v.y) + (v.z + v.w);
    }
  } else {
    for (int j = threadIdx.x; j < rn.tiles; j += blockDim.x) s += __ldcg(rn.ss + j);
  }
  return rsqrtf(block_sum(s, red) / rn.hidden + rn.eps);
}
