#!/usr/bin/env bash
# Prepared for the next session (carry .whl, .peers/llama-bin.tar.xz.0* and .peers/llama.cpp/ONECAT_SOURCE: run
# tools/peers/build_here.sh on the CPU machine first, ~25 min):
# #7's goals on an H200 with s48's norm-weight-first q4_0 route (tools/gpu/goals_check.sh: llama.cpp beside onecat on
# the same files), then the llama3-8b q4_0 batch-1 step A/B of the route against the wait-first form. ~8 min.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
GOALS_LIMIT_S=330 OUT=$OUT bash tools/gpu/goals_check.sh > $OUT/goals.txt 2>&1
echo "goals rc=$? at ${SECONDS}s"; cat $OUT/goals.txt
timeout $(( 560 - SECONDS )) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --max-model-len 1088 \
  --batch 1 --context 512 --timed 25 --profiled 0 --rounds 2 --steps-json $OUT/ab-gp-q4_0-b1.json \
  --ab-disable "set:linear_fused_ops.NORM_WEIGHT_FIRST=False;set:linear_fused_ops.NORM_WEIGHT_FIRST=True" \
  > $OUT/ab-gp-q4_0-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-gp-q4_0-b1.txt
grep -E "^round|^decode|rc=|Error|error" $OUT/ab-gp-q4_0-b1.txt | tail -6 | cut -c1-600
