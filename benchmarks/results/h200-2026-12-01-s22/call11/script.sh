#!/usr/bin/env bash
# s22 call 11: attention_check.sh's decode V100 projection from the kernel a V100 runs (cuda_split_kv forced)
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
OUT=/tmp/ac TESTS=0 timeout 280 bash tools/gpu/attention_check.sh > $OUT/attention-check.txt 2>&1; echo "rc=$?" >> $OUT/attention-check.txt
cp /tmp/ac/attention-bench.json $OUT/ 2>/dev/null; tail -26 $OUT/attention-check.txt
