#!/usr/bin/env bash
# s30 call 4: what-ifs (wrong outputs): llama3-8b q4_0 decode steps with attention removed (batch 1 / 32) or the
# batched rms_norm_add launches removed (batch 32), alternated with the route, 3 rounds
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c4; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
timeout 200 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 32 --context 512 --timed 3 --profiled 0 \
  > $OUT/warm.txt 2>&1  # compile everything once
echo "warm done (${SECONDS}s)"
for r in 1 2 3; do for cfg in "1 route" "1 skip-attention" "32 route" "32 skip-attention" "32 skip-norm"; do
  set -- $cfg; b=$1; v=$2
  [ $SECONDS -gt 540 ] && break 2
  flag=""; [ $v != route ] && flag="--$v"
  timeout 60 python3 tools/gpu/_s30_whatif.py --shape llama3-8b --weights q4_0 --batch $b --context 512 \
    --timed 30 --profiled 0 --steps-json $OUT/b$b-$v-r$r.json $flag > $OUT/b$b-$v-r$r.txt 2>&1
  echo "r$r b$b $v: $(grep median $OUT/b$b-$v-r$r.txt | cut -c1-110) (${SECONDS}s)"
done; done
tar czf $FINAL/call4.tgz -C /tmp c4
