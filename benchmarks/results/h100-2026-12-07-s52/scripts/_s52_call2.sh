#!/usr/bin/env bash
# s52 call 2: engine_steps.py at batch 64 (the peers bench's onecat workload: 64 prompts of 512 random ids, 128 greedy
# tokens, async scheduling, FP16 KV, graphs; where a step's wall time goes: execute vs host rest; the peers run's rate
# implies ~6.1 ms a step where the graphed step is ~5.7 ms), then wgmma_peak.py --set alu with s51's fixed dq rows.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
G=/tmp/onecat-peers-gguf
python3 -m onecat.bench.cli peers --out /tmp/synth --gguf-dir $G --configs llama3-8b:Q4_0 --synth-only > $OUT/synth.txt 2>&1
echo "synth rc=$? at ${SECONDS}s"
timeout 300 python3 tools/gpu/engine_steps.py --model $G/llama3-8b.Q4_0.gguf --batch 64 --prompt-len 512 --gen 128 \
  > $OUT/steps_b64.txt 2>&1
echo "steps rc=$? at ${SECONDS}s"; tail -8 $OUT/steps_b64.txt
timeout $((570 - SECONDS)) python3 tools/gpu/wgmma_peak.py --set alu --json $OUT/wgmma_alu.json 2>&1 \
  | grep -v "warning\|unsigned a\|^ *\^\|^$" > $OUT/wgmma_alu.txt
echo "alu rc=$? at ${SECONDS}s"; cat $OUT/wgmma_alu.txt
