// attention_decode.cu: paged attention for few query rows per request (decode q = 1, verify q <= 16),
// split-KV, plus its FP32 reduce. The body is attention_flash.cuh's, in its decode shape: a block
// owns 16 rows (the GQA heads of one KV head x the verify tokens) and its 4 warps split each step's
// keys (each warp its own softmax state, merged at the end), so every K/V byte of the partition is
// read once per 16 rows, with 128-bit loads and tensor cores (HMMA.884 on sm_70) for S and P.V.
// Any query length is correct (rows are chunked); prefill belongs to attention_prefill.cu.
//
// Grid (row_chunks, Hk, requests * nparts), 128 threads. The key range [lo, ctx) (lo > 0 only with
// a sliding window) is split into `nparts` partitions of `part` keys, chosen on the host from the
// context length and the SM count; with nparts == 1 the block writes the FP16 output, else FP32
// (o / l, m, l) partials that attn_reduce merges. Block size: any power of 2 >= 8 (page ids are
// staged per FA_SEG keys; a page larger than FA_SEG keys takes one or two table entries).
#include "attention_flash.cuh"

// (D, KV, WR, WK, WD, NK): steps of 64 keys (32 for D = 256, where paired warps split the columns).
#define DECODE_ENTRIES(D, WK, WD)                                        \
  FLASH_ENTRY(attn_decode_d##D##_f16, D, KV_F16, 1, WK, WD, 16)         \
  FLASH_ENTRY(attn_decode_d##D##_e4m3, D, KV_E4M3, 1, WK, WD, 16)       \
  FLASH_ENTRY(attn_decode_d##D##_e5m2, D, KV_E5M2, 1, WK, WD, 16)
DECODE_ENTRIES(64, 4, 1)
DECODE_ENTRIES(128, 4, 1)
DECODE_ENTRIES(256, 2, 2)

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
