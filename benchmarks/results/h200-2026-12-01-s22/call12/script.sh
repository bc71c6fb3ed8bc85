#!/usr/bin/env bash
# s22 call 12: the attention GPU tests, whole files, at the final kernels
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
timeout 170 python3 -m pytest -q -p no:cacheprovider -x tests/kernels/test_attention_gpu.py tests/kernels/test_attention_fp8.py > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt; tail -3 $OUT/tests.txt
