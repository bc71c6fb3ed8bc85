#!/usr/bin/env bash
# s46 call 1 (carry .whl): (a) s45's prepared batch-1 attention partition A/B (llama3-8b q4_0 step, attention
# partitions of at least 64 / 128 / 256 / 512 / 1024 keys, one process); (b) w64 vs r32 on qkv / o at M 48 / 64.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT
S=benchmarks/results/h100-2026-12-05-s38/scripts
machine_info > $FINAL/machine.txt 2>&1; head -2 $FINAL/machine.txt | tail -1
G=/tmp/onecat-peers-gguf
[ -f $G/llama3-8b.Q4_0.gguf ] || timeout 150 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G \
  --synth-only --configs llama3-8b:Q4_0 > $FINAL/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s"
timeout $(( 420 - SECONDS )) python3 $S/_s38_attn_form.py --model $G/llama3-8b.Q4_0.gguf --max-model-len 1088 \
  --batch 1 --context 512 --timed 25 --profiled 0 --rounds 3 --steps-json $FINAL/ab-min-part-q4_0-b1.json \
  --ab-disable "attn:w4:128;attn:w4:256;attn:w4:512;attn:w4:1024;attn:w4:64" > $FINAL/ab-min-part-q4_0-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $FINAL/ab-min-part-q4_0-b1.txt
grep -E "^round|^decode|rc=|Error|error" $FINAL/ab-min-part-q4_0-b1.txt | tail -8 | cut -c1-900
timeout $(( 525 - SECONDS )) python3 tools/gpu/gemm_bench.py --formats q4_0 --m 48,64 --shapes 6144x4096,4096x4096 \
  --tiles w64,r32 --splits 1,2,3,4 --no-cublas --iters 20 --budget 90 > $FINAL/gemm-w64-r32.txt 2>&1
echo "gemm rc=$? at ${SECONDS}s"; tail -30 $FINAL/gemm-w64-r32.txt | cut -c1-200
