#!/usr/bin/env bash
# Prepared for the next session's first device call (~6 min on a cold kernel cache): the GEMM test files that s44
# did not re-run on the GPU after the merge change (c363e10: merge_splits' 4 x 4 instantiation in the register-direct
# and Volta tiles), then whether o / qkv at M 64 now pay on the w64 tile (s44's trace: o w64 x4 span 13.4 us against
# r32 x3 14.9, before the merge lost 1 us; s23 had found wgmma 10% slower there): gemm_bench's w64 and r32 tiles x
# splits at M 48 / 64 on qkv and o, every output checked.
#   bash benchmarks/results/h200-2026-12-06-s44/scripts/_s44_next.sh   # carry .whl
set -u
FINAL=$OUT
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $FINAL/machine.txt 2>&1; head -2 $FINAL/machine.txt | tail -1
timeout 280 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py tests/kernels/test_gemm_packed.py \
  tests/kernels/test_linear_norm.py > $FINAL/gemm-tests.txt 2>&1
echo "gemm tests rc=$? at ${SECONDS}s: $(tail -1 $FINAL/gemm-tests.txt)"
timeout 200 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 48,64 --shapes 6144x4096,4096x4096 --tiles w64,r32 \
  --splits 1,2,3,4 --no-cublas --iters 20 > $FINAL/bench.txt 2>&1
echo "bench rc=$? at ${SECONDS}s"; tail -12 $FINAL/bench.txt
