#!/usr/bin/env bash
# s35 call 3: test_linear_norm with the o -> norm -> gate_up check against an FP32 reference (at the seed that failed
# the mutual 2e-3 bound, 1171421130, and at a random one); then CUPTI timelines of a Q4_K_M batch-1 step (PDL off)
# with the decode graphs planned for the checkpoint's context (8192) and for the peers' max_model_len (656)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call3; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
G=/tmp/onecat-peers-gguf
(timeout 120 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_K_M > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s" >> $OUT/synth.txt) &
for seed in 1171421130 random; do
  [ $seed = random ] && unset ONECAT_TEST_SEED || export ONECAT_TEST_SEED=$seed
  timeout 150 python3 -m pytest -q -p no:cacheprovider --tb=short tests/kernels/test_linear_norm.py -k "gate_up" \
    > $OUT/tests-$seed.txt 2>&1; echo "tests($seed) rc=$? at ${SECONDS}s $(tail -1 $OUT/tests-$seed.txt)"
done
unset ONECAT_TEST_SEED
wait; tail -1 $OUT/synth.txt
for mml in 656 8192; do
  ONECAT_PDL=0 timeout 120 python3 tools/ncu/target.py --model $G/llama3-8b.Q4_K_M.gguf --batch 1 --context 512 \
    --max-model-len $mml --timed 20 --timeline 3 --profiled 0 2>&1 | grep -v -i warn > $OUT/timeline-mml$mml.txt
  echo "mml $mml at ${SECONDS}s"; grep -E "^decode|attn|^step 1" $OUT/timeline-mml$mml.txt | cut -c1-160
done
cd $FINAL && tar czf call3.tgz call3 && rm -rf call3
