# s21 call 10: the register-direct decode at D 256: GPU tests, rows against the Volta kernel
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py tests/kernels/test_attention_fp8.py -k "rd or decode or fused" --tb=line 2>&1 | grep -v "^\.\.\.\." | tail -6 >> $L
for r in 1 2; do
  timeout 150 python3 tools/gpu/decode_rd_ab.py --graphed --kernels volta,rd --rows 29,30,31,32,33,34 --json $OUT/ab-$r.json > $OUT/ab-$r.txt 2>&1 || echo "ab $r rc=$?" >> $L
done
cat $L; tail -8 $OUT/ab-1.txt; tail -7 $OUT/ab-2.txt
