#!/usr/bin/env bash
# s50 call 1 (carry .whl): s49's prepared call trimmed to fit the device time left: the wgmma GPU tests (w64b2s / w64b2q /
# WLE bit-equal to w64b2; the diagnostics run), the w64b2 diagnostics incl. s50's _nwxb / _nwxbh (_s49_diag.py), WLE,
# gemm_bench of w64b2 / w64b2s / w64b2q; the batch-64 step A/B only if w64b2q beats w64b2 by 3% at M 64.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
S=benchmarks/results/h100-2026-12-07-s49/scripts
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 200 python3 -m pytest -q tests/kernels/test_gemm_rd.py -m gpu -k "wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout 100 python3 $S/_s49_diag.py > $OUT/diag.txt 2>&1; echo "diag rc=$? at ${SECONDS}s"; cat $OUT/diag.txt | cut -c1-400
timeout 80 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --shapes 28672x4096 --tiles w64b2,w64b2s,w64b2q --glu \
  --splits 1 --no-cublas --iters 20 > $OUT/bench-gate_up.txt 2>&1; echo "bench rc=$? at ${SECONDS}s"
grep -E "^q4_0 .*GLU" $OUT/bench-gate_up.txt
timeout 80 python3 $S/_s49_wle.py > $OUT/wle.txt 2>&1; echo "wle rc=$? at ${SECONDS}s"; tail -4 $OUT/wle.txt
if grep -E "M 64 \(GLU" $OUT/bench-gate_up.txt | python3 -c "
import re,sys; l=sys.stdin.read(); d=dict(re.findall(r'(w64b2q?)x1 ([0-9.]+) us', l)); sys.exit(0 if 'w64b2q' in d and float(d['w64b2q']) < 0.97*float(d['w64b2']) else 1)"; then
  timeout $(( 560 - SECONDS )) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --max-model-len 656 \
    --batch 64 --context 512 --timed 20 --profiled 0 --rounds 2 --steps-json $OUT/ab-b64.json \
    --ab-disable "set:gemm_ops.TWO_PER_SM='w64b2q';set:gemm_ops.TWO_PER_SM='w64b2'" > $OUT/ab-b64.txt 2>&1
  echo "ab rc=$? at ${SECONDS}s"; grep -E "^round|^decode" $OUT/ab-b64.txt | tail -4 | cut -c1-600
else echo "no batch-64 A/B: w64b2q not 3% ahead at M 64"; fi
