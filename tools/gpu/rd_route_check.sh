#!/usr/bin/env bash
# tools/gpu/rd_route_check.sh: what s11 landed without a GPU, in one device call (~7 min on an H200):
#   1. GPU tests: every CUDA op against its reference (rotary_cache and the activations now launch with
#      PDL: ba8e0a4), every packed-GEMM tile incl. the register-direct ones and their LATE variants;
#   2. the engine's batched q4_0 route (register-direct GEMMs at 17..64 decode rows) against the CPU
#      float32 reference: engine_check.py on a 2-layer llama3-8b shape with 32 and 40 requests;
#   3. gemm_bench q4_0 M = 32 / 64 with every tile x split (r32l / r32wl beside the route's r32 / r32w);
#   4. the peers run, onecat only, llama3-8b Q4_0 batch 1 / 32 / 64.
#   OUT=$OUT bash tools/gpu/rd_route_check.sh     # carry .whl
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
machine_info > "$OUT/machine.txt" 2>&1
{
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py 2>&1 | tail -2
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_packed.py 2>&1 | tail -2
} > "$OUT/tests.txt" 2>&1
for n in 32 40; do
  timeout 150 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts $n --max-tokens 16 \
    > "$OUT/engine-q4_0-$n.txt" 2>&1
  echo "rc=$?" >> "$OUT/engine-q4_0-$n.txt"
done
timeout 200 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 32,64 --iters 8 --budget 170 \
  --json "$OUT/gemm.json" > "$OUT/gemm.txt" 2>&1
echo "rc=$?" >> "$OUT/gemm.txt"
timeout 240 python3 -m onecat.bench.cli peers --out "$OUT/peers" --configs llama3-8b:Q4_0 --engines onecat \
  --deadline 220 > "$OUT/peers.log" 2>&1
echo "rc=$?" >> "$OUT/peers.log"
cat "$OUT/tests.txt"
for n in 32 40; do grep -E "clear positions|==|rc=" "$OUT/engine-q4_0-$n.txt"; done
python3 - "$OUT/gemm.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    v = r["variants"]
    rd = " ".join(f"{k}:{t:.1f}" for k, t in sorted(v.items(), key=lambda kv: kv[1])[:6])
    print(f"{r['n']}x{r['k']} M={r['m']} route {r['shape']} {r['us']:.1f} us | fastest: {rd}")
print(d["resident_blocks_per_sm"])
PY
grep -E "^\| llama3" "$OUT"/peers/*.md
