#!/usr/bin/env bash
# s22 call 4 (dfe3481): attention_check.sh (GPU tests, admission, #5's table per launch, prefill + V100
# projection); #5's decode rows graphed on the route; engine checks (CUDA route == CPU reference)
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1
OUT=/tmp/ac timeout 300 bash tools/gpu/attention_check.sh > $OUT/attention-check.txt 2>&1; echo "rc=$?" >> $OUT/attention-check.txt
cp /tmp/ac/*.txt /tmp/ac/*.json $OUT/ 2>/dev/null; tail -30 $OUT/attention-check.txt
timeout 200 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd --rows 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,29,30,31,32,33 --json $OUT/rows.json > $OUT/rows.txt 2>&1
tail -22 $OUT/rows.txt
for s in "smollm2-135m --weights q4_0" "llama3-8b --weights q4_0 --layers 2"; do
  timeout 150 python3 tools/gpu/engine_check.py --shape $s --prompts 32 --max-tokens 16 >> $OUT/engine.txt 2>&1; echo "rc=$?" >> $OUT/engine.txt
done
grep -v "^\s*$" $OUT/engine.txt | tail -8
ls $OUT | wc -l
