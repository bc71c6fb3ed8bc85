#!/usr/bin/env bash
# s44 call 3: the wgmma w64 tile's split-K merge with more loads in flight (the working tree: 11 four-column slots x
# 2 splits per batch of loads, only the other splits loaded; call 2's trace: merge 3.5 us at x4, 6.0 at x8, ~1 RT per
# 4 slots x 4 splits) against main (b0b994c, .ab/): the GEMM tests, then gemm_trace.py's w64 cases for both trees.
#   bash benchmarks/results/h200-2026-12-06-s44/scripts/_s44_call3.sh   # carry .whl, .ab
set -u
FINAL=$OUT
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache; ab_trees
timeout 110 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "wgmma" > $FINAL/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $FINAL/tests.txt)"
for v in $VARIANTS; do
  PYTHONPATH=$(path_of "$v") timeout 45 python3 tools/gpu/gemm_trace.py 4096:14336:64:w64:4 4096:14336:64:w64:8 \
    > $FINAL/trace-$v.txt 2>&1
  echo "== $v rc=$? at ${SECONDS}s"; grep -E "^[0-9]+x|merging" $FINAL/trace-$v.txt
done
