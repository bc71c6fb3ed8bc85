# s21 call 4: cluster form routed (few groups, short contexts): GPU tests, engine check, A/B rows, batch-1 steps
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
ab_trees
L=$OUT/log.txt
{ machine_info; echo "variants: $VARIANTS"; } > $L 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py tests/kernels/test_attention_fp8.py -k "rd or decode or cluster" 2>&1 | tail -4 >> $L
for p in 2 3; do timeout 150 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts $p --max-tokens 16 2>&1 | tail -3 >> $L; done
for r in 1 2; do
  timeout 150 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd,rd_w4 --rows 20,24,25,26,27,28,0,5 \
    --json $OUT/ab-$r.json > $OUT/ab-$r.txt 2>&1 || echo "ab round $r rc=$?" >> $L
done
for r in 1 2 3; do for v in $VARIANTS; do
  PYTHONPATH=$(path_of $v) timeout 120 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 1 --context 512 \
    --timed 40 --profiled 0 > /tmp/step-$v-$r.txt 2>&1
  echo "step b1 $v round $r: $(grep -i -m3 'step\|tok/s' /tmp/step-$v-$r.txt | tr '\n' ' ')" >> $L
done; done
tar czf $OUT/steps.tgz -C /tmp $(cd /tmp && ls step-*.txt)
cat $L; tail -10 $OUT/ab-1.txt; tail -9 $OUT/ab-2.txt
