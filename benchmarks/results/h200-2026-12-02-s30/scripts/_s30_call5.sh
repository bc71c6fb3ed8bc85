#!/usr/bin/env bash
# s30 call 5: batch-1 decode steps with attention's split-KV plan made for fewer SMs (fewer, fuller partitions)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c5; mkdir -p $OUT
timeout 200 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 1 --context 512 --timed 3 --profiled 0 \
  > $OUT/warm.txt 2>&1
echo "warm done (${SECONDS}s)"
for r in 1 2 3; do for v in route --attention-sms=22 --attention-sms=44 --skip-attention; do
  [ $SECONDS -gt 420 ] && break 2
  flag=""; [ $v != route ] && flag="$v"; tag=${v#--}
  timeout 60 python3 tools/gpu/_s30_whatif.py --shape llama3-8b --weights q4_0 --batch 1 --context 512 \
    --timed 30 --profiled 0 --steps-json $OUT/b1-$tag-r$r.json $flag > $OUT/b1-$tag-r$r.txt 2>&1
  echo "r$r b1 $tag: $(grep median $OUT/b1-$tag-r$r.txt | cut -c1-110) (${SECONDS}s)"
done; done
tar czf $FINAL/call5.tgz -C /tmp c5
