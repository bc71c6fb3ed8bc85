#!/usr/bin/env bash
# s22 call 1: D 256 FP16 register-direct decode (Q in shared memory): GPU tests, then A/B against the Volta kernel
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py -k "decode_rd" > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
tail -3 $OUT/tests.txt
for r in 1 2; do
  timeout 150 python3 tools/gpu/decode_rd_ab.py --graphed --kernels volta,rd --rows 29,32,34,30 --json $OUT/ab-$r.json > $OUT/ab-$r.txt 2>&1
  tail -9 $OUT/ab-$r.txt
done
