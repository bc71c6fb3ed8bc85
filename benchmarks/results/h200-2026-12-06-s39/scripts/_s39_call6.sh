#!/usr/bin/env bash
# s39 call 6: llama3-8b Q4_0 decode steps at batch 64 in one process: A the route (gate_up on w64b2), B the previous
# rule (gate_up on w64: "wg:w64b2=w64"), C a control (the route captured again)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call6; mkdir -p $OUT
S=benchmarks/results/h200-2026-12-06-s39/scripts
machine_info > $OUT/machine.txt 2>&1
G=/tmp/onecat-peers-gguf
timeout 150 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_0 > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s"
timeout $(( 470 - SECONDS )) python3 $S/_s39_wg_form.py --model $G/llama3-8b.Q4_0.gguf --max-model-len 1024 \
  --batch 64 --context 512 --timed 20 --profiled 0 --rounds 3 --steps-json $OUT/ab-w64b2-q4_0-b64.json \
  --ab-disable "wg:w64b2=w64;wg:w64b2=w64b2" > $OUT/ab-w64b2-q4_0-b64.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-w64b2-q4_0-b64.txt
grep -E "^round|^decode|rc=|Error|error" $OUT/ab-w64b2-q4_0-b64.txt | tail -8 | cut -c1-700
