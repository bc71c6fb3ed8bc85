#!/usr/bin/env bash
# Prepared in s36 for the next session (NOT run): chunk-x-sum-fp32.diff's tests and its batch-1 step A/B in one call.
# 1. GPU tests with the diff applied: test_linear_norm + test_gemv_mixed at four seeds (JOIN_ERR = 2 against a more
#    exact unfused route: s36 call 7 saw 2.73x on the generic case), test_gpu_kernels' normed ops, test_gemv_packed.
# 2. llama3-8b Q4_K_M batch-1 steps, diff (B) and main (A) in separate processes, alternated 2 rounds each
#    (a kernel source cannot be switched inside one process).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/sumx; mkdir -p $OUT
D=benchmarks/results/h200-2026-12-03-s36/chunk-x-sum-fp32.diff
machine_info > $OUT/machine.txt 2>&1
G=/tmp/onecat-peers-gguf
(timeout 150 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_K_M > $OUT/synth.txt 2>&1) &
git apply $D || exit 1
for seed in 1171421130 14 23 random; do
  [ $seed = random ] && unset ONECAT_TEST_SEED || export ONECAT_TEST_SEED=$seed
  timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=line tests/kernels/test_linear_norm.py \
    tests/kernels/test_gemv_mixed.py > $OUT/tests-$seed.txt 2>&1
  echo "seed $seed rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests-$seed.txt)"; grep -h "^/.*Error" $OUT/tests-$seed.txt | head -3
done
unset ONECAT_TEST_SEED
timeout 150 python3 -m pytest -q -p no:cacheprovider --tb=line tests/kernels/test_gpu_kernels.py -k "norm" \
  tests/kernels/test_gemv_packed.py > $OUT/tests-generic.txt 2>&1; echo "generic rc=$?: $(tail -1 $OUT/tests-generic.txt)"
wait
diff_on() { git apply --check $D 2>/dev/null && git apply $D; true; }         # applied (no-op if it is)
diff_off() { git apply -R --check $D 2>/dev/null && git apply -R $D; true; }  # main's source (no-op if it is)
for round in 1 2; do
  for v in B A; do
    [ $v = B ] && diff_on || diff_off
    timeout 120 python3 tools/ncu/target.py --model $G/llama3-8b.Q4_K_M.gguf --batch 1 --context 512 \
      --max-model-len 656 --timed 30 --profiled 0 > $OUT/step-$v-$round.txt 2>&1
    echo "$v round $round rc=$?: $(grep -i "median" $OUT/step-$v-$round.txt | tail -1)"
  done
done
diff_off
cd $FINAL && tar czf sumx.tgz sumx && rm -rf sumx
