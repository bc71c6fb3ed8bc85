#!/usr/bin/env bash
# s44 call 1: K / V steps staged into shared memory by cp.async right AFTER the PDL wait (the working tree:
# FP8 2 steps, FP16 1, 4-warp route) against main (b0b994c, .ab/): s21 staged them BEFORE the wait, where they
# competed with the previous call's tail; after the wait the memory is otherwise idle while a warp reads Q and
# does its first step (s21's graphed trace: ~1.6 us). GPU tests of the tree's decode route first, then #5's rows
# graphed per tree, alternated twice.
#   bash benchmarks/results/h200-2026-12-06-s44/scripts/_s44_call1.sh   # carry .whl, .ab
set -u
FINAL=$OUT
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache; ab_trees
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py -k "rd or fused" > $FINAL/attn-tests.txt 2>&1
echo "attention tests rc=$? at ${SECONDS}s: $(tail -1 $FINAL/attn-tests.txt)"
ROWS=${ROWS:-5,10,6,0,1,3,15,16,21,18}
for round in 1 2; do
  for v in $VARIANTS; do
    PYTHONPATH=$(path_of "$v"):tools/gpu timeout 100 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd --rows $ROWS \
      --json $FINAL/rows-$v-$round.json > $FINAL/rows-$v-$round.txt 2>&1
    echo "== round $round $v rc=$? at ${SECONDS}s"; grep -E "^(f16|e4m3|e5m2) " $FINAL/rows-$v-$round.txt
  done
done
