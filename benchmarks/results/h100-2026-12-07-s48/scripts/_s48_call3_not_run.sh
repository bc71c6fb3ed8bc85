#!/usr/bin/env bash
# s48 call 3 (carry .whl, ~5 min): the norm-weight-first q4_0 entries as the route, on whatever card comes (H200
# wanted): their GPU tests, then the llama3-8b q4_0 batch-1 step A/B (route = _gp; the wait-first form; the route
# again as control).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_packed.py tests/kernels/test_linear_norm.py \
  > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
# qkv's normed link in its two shapes (the route's K split vs whole K a warp), both prologue forms
timeout 90 python3 tools/gpu/gemv_chain.py --formats q4_0 --pdl 1 --variants auto,r4u1k1nw8 \
  --chains rn:6144x4096,rngp:6144x4096,glugp:28672x4096 > $OUT/gemv-chains-qkv.txt 2>&1
echo "chains rc=$? at ${SECONDS}s"; grep -E "^q4_0|copy" $OUT/gemv-chains-qkv.txt | cut -c1-200
timeout $(( 420 - SECONDS )) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --max-model-len 1088 \
  --batch 1 --context 512 --timed 25 --profiled 0 --rounds 3 --steps-json $OUT/ab-gp-q4_0-b1.json \
  --ab-disable "set:linear_fused_ops.NORM_WEIGHT_FIRST=False;set:linear_fused_ops.NORM_WEIGHT_FIRST=True" \
  > $OUT/ab-gp-q4_0-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-gp-q4_0-b1.txt
grep -E "^A:|^round|^decode|rc=|Error|error" $OUT/ab-gp-q4_0-b1.txt | tail -8 | cut -c1-600
