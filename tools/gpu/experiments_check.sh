#!/usr/bin/env bash
# tools/gpu/experiments_check.sh: the experiments that are not on the route, in one device call (~6 min
# on an H200): their GPU tests first, then their timings against the route's kernels, tables last.
#   * packed GEMM: the 8-warp m32t tile and 16 K splits (gemm_bench.py with every tile x split; the
#     every-tile GPU test covers m32t and the merge's second batch of partials);
#   * decode attention: the paired-warp w2 kernels (attention_variants.py, test_decode_variant_w2);
#   * batch-1 GEMV chain: weights pulled into L2 by a parallel branch (gemv_chain.py --l2-ahead).
#   OUT=$OUT bash tools/gpu/experiments_check.sh     # carry .whl
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
machine_info > "$OUT/machine.txt" 2>&1
{  # all packed-GEMM tests (the route's tiles were re-parameterized with m32t), the decode attention ones
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_packed.py 2>&1 | tail -3
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py \
    -k "variant_w2 or fused_split or test_decode" 2>&1 | tail -3
  timeout 60 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py -k "linear or rms_norm" 2>&1 | tail -2
} > "$OUT/tests.txt" 2>&1
timeout 170 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 32,64 --iters 8 --budget 140 \
  --json "$OUT/gemm.json" > "$OUT/gemm.txt" 2>&1; echo "rc=$?" >> "$OUT/gemm.txt"
timeout 120 python3 tools/gpu/attention_variants.py --json "$OUT/attention.json" > "$OUT/attention.txt" 2>&1
echo "rc=$?" >> "$OUT/attention.txt"
timeout 150 python3 tools/gpu/gemv_chain.py --formats q4_0 --chains layer,decode,square --pdl 1 \
  --l2-ahead 2,3 --l2-mode pf,ld --l2-mb 24 --json "$OUT/chain.json" > "$OUT/chain.txt" 2>&1
echo "rc=$?" >> "$OUT/chain.txt"
cat "$OUT/tests.txt"
grep -v "^ " "$OUT/chain.txt" | tail -22
tail -16 "$OUT/attention.txt"
grep -E "^q4_0 " "$OUT/gemm.txt" | tail -8
