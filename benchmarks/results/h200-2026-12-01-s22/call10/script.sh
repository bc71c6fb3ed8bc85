#!/usr/bin/env bash
# s22 call 10: tools/gpu/prefill_row.py (the prefill rows shared by attention_check.sh and prefill_volta_ab.py)
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
OUT=/tmp/ac TESTS=0 timeout 200 bash tools/gpu/attention_check.sh > $OUT/attention-check.txt 2>&1; echo "rc=$?" >> $OUT/attention-check.txt
cp /tmp/ac/attention-bench.json $OUT/ 2>/dev/null; tail -9 $OUT/attention-check.txt
timeout 120 python3 tools/gpu/prefill_volta_ab.py --json $OUT/prefill-volta.json > $OUT/prefill-volta.txt 2>&1; echo "rc=$?" >> $OUT/prefill-volta.txt
tail -10 $OUT/prefill-volta.txt
