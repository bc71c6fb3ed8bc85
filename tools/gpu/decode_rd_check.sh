#!/usr/bin/env bash
# tools/gpu/decode_rd_check.sh: the sm_80+ register-direct decode attention (csrc/attention_decode_rd.cu)
# on the lent GPU in one call (~6 min): its GPU tests (against the float reference: decode over heads /
# head dims / block sizes / FP8, long contexts, window + soft cap, the fused split-KV merge, graph
# replays through the route), then decode_rd_ab.py (rd vs the Volta kernel at #5's decode rows, table
# last; once per launch, once as a decode graph runs the calls: --graphed), then engine_check.py
# (greedy tokens of the CUDA route, now decoding through rd, against the CPU float32 route: smollm2
# shape dense, llama3-8b shape 2 layers q4_0). Results under $OUT:
# tests.txt, ab.json, ab.txt, ab-graph.json, ab-graph.txt, engine.txt.
#   OUT=$OUT bash tools/gpu/decode_rd_check.sh      # carry .whl (tools/gpu/prepare_carry.sh)
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
machine_info > "$OUT/machine.txt" 2>&1
timeout ${TESTS_S:-200} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py \
  -k "rd or graph_replays or dispatch" --maxfail=5 --tb=short > "$OUT/tests.txt" 2>&1
echo "rc=$?" >> "$OUT/tests.txt"
timeout ${AB_S:-200} python3 tools/gpu/decode_rd_ab.py --json "$OUT/ab.json" > "$OUT/ab.txt" 2>&1
echo "rc=$?" >> "$OUT/ab.txt"
timeout ${AB_S:-200} python3 tools/gpu/decode_rd_ab.py --graphed --json "$OUT/ab-graph.json" > "$OUT/ab-graph.txt" 2>&1
echo "rc=$?" >> "$OUT/ab-graph.txt"
{ timeout 60 python3 tools/gpu/engine_check.py --shape smollm2-135m; echo "rc=$?"
  timeout 100 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 8 --max-tokens 16
  echo "rc=$?"; } > "$OUT/engine.txt" 2>&1
grep -E "mismatch|clear|rc=|paged_attention" "$OUT/engine.txt" | head -12
tail -5 "$OUT/tests.txt"
for f in ab ab-graph; do sed -n '/^decode attention/,$p' "$OUT/$f.txt"; tail -2 "$OUT/$f.txt"; done
