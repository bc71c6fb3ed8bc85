#!/usr/bin/env bash
# s30 call 6: normed GEMVs with the norm weight staged before the PDL wait: GPU tests (bit-equal to the unfused route,
# staged and not), gemv_chain rn / glu / decode chains and batch-1 steps, staged (1) against not (0), alternated
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c6; mkdir -p $OUT
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_packed.py -k "rope or glu" > $OUT/tests.txt 2>&1
echo "rc=$?" >> $OUT/tests.txt; tail -2 $OUT/tests.txt; echo "tests (${SECONDS}s)"
timeout 150 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 1 --context 512 --timed 3 --profiled 0 \
  > $OUT/warm.txt 2>&1; echo "warm (${SECONDS}s)"
for r in 1 2; do for st in 0 1; do
  [ $SECONDS -gt 360 ] && break 2
  ONECAT_S30_STAGE=$st timeout 60 python3 tools/gpu/_s30_norm_stage.py --formats q4_0 --chains rn:6144x4096,glu:28672x4096,decode \
    --pdl 1 > $OUT/chain-st$st-r$r.txt 2>&1
  echo "r$r stage=$st"; grep -E "rn:|glu:|decode" $OUT/chain-st$st-r$r.txt | cut -c1-130
done; done
echo "chains (${SECONDS}s)"
for r in 1 2 3; do for st in 0 1; do
  [ $SECONDS -gt 440 ] && break 2
  ONECAT_S30_STAGE=$st timeout 40 python3 tools/gpu/_s30_norm_stage.py --steps --shape llama3-8b --weights q4_0 --batch 1 \
    --context 512 --timed 40 --profiled 0 --steps-json $OUT/b1-st$st-r$r.json > $OUT/b1-st$st-r$r.txt 2>&1
  echo "r$r stage=$st: $(grep median $OUT/b1-st$st-r$r.txt | cut -c1-100) (${SECONDS}s)"
done; done
tar czf $FINAL/call6.tgz -C /tmp c6
