#!/usr/bin/env bash
# s39 call 2: llama3-8b Q4_0 decode steps in one process per batch: A the route, B its wgmma / r32w GEMMs on the
# two-warpgroup forms (VARIANT, e.g. "wg:w64=w64x2" at batch 64), C a control (the route captured again).
#   bash _s39_call2.sh "64:wg:w64=w64x2;wg:w64=w64" "32:wg:r32w=w32x2;wg:r32w=r32w"
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call2; mkdir -p $OUT
S=benchmarks/results/h200-2026-12-06-s39/scripts
machine_info > $OUT/machine.txt 2>&1
G=/tmp/onecat-peers-gguf
timeout 150 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_0 > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s"
for spec in "$@"; do
  B=${spec%%:*}; V=${spec#*:}
  timeout $(( 580 - SECONDS )) python3 $S/_s39_wg_form.py --model $G/llama3-8b.Q4_0.gguf --max-model-len 1024 \
    --batch $B --context 512 --timed 20 --profiled 0 --rounds 3 --steps-json $OUT/ab-wg-q4_0-b$B.json \
    --ab-disable "$V" > $OUT/ab-wg-q4_0-b$B.txt 2>&1
  echo "rc=$? at ${SECONDS}s" >> $OUT/ab-wg-q4_0-b$B.txt
  grep -E "^round|^decode|rc=|Error|error" $OUT/ab-wg-q4_0-b$B.txt | tail -8 | cut -c1-700
done
