#!/usr/bin/env bash
# s35 call 6: the joined GEMVs' GPU tests with the qkv / cache checks against an FP32 reference and the cache rows
# compared where the step wrote them (test_gemv_down_qkv now writes a real slot), at four seeds
# (call 7: the same after the bounds were set from call 6, SEEDS="1171421130 14 23")
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/${CALL:-call6}; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
for seed in ${SEEDS:-1171421130 14 23 random}; do
  [ $seed = random ] && unset ONECAT_TEST_SEED || export ONECAT_TEST_SEED=$seed
  timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short tests/kernels/test_linear_norm.py \
    tests/kernels/test_gemv_mixed.py > $OUT/tests-$seed.txt 2>&1
  echo "seed $seed rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests-$seed.txt)"
  grep -E "^E  |Error" $OUT/tests-$seed.txt | head -5
done
cd $FINAL && tar czf ${CALL:-call6}.tgz ${CALL:-call6} && rm -rf ${CALL:-call6}
