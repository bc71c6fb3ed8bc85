#!/usr/bin/env bash
# Prepared for the next session's device call (not run in s42): the tests/kernels files s42's call 5 did not reach
# (test_gemm_rd and test_linear_norm passed there), file by file at random seeds, within CALL_LIMIT_S (default
# 540). A cold kernel cache spends most of a call compiling: test_gemm_rd alone took 200 s on a fresh H100.
#   CALL_LIMIT_S=540 bash benchmarks/results/h100-2026-12-06-s42/scripts/_s42_next_tests.sh
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/tests; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
for f in test_gemv_mixed test_gpu_kernels test_gemv_packed test_row_parts test_attention_fp8 test_attention_gpu; do
  left=$(( ${CALL_LIMIT_S:-540} - SECONDS )); [ $left -lt 30 ] && { echo "$f: not run (time)"; continue; }
  timeout $left python3 -m pytest -q -p no:cacheprovider tests/kernels/$f.py > $OUT/$f.txt 2>&1
  echo "$f rc=$? at ${SECONDS}s: $(tail -1 $OUT/$f.txt)"
done
