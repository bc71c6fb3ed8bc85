#!/usr/bin/env bash
# s47 call 5 (carry .whl, ~5 min; not run in s47: the device time was spent): the norm-weight-first entries (_gp:
# the norm weight loaded before the wait, one barrier in the prologue's reduction; the route's bits). Chains first
# (gate_up rn / rngp / glu / glugp, qkv rn / rngp; then gate_up's K-split shape), their GPU test, then the llama3-8b
# q4_0 batch-1 step A/B (route, NORM_WEIGHT_FIRST, the route again as control).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout $(( 120 )) python3 tools/gpu/gemv_chain.py --formats q4_0 --pdl 1 \
  --chains rn:28672x4096,rngp:28672x4096,glu:28672x4096,glugp:28672x4096,rn:6144x4096,rngp:6144x4096 \
  > $OUT/gemv-chains.txt 2>&1
echo "chains rc=$? at ${SECONDS}s"; grep -E "^q4_0|copy" $OUT/gemv-chains.txt | cut -c1-200
# the K-split shape for gate_up: s47 call 3 had it 0.6 us faster with the plain epilogue, 0.3 slower with the GLU at
# 72 registers (3 blocks an SM); its _gp entry is held to 64 (4 blocks)
timeout $(( 170 - SECONDS )) python3 tools/gpu/gemv_chain.py --formats q4_0 --pdl 1 --variants auto,r4u1k2nw8 \
  --chains glu:28672x4096,glugp:28672x4096 > $OUT/gemv-chains-k2.txt 2>&1
echo "chains k2 rc=$? at ${SECONDS}s"; grep -E "^q4_0" $OUT/gemv-chains-k2.txt | cut -c1-200
timeout $(( 260 - SECONDS )) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_packed.py -k "weight_first" \
  > $OUT/gp-test.txt 2>&1
echo "gp test rc=$? at ${SECONDS}s: $(tail -1 $OUT/gp-test.txt)"
timeout $(( 470 - SECONDS )) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --max-model-len 1088 \
  --batch 1 --context 512 --timed 25 --profiled 0 --rounds 3 --steps-json $OUT/ab-gp-q4_0-b1.json \
  --ab-disable "set:linear_fused_ops.NORM_WEIGHT_FIRST=True;set:linear_fused_ops.NORM_WEIGHT_FIRST=False" \
  > $OUT/ab-gp-q4_0-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-gp-q4_0-b1.txt
grep -E "^A:|^round|^decode|rc=|Error|error" $OUT/ab-gp-q4_0-b1.txt | tail -8 | cut -c1-600
