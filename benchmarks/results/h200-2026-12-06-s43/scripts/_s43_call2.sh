#!/usr/bin/env bash
# s43 call 2: #7's goals through the shared tools/gpu/goals_check.sh (its first run), then #5's decode rows
# (ctx >= 8K, batch >= 4: FP16 / E4M3 / E5M2 at D 128 32/8, and the D 256 rows) as the decode graph runs them
# (tools/gpu/decode_rd_ab.py --graphed, the route's kernel), with copy measured in the same process.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call2; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
GOALS_LIMIT_S=330 OUT=$OUT bash tools/gpu/goals_check.sh > $OUT/goals.txt 2>&1
echo "goals rc=$? at ${SECONDS}s"; cat $OUT/goals.txt
left=$(( 560 - SECONDS ))
timeout $left python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd --rows 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,29,30,31,32,33 \
  --json $OUT/rows.json > $OUT/rows.txt 2>&1
echo "rows rc=$? at ${SECONDS}s"; sed -n '/^decode attention/,$p' $OUT/rows.txt
