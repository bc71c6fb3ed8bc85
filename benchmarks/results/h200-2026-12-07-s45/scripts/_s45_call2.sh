#!/usr/bin/env bash
# s45 call 2 (carry .whl): llama3-8b Q4_0 batch-1 decode steps in one process (tools/ncu/target.py's in-process A/B
# through s38's _s38_attn_form.py): A the route (w4 attention blocks, partitions >= 64 keys), B-E w4 with partitions
# of at least 128 / 256 / 512 / 1024 keys (fewer partials for the fused merge), F a control (w4, 64, captured
# again). s38 found smaller partitions (w1 at 64 / 32 / 16) lose more; larger ones were never timed in a step.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT
S=benchmarks/results/h100-2026-12-05-s38/scripts
machine_info > $FINAL/machine.txt 2>&1; head -2 $FINAL/machine.txt | tail -1
G=/tmp/onecat-peers-gguf
[ -f $G/llama3-8b.Q4_0.gguf ] || timeout 150 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G \
  --synth-only --configs llama3-8b:Q4_0 > $FINAL/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s"
timeout $(( 570 - SECONDS )) python3 $S/_s38_attn_form.py --model $G/llama3-8b.Q4_0.gguf --max-model-len 1088 \
  --batch 1 --context 512 --timed 25 --profiled 0 --rounds 3 --steps-json $FINAL/ab-min-part-q4_0-b1.json \
  --ab-disable "attn:w4:128;attn:w4:256;attn:w4:512;attn:w4:1024;attn:w4:64" > $FINAL/ab-min-part-q4_0-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $FINAL/ab-min-part-q4_0-b1.txt
grep -E "^round|^decode|rc=|Error|error" $FINAL/ab-min-part-q4_0-b1.txt | tail -8 | cut -c1-900
