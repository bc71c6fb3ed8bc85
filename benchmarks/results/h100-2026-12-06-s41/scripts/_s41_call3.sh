#!/usr/bin/env bash
# s41 call 3: llama3-8b q4_0 decode-step kernel tables at batch 32 / 64 on main's route (PDL off: additive per-kernel
# times) and the step times with PDL on (CUDA events, median of 30)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call3; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
for b in 32 64; do
  timeout 100 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 --timed 30 \
    --profiled 0 > $OUT/steps-b$b.txt 2>&1; echo "steps b$b rc=$? at ${SECONDS}s"; tail -2 $OUT/steps-b$b.txt
  ONECAT_PDL=0 timeout 100 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 \
    --timed 5 --profiled 0 --timeline 3 2>&1 | grep -v -i warn > $OUT/timeline-b$b-pdl-off.txt
  echo "timeline b$b at ${SECONDS}s"; head -30 $OUT/timeline-b$b-pdl-off.txt
done
