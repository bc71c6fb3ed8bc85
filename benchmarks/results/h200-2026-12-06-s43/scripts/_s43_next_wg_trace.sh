#!/usr/bin/env bash
# Prepared for the next session's device call (not run in s43: its device time was spent): the wgmma tiles' new
# _trace entries checked on the GPU (test_wgmma_traced: bit-equal to the route, points ordered), then
# tools/gpu/gemm_trace.py at M 64 on llama3-8b's q4_0 matrices: the route's tiles (down w64 x4, gate_up w64b2 x1,
# qkv / o r32) and qkv / o forced onto w64, to split the ~10-14 us a w64 call spends outside its K loop (s40's
# tables, fitted in s43's README) into ramp, first step, K loop, store, count and merge. ~2 min on a warm cache.
#   bash benchmarks/results/h200-2026-12-06-s43/scripts/_s43_next_wg_trace.sh   # carry .whl
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/wg-trace; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "traced or wgmma_tile" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout 240 python3 tools/gpu/gemm_trace.py --json $OUT/trace.json 4096:14336:64 28672:4096:64 6144:4096:64 4096:4096:64 \
  6144:4096:64:w64:2 4096:4096:64:w64:4 4096:14336:64:w64:8 > $OUT/trace.txt 2>&1
echo "trace rc=$? at ${SECONDS}s"; grep -E "^[0-9]+x|per block|merging" $OUT/trace.txt
