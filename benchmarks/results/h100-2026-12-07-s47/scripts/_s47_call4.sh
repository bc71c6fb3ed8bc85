#!/usr/bin/env bash
# s47 call 4 (carry .whl, ~5 min): the per-warp norm entries (_wn: each warp sums r^2 over K itself and forms its
# chunks' normalized x in the K loop; no shared memory, no block barrier). Their GPU test (within rounding of the
# route); gemv chains of gate_up plain / rn / rnwn / glu / gluwn and qkv plain / rn / rnwn; the llama3-8b q4_0
# batch-1 decode step A/B (generated weights; route vs WARP_NORM, the route again as the control; one process).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_packed.py -k "warp_norm or glu or rope" \
  > $OUT/wn-test.txt 2>&1
echo "wn test rc=$? at ${SECONDS}s: $(tail -1 $OUT/wn-test.txt)"
timeout $(( 250 - SECONDS )) python3 tools/gpu/gemv_chain.py --formats q4_0 --pdl 1 \
  --chains 28672x4096,rn:28672x4096,rnwn:28672x4096,glu:28672x4096,gluwn:28672x4096,6144x4096,rn:6144x4096,rnwn:6144x4096 \
  > $OUT/gemv-chains.txt 2>&1
echo "chains rc=$? at ${SECONDS}s"; grep -E "^q4_0|copy" $OUT/gemv-chains.txt | cut -c1-200
timeout $(( 480 - SECONDS )) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --max-model-len 1088 \
  --batch 1 --context 512 --timed 25 --profiled 0 --rounds 3 --steps-json $OUT/ab-wn-q4_0-b1.json \
  --ab-disable "set:linear_fused_ops.WARP_NORM=True;set:linear_fused_ops.WARP_NORM=False" > $OUT/ab-wn-q4_0-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-wn-q4_0-b1.txt
grep -E "^A:|^round|^decode|rc=|Error|error" $OUT/ab-wn-q4_0-b1.txt | tail -8 | cut -c1-600
