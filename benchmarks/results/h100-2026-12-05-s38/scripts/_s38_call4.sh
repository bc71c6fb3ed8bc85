#!/usr/bin/env bash
# s38 call 4: llama3-8b Q4_0 batch-1 steps in one process: A the route (w4 attention blocks, 64-key partitions),
# B-D one-warp blocks with 64 / 32 / 16-key partitions, E a control (w4, 64, captured again)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call4; mkdir -p $OUT
S=benchmarks/results/h100-2026-12-05-s38/scripts
machine_info > $OUT/machine.txt 2>&1
G=/tmp/onecat-peers-gguf
timeout 150 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_0 > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s"
timeout $(( 560 - SECONDS )) python3 $S/_s38_attn_form.py --model $G/llama3-8b.Q4_0.gguf --max-model-len 1088 \
  --batch 1 --context 512 --timed 25 --profiled 0 --rounds 3 --steps-json $OUT/ab-attn-form-q4_0-b1.json \
  --ab-disable "attn:w1:64;attn:w1:32;attn:w1:16;attn:w4:64" > $OUT/ab-attn-form-q4_0-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-attn-form-q4_0-b1.txt
grep -E "^round|^decode|rc=|Error|error" $OUT/ab-attn-form-q4_0-b1.txt | tail -8 | cut -c1-700
