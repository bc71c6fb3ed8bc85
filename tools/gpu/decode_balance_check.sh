#!/usr/bin/env bash
# tools/gpu/decode_balance_check.sh: the register-direct decode's imbalance question in one call (~5 min):
# its GPU tests (incl. the A/B forms and traced entries), decode_trace.py on the route and on the A/B
# forms (il: interleaved warp steps; dyn: steps claimed per group; per-block timestamps, raw JSON), then
# decode_rd_ab.py rd vs rd_il vs rd_dyn at #5's 32/8 D 128 rows, per launch and graphed. Results under
# $OUT: tests.txt, trace.txt, trace.json, ab.txt, ab.json, ab-graph.txt, ab-graph.json.
#   OUT=$OUT bash tools/gpu/decode_balance_check.sh      # carry .whl (tools/gpu/prepare_carry.sh)
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
timeout ${TESTS_S:-200} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py \
  -k "rd or graph_replays or dispatch" --maxfail=5 --tb=short > "$OUT/tests.txt" 2>&1
echo "rc=$?" >> "$OUT/tests.txt"
timeout 150 python3 tools/gpu/decode_trace.py --json "$OUT/trace.json" e4m3:4:8192 e4m3:4:8192:il e4m3:4:8192:dyn \
  f16:4:8192 f16:4:8192:il f16:4:8192:dyn e4m3:4:16384 e4m3:4:16384:dyn > "$OUT/trace.txt" 2>&1
echo "rc=$?" >> "$OUT/trace.txt"
ROWS=0,1,3,5,6,8,10,11
timeout 200 python3 tools/gpu/decode_rd_ab.py --kernels rd,rd_il,rd_dyn --rows $ROWS --json "$OUT/ab.json" > "$OUT/ab.txt" 2>&1
echo "rc=$?" >> "$OUT/ab.txt"
timeout 200 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd,rd_il,rd_dyn --rows $ROWS --json "$OUT/ab-graph.json" \
  > "$OUT/ab-graph.txt" 2>&1
echo "rc=$?" >> "$OUT/ab-graph.txt"
tail -3 "$OUT/tests.txt"
grep -vE '^\{' "$OUT/trace.txt" | tail -60
for f in ab ab-graph; do sed -n '/^decode attention/,$p' "$OUT/$f.txt"; tail -1 "$OUT/$f.txt"; done
