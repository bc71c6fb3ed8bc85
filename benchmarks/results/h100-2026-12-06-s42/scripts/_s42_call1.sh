#!/usr/bin/env bash
# s42 call 1: (a) llama3-8b q4_0 decode steps at batch 1 / 64 with PDL on, traced (CUPTI) and charged by end
# increments (what each kernel adds past the latest earlier end: the critical path's share with PDL, which the
# PDL-off tables of s33 / s41 cannot show), and smollm2-135m q4_1 at batch 1 (G1's shape)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call1; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt
for cfg in "llama3-8b q4_0 1" "llama3-8b q4_0 64" "smollm2-135m q4_1 1"; do
  set -- $cfg
  f=$OUT/timeline-$1-$2-b$3-pdl-on.txt
  timeout 110 python3 tools/ncu/target.py --shape $1 --weights $2 --batch $3 --context 512 --timed 30 \
    --profiled 0 --timeline 3 2>&1 | grep -v -i warn > $f
  echo "== $cfg at ${SECONDS}s"; grep "^decode step" $f; grep -A12 "^span per step" $f
done
cd $FINAL && tar czf call1.tgz call1 && rm -rf call1
