#!/usr/bin/env bash
# s39 call 7 (not run in s39: no device time left; the next session's first call): the committed w64b2 tests on the
# GPU; a q4_0 LM head (128256 x 4096, 1002 tiles: 7.6 waves of w64, 3.8 of w64b2; gemm_shape keeps w64 past 264
# tiles, unmeasured) on both; then, in the time left,
# llama3-8b Q4_0 decode steps at batch 64 in one process: A the route (gate_up on w64b2), B the previous rule
# (gate_up on w64: "wg:w64b2=w64"), C a control (the route captured again), 3 rounds x 20 steps
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call7; mkdir -p $OUT
S=benchmarks/results/h200-2026-12-06-s39/scripts
machine_info > $OUT/machine.txt 2>&1
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "wgmma or gemm_shape" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"; tail -n 2 $OUT/tests.txt
timeout 90 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles w64,w64b2 --splits 1 --shapes 128256x4096 \
  --no-cublas --budget 300 > $OUT/lm-head.txt 2>&1; echo "lm head rc=$? at ${SECONDS}s"
grep "route" $OUT/lm-head.txt | sed 's/(err [0-9.e-]*)//g'
G=/tmp/onecat-peers-gguf
timeout 120 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_0 > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s"
timeout $(( 560 - SECONDS )) python3 $S/_s39_wg_form.py --model $G/llama3-8b.Q4_0.gguf --max-model-len 1024 \
  --batch 64 --context 512 --timed 20 --profiled 0 --rounds 3 --steps-json $OUT/ab-w64b2-q4_0-b64.json \
  --ab-disable "wg:w64b2=w64;wg:w64b2=w64b2" > $OUT/ab-w64b2-q4_0-b64.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-w64b2-q4_0-b64.txt
grep -E "^round|^decode|rc=|Error|error" $OUT/ab-w64b2-q4_0-b64.txt | tail -8 | cut -c1-700
