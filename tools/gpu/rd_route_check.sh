#!/usr/bin/env bash
# tools/gpu/rd_route_check.sh: the register-direct GEMM route, checked and timed in one device call (~6 min, H200):
#   1. GPU tests: every CUDA op against its reference, every packed-GEMM tile incl. the register-direct ones;
#   2. the engine's batched route per format of WEIGHTS (default q4_0; register-direct GEMMs at 3..64 decode
#      rows for q4_0 / q4_k / q6_k / awq) against the CPU float32 reference: engine_check.py on a 2-layer
#      llama3-8b shape with 32 and 40 requests, each also with cuda_pack_gemm_rd disabled;
#   3. gemm_bench for WEIGHTS at M = 32 / 64 with every tile x split (GEMM_ARGS=--rd-only: the register-direct
#      ones);
#   4. the peers run, onecat only, llama3-8b Q4_0 batch 1 / 32 / 64.
#   OUT=$OUT bash tools/gpu/rd_route_check.sh     # carry .whl
#   ENGINE_PROMPTS (default "32 40"): the engine checks' batch sizes, each also run with cuda_pack_gemm_rd
#   disabled; WEIGHTS (default q4_0): the formats checked, e.g. "q4_k q6_k awq"; GEMM_ARGS: more gemm_bench
#   options (--rd-only); PEERS=0 skips the peers run.
set -u
ENGINE_PROMPTS=${ENGINE_PROMPTS:-32 40} GEMM_ARGS=${GEMM_ARGS:-} PEERS=${PEERS:-1} WEIGHTS=${WEIGHTS:-q4_0}
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
machine_info > "$OUT/machine.txt" 2>&1
{
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py --tb=line 2>&1 | tail -4
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_packed.py tests/kernels/test_gemm_rd.py tests/kernels/test_gemm_wg.py --tb=line 2>&1 | tail -6
} > "$OUT/tests.txt" 2>&1
for w in $WEIGHTS; do for n in $ENGINE_PROMPTS; do  # the route, then with the register-direct GEMM refused
  timeout 150 python3 tools/gpu/engine_check.py --shape llama3-8b --weights $w --layers 2 --prompts $n --max-tokens 16 \
    > "$OUT/engine-$w-$n.txt" 2>&1
  echo "rc=$?" >> "$OUT/engine-$w-$n.txt"
  ONECAT_DISABLED_PROVIDERS=cuda_pack_gemm_rd timeout 150 python3 tools/gpu/engine_check.py --shape llama3-8b \
    --weights $w --layers 2 --prompts $n --max-tokens 16 > "$OUT/engine-$w-$n-no-rd.txt" 2>&1
  echo "rc=$?" >> "$OUT/engine-$w-$n-no-rd.txt"
done; done
timeout 200 python3 tools/gpu/gemm_bench.py --formats "$(echo $WEIGHTS | tr ' ' ,)" --m 32,64 --iters 8 --budget 170 $GEMM_ARGS \
  --json "$OUT/gemm.json" > "$OUT/gemm.txt" 2>&1
echo "rc=$?" >> "$OUT/gemm.txt"
[ "$PEERS" = 1 ] && timeout 240 python3 -m onecat.bench.cli peers --out "$OUT/peers" --configs llama3-8b:Q4_0 --engines onecat \
  --deadline 220 > "$OUT/peers.log" 2>&1
echo "rc=$?" >> "$OUT/peers.log"
cat "$OUT/tests.txt"
for f in "$OUT"/engine-*.txt; do echo "$(basename $f):"; grep -E "mismatch:|clear positions|==|rc=" "$f" | head -12; done
python3 - "$OUT/gemm.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    v = r["variants"]
    rd = " ".join(f"{k}:{t:.1f}" for k, t in sorted(v.items(), key=lambda kv: kv[1])[:10])
    print(f"{r['n']}x{r['k']} M={r['m']} route {r['shape']} {r['us']:.1f} us | fastest: {rd}")
print(d["resident_blocks_per_sm"])
PY
[ "$PEERS" = 1 ] && grep -E "^\| llama3" "$OUT"/peers/*.md
