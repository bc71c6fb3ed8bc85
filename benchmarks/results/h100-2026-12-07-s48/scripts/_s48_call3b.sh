#!/usr/bin/env bash
# s48 call 3, trimmed to the device time left (~4 min): the norm-weight-first q4_0 route's GPU tests (gemv_packed), then
# the llama3-8b q4_0 batch-1 step A/B (route = _gp; the wait-first form; the route again as control), 2 rounds.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_packed.py -k "weight_first or normed" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout $(( 230 - SECONDS )) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --max-model-len 1088 \
  --batch 1 --context 512 --timed 25 --profiled 0 --rounds 2 --steps-json $OUT/ab-gp-q4_0-b1.json \
  --ab-disable "set:linear_fused_ops.NORM_WEIGHT_FIRST=False;set:linear_fused_ops.NORM_WEIGHT_FIRST=True" \
  > $OUT/ab-gp-q4_0-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-gp-q4_0-b1.txt
grep -E "^A:|^round|^decode|rc=|Error|error" $OUT/ab-gp-q4_0-b1.txt | tail -8 | cut -c1-600
