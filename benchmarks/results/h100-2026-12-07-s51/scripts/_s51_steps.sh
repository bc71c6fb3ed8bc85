#!/usr/bin/env bash
# s51 call 3: where a batch-64 llama3-8b q4_0 decode step's wall time goes in the engine (tools/gpu/engine_steps.py,
# the peers bench's workload: 64 prompts of 512 random ids, 128 greedy tokens, async scheduling, FP16 KV, graphs).
# First wgmma_peak.py --set alu again, its dq rows now rebuilding distinct words (s51 fix). The peers run's rate implies ~6.1 ms a step where the graphed step is ~5.7 ms (s43): is the rest host time?
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 120 python3 tools/gpu/wgmma_peak.py --set alu --json $OUT/wgmma_alu.json 2>&1 \
  | grep -v "warning\|unsigned a\|^ *\^\|^$" > $OUT/wgmma_alu.txt
echo "alu rc=$? at ${SECONDS}s"; cat $OUT/wgmma_alu.txt
G=/tmp/onecat-peers-gguf
python3 -m onecat.bench.cli peers --out /tmp/synth --gguf-dir $G --configs llama3-8b:Q4_0 --synth-only > $OUT/synth.txt 2>&1
echo "synth rc=$? at ${SECONDS}s"; ls $G
timeout 400 python3 tools/gpu/engine_steps.py --model $G/llama3-8b.Q4_0.gguf --batch 64 --prompt-len 512 --gen 128 \
  > $OUT/steps_b64.txt 2>&1
echo "steps rc=$? at ${SECONDS}s"; tail -12 $OUT/steps_b64.txt
