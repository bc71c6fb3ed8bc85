#!/usr/bin/env bash
# s28 call 7: engine_check with an E5M2 cache; llama3-8b q4_0 decode steps at batch 32, FP16 vs E4M3 cache (same run)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c7; mkdir -p $OUT
timeout 200 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 32 --max-tokens 16 \
  --kv float8_e5m2 > $OUT/engine-check-e5m2.txt 2>&1; echo "rc=$?" >> $OUT/engine-check-e5m2.txt
grep -E "clear positions|eager|rc=" $OUT/engine-check-e5m2.txt
for kv in float16 float8_e4m3fn; do
  timeout 100 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 32 --context 512 --timed 30 \
    --profiled 0 --kv $kv --steps-json $OUT/b32-$kv.json > $OUT/b32-$kv.txt 2>&1
  grep median $OUT/b32-$kv.txt | cut -c1-140
done
tar czf $FINAL/call7.tgz -C /tmp c7
