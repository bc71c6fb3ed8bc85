// attention_prefill.cu: paged causal prefill (FlashAttention-2 dataflow on Volta tensor cores):
// ragged batches (query_start_loc), queries after a cached prefix (chunked prefill, prefix-cache
// hits), GQA heads packed into the row tiles, sliding window, logit soft-cap, FP16 / E4M3 / E5M2
// caches decoded in software. The body is attention_flash.cuh's in its prefill shape: a block owns
// 64 rows (32 for head dim 256, whose paired warps split the output columns), its warps split the
// rows and share each K/V tile; blocks holding the last rows (the most keys) start first.
// Grid (row_chunks, Hk, requests * nparts); nparts > 1 only when a few requests cannot fill the GPU.
#include "attention_flash.cuh"

// (D, KV, WR, WK, WD, NK): 64 rows x 64 keys (D 64), 64 x 32 (D 128), 32 x 16 (D 256) per step;
// static shared memory stays under 48 KB (two blocks per SM on Volta's 96 KB).
#define PREFILL_ENTRIES(D, WR, WD, NK)                                        \
  FLASH_ENTRY(attn_prefill_d##D##_f16, D, KV_F16, WR, 1, WD, NK)           \
  FLASH_ENTRY(attn_prefill_d##D##_e4m3, D, KV_E4M3, WR, 1, WD, NK)         \
  FLASH_ENTRY(attn_prefill_d##D##_e5m2, D, KV_E5M2, WR, 1, WD, NK)
PREFILL_ENTRIES(64, 4, 1, 64)
PREFILL_ENTRIES(128, 4, 1, 32)
PREFILL_ENTRIES(256, 2, 2, 16)
