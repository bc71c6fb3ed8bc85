#!/usr/bin/env bash
# s30 call 3: what-if: llama3-8b q4_0 decode steps with the batched projections' rms_norm_add launches removed
# (wrong outputs; the bound on fusing them away), batch 32, alternated with the route, 3 rounds
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c3; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
for r in 1 2 3; do for v in route skip; do
  [ $SECONDS -gt 520 ] && break 2
  flag=""; [ $v = skip ] && flag="--skip-norm"
  timeout 150 python3 tools/gpu/_s30_whatif_norm.py --shape llama3-8b --weights q4_0 --batch 32 --context 512 \
    --timed 30 --profiled 0 --steps-json $OUT/b32-$v-r$r.json $flag > $OUT/b32-$v-r$r.txt 2>&1
  echo "r$r $v: $(grep median $OUT/b32-$v-r$r.txt | cut -c1-120) (${SECONDS}s)"
done; done
tar czf $FINAL/call3.tgz -C /tmp c3
