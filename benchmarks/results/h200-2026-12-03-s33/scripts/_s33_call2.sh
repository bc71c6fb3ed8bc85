#!/usr/bin/env bash
# s33 call 2: batch-1 kernel tables (CUPTI timeline, PDL off so kernel times add up, 3 steps) of the synthesized
# llama3-8b Q4_K_M and Q4_0 GGUFs call 1 left in /tmp/onecat-peers-gguf: where Q4_K_M's extra 0.35 ms a token goes
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call2; mkdir -p $OUT
for t in Q4_K_M Q4_0; do
  ONECAT_PDL=0 timeout 200 python3 tools/ncu/target.py --model /tmp/onecat-peers-gguf/llama3-8b.$t.gguf --batch 1 \
    --context 512 --timed 10 --profiled 0 --timeline 3 2>&1 | grep -v -i warn > $OUT/timeline-b1-$t-pdl-off.txt
  echo "== $t (at ${SECONDS}s)"; head -30 $OUT/timeline-b1-$t-pdl-off.txt | cut -c1-150
done
cd $FINAL && tar czf call2.tgz call2 && rm -rf call2
