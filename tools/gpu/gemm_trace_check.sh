#!/usr/bin/env bash
# Where the batch-32 / 64 register-direct GEMMs spend their time, in one device call (~2 min): the
# packed-GEMM GPU tests (incl. the traced entries against the route, bit for bit), then
# tools/gpu/gemm_trace.py on llama3-8b's q4_0 matrices at M 32 and 64 with the route's tile and split
# (per block: ramp, first step, K loop, store, split-K count and merge; raw rows in trace.json), then
# gemm_bench.py --rd-only: every register-direct tile (incl. the not-routed A/B ones) x split at M
# 32 / 64. Results under $OUT: tests.txt, trace.txt, trace.json, bench.txt, bench.json.
#   OUT=$OUT bash tools/gpu/gemm_trace_check.sh [N:K:M[:TILE:SPLITS] ...]   # carry .whl
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
timeout ${TESTS_S:-200} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_packed.py tests/kernels/test_gemm_rd.py tests/kernels/test_gemm_wg.py --tb=short \
  > "$OUT/tests.txt" 2>&1
echo "rc=$?" >> "$OUT/tests.txt"
timeout ${TRACE_S:-200} python3 tools/gpu/gemm_trace.py --json "$OUT/trace.json" "$@" > "$OUT/trace.txt" 2>&1
echo "rc=$?" >> "$OUT/trace.txt"
timeout ${BENCH_S:-200} python3 tools/gpu/gemm_bench.py --formats q4_0 --m 32,64 --rd-only --budget 180 \
  --json "$OUT/bench.json" > "$OUT/bench.txt" 2>&1
echo "rc=$?" >> "$OUT/bench.txt"
tail -3 "$OUT/tests.txt"
cat "$OUT/trace.txt"
python3 - "$OUT/bench.json" <<'PY'  # per matrix and M: the route, then each tile's best split
import collections, json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    best = collections.OrderedDict()
    for key, us in r["variants"].items():
        tile, s = key.rsplit("x", 1)
        if tile not in best or us < best[tile][0]:
            best[tile] = (us, s)
    print(f"{r['n']}x{r['k']} M {r['m']}: route {r['shape']} {r['us']:.1f} us | "
          + "  ".join(f"{t} {us:.1f} (x{s})" for t, (us, s) in best.items()))
PY
