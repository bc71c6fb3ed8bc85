#!/usr/bin/env bash
# s36 call 1: s35's last form of the joined GEMVs' GPU tests (JOIN_ERR = 2, FP8 rows by decoded values, never run
# on the GPU) at four seeds, then s35's prepared int8 mma.sync rate script (G3's open question).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call1; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
timeout 120 python3 benchmarks/results/h200-2026-12-03-s35/scripts/_s35_mma_int8_rate.py > $OUT/mma-int8-rate.txt 2>&1
echo "int8 rate rc=$?"; tail -20 $OUT/mma-int8-rate.txt
for seed in ${SEEDS:-1171421130 14 23 random}; do
  [ $seed = random ] && unset ONECAT_TEST_SEED || export ONECAT_TEST_SEED=$seed
  timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short tests/kernels/test_linear_norm.py \
    tests/kernels/test_gemv_mixed.py > $OUT/tests-$seed.txt 2>&1
  echo "seed $seed rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests-$seed.txt)"
  grep -E "^E  |Error|seed" $OUT/tests-$seed.txt | head -5
done
cd $FINAL && tar czf call1.tgz call1 && rm -rf call1
