#!/usr/bin/env bash
# s40 call 2: the LM head's route under the new rule (w64b2 past one wave); qkv / o / down at 48 / 64 rows on
# r32 (the route for qkv / o), w64 and w64b2 x splits 1, 2, 4, 8 (could the two-per-SM tile take o, whose _norm
# entry it has, or qkv with a rotary epilogue it would need?)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call2; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
timeout 90 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64 --no-variants --shapes 128256x4096 \
  --no-cublas > $OUT/lm-head-route.txt 2>&1; echo "lm head rc=$? at ${SECONDS}s"
grep "route" $OUT/lm-head-route.txt | sed 's/(err [0-9.e-]*)//g'
timeout 400 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles r32,w64,w64b2 --splits 1,2,4,8 \
  --shapes 6144x4096,4096x4096,4096x14336 --no-cublas --budget 380 > $OUT/qkv-o-down.txt 2>&1
echo "qkv/o/down rc=$? at ${SECONDS}s"; grep "route" $OUT/qkv-o-down.txt | sed 's/(err [0-9.e-]*)//g'
