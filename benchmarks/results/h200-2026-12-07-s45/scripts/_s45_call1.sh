#!/usr/bin/env bash
# s45 call 1 (carry .whl): the GEMM test files not re-run on a GPU since c363e10 (merge_splits' 4 x 4 instantiation in
# the register-direct and Volta tiles; test_gemm_rd also holds the traced entries, w64b2 now without point 2), then the
# w64b2 gate_up trace without the wgmma serialization s44's trace had (C7513). (w64 vs r32 on qkv / o: left for later,
# the device time being short.)
set -u
FINAL=$OUT
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $FINAL/machine.txt 2>&1; head -2 $FINAL/machine.txt | tail -1
timeout 280 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py tests/kernels/test_gemm_packed.py \
  tests/kernels/test_linear_norm.py > $FINAL/gemm-tests.txt 2>&1
echo "gemm tests rc=$? at ${SECONDS}s: $(tail -1 $FINAL/gemm-tests.txt)"
timeout 90 python3 tools/gpu/gemm_trace.py 28672:4096:64 4096:14336:64 > $FINAL/trace.txt 2>&1
echo "trace rc=$? at ${SECONDS}s"; grep -E "^[0-9]|per block|merging" $FINAL/trace.txt
