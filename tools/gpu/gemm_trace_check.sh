#!/usr/bin/env bash
# Where the batch-32 / 64 register-direct GEMMs spend their time, in one device call (~2 min): the
# packed-GEMM GPU tests (incl. the traced entries against the route, bit for bit), then
# tools/gpu/gemm_trace.py on llama3-8b's q4_0 matrices at M 32 and 64 with the route's tile and split
# (per block: ramp, first step, K loop, store, split-K count and merge; raw rows in trace.json).
# Results under $OUT: tests.txt, trace.txt, trace.json.
#   OUT=$OUT bash tools/gpu/gemm_trace_check.sh [N:K:M[:TILE:SPLITS] ...]   # carry .whl
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
timeout ${TESTS_S:-200} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_packed.py --tb=short \
  > "$OUT/tests.txt" 2>&1
echo "rc=$?" >> "$OUT/tests.txt"
timeout ${TRACE_S:-200} python3 tools/gpu/gemm_trace.py --json "$OUT/trace.json" "$@" > "$OUT/trace.txt" 2>&1
echo "rc=$?" >> "$OUT/trace.txt"
tail -3 "$OUT/tests.txt"
cat "$OUT/trace.txt"
