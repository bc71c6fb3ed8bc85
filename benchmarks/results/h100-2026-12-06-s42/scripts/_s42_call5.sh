#!/usr/bin/env bash
# s42 call 5: the route's GPU tests on main (tests/kernels, file by file, random seeds), within the call's limit
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call5; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
for f in test_gemm_rd test_linear_norm test_gemv_mixed test_gpu_kernels test_gemv_packed test_row_parts test_attention_gpu; do
  left=$(( ${CALL_LIMIT_S:-540} - SECONDS )); [ $left -lt 30 ] && { echo "$f: not run (time)"; continue; }
  timeout $left python3 -m pytest -q -p no:cacheprovider tests/kernels/$f.py > $OUT/$f.txt 2>&1
  echo "$f rc=$? at ${SECONDS}s: $(tail -1 $OUT/$f.txt)"
done
