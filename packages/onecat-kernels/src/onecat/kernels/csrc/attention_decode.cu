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
// (o / l, m, l) partials, merged in the same launch by the last of the partitions of each
// (request, KV head, row chunk) to finish (a zeroed counter array it re-arms: flash_split_merge in
// attention_merge.cuh), or by attn_reduce below when the host passes no counter array (a CUDA graph
// captured for a larger grid than the array covers). The plan is for the longest context a launch
// may see (a CUDA graph's): each request spreads its keys over as many partitions as keep >= one key
// step each, so a short context splits as finely as a long one. Block size: any power of 2 >= 8
// (page ids are staged per FA_SEG keys; a page larger than FA_SEG keys takes one or two table
// entries).
#include "attention_flash.cuh"

// (D, KV, WR, WK, WD, NK): steps of 64 keys (32 for D = 256, where paired warps split the columns).
#define DECODE_ENTRIES(D, WK, WD)                                              \
  FLASH_ENTRY_FUSED(attn_decode_d##D##_f16, D, KV_F16, 1, WK, WD, 16)         \
  FLASH_ENTRY_FUSED(attn_decode_d##D##_e4m3, D, KV_E4M3, 1, WK, WD, 16)       \
  FLASH_ENTRY_FUSED(attn_decode_d##D##_e5m2, D, KV_E5M2, 1, WK, WD, 16)
DECODE_ENTRIES(64, 4, 1)
DECODE_ENTRIES(128, 4, 1)
DECODE_ENTRIES(256, 2, 2)

// Merge of the partitions' (o / l, m, l) as a second launch (prefill, and decode without a counter
// array): grid (tokens, Hq), D threads (one column each). The partitions are weighed once, in
// parallel (threads over partitions: the max m, then w_p = l_p 2^(m_p - M) into shared memory), and
// the columns sum only up to the last partition that saw a key (a short context fills a prefix of the
// planned partitions; partitions with l == 0 weigh nothing), loads unrolled.
// nparts <= ATTN_REDUCE_MAX_PARTS (attention_ops checks).
#define ATTN_REDUCE_MAX_PARTS 1024
extern "C" __global__ void __launch_bounds__(256) attn_reduce(__half* out, const float* part_o, const float* part_ml,
                                                              int n_tokens, int hq, int d, int nparts, float v_mul) {
  __shared__ float w[ATTN_REDUCE_MAX_PARTS];
  __shared__ float red[32], sum_s[32];
  __shared__ int last_s[32];
  const i64 row = (i64)blockIdx.x * hq + blockIdx.y;
  const i64 pstride = (i64)n_tokens * hq;
  const float2* ml_p = reinterpret_cast<const float2*>(part_ml);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  float m = -INFINITY;
  int last = -1;
  partials_max_last(ml_p + row, pstride, threadIdx.x, blockDim.x, nparts, m, last);
  if (lane == 0) {
    red[warp] = m;
    last_s[warp] = last;
  }
  __syncthreads();
  m = -INFINITY;
  last = -1;
  for (int i = 0; i < nwarps; ++i) {
    m = fmaxf(m, red[i]);
    last = max(last, last_s[i]);
  }
  float s = 0.f;
  for (int p = threadIdx.x; p <= last; p += blockDim.x) {
    const float2 ml = ml_p[p * pstride + row];
    const float wp = ml.y > 0.f ? ml.y * exp2f(ml.x - m) : 0.f;
    w[p] = wp;
    s += wp;
  }
  s = block_sum(s, sum_s);  // its barriers also publish w
  float acc = 0.f;
  const float* po = part_o + row * d + threadIdx.x;
#pragma unroll 4
  for (int p = 0; p <= last; ++p) {
    const float wp = w[p];
    const float o = po[p * pstride * d];  // always a valid partial (empty ones hold zeros)
    acc = fmaf(wp, o, acc);
  }
  out[row * d + threadIdx.x] = __float2half_rn(s > 0.f ? acc / s * v_mul : 0.f);
}
