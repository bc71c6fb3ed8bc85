#!/usr/bin/env bash
# s44 call 2: s43's prepared wgmma trace (test_wgmma_traced + gemm_trace.py at M 64), then the GEMM test files
# on main's final split-K merge (b0b994c: merge_splits' slot lambda, 64-bit offsets; s43 ran them on 2d4e6ee).
#   bash benchmarks/results/h200-2026-12-06-s44/scripts/_s44_call2.sh   # carry .whl
set -u
FINAL=$OUT
bash benchmarks/results/h200-2026-12-06-s43/scripts/_s43_next_wg_trace.sh
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
timeout 300 python3 -m pytest -q -p no:cacheprovider -x tests/kernels/test_gemm_rd.py tests/kernels/test_linear_norm.py \
  tests/kernels/test_gemm_packed.py > $FINAL/gemm-tests.txt 2>&1
echo "gemm tests rc=$? at ${SECONDS}s: $(tail -1 $FINAL/gemm-tests.txt)"
