#!/usr/bin/env bash
# s47 call 1 (carry .whl, ~8 min): the grid-stride normed GEMVs (_rn_gs / _rn_glu_gs: one resident wave, the norm
# prologue once a block). Their GPU test (bit-equal to the route); gemv chains of gate_up plain / rn / glu / their gs
# entries and qkv plain / rn (s46's prepared prologue-vs-GLU split); the llama3-8b q4_0 batch-1 decode step A/B
# (generated weights, route vs gs:1, gs:0 the control, one process).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
S=benchmarks/results/h100-2026-12-07-s47/scripts
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_packed.py -k "grid_stride or glu" \
  > $OUT/gs-test.txt 2>&1
echo "gs test rc=$? at ${SECONDS}s: $(tail -1 $OUT/gs-test.txt)"
timeout $(( 300 - SECONDS )) python3 tools/gpu/gemv_chain.py --formats q4_0 --pdl 1 \
  --chains 28672x4096,rn:28672x4096,rngs:28672x4096,glu:28672x4096,glugs:28672x4096,6144x4096,rn:6144x4096 \
  > $OUT/gemv-chains.txt 2>&1
echo "chains rc=$? at ${SECONDS}s"; tail -10 $OUT/gemv-chains.txt | cut -c1-200
timeout $(( 580 - SECONDS )) python3 $S/_s47_gs_ab.py --shape llama3-8b --weights q4_0 --max-model-len 1088 \
  --batch 1 --context 512 --timed 25 --profiled 0 --rounds 3 --steps-json $OUT/ab-gs-q4_0-b1.json \
  --ab-disable "gs:1;gs:0" > $OUT/ab-gs-q4_0-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-gs-q4_0-b1.txt
grep -E "^A:|^round|^decode|rc=|Error|error" $OUT/ab-gs-q4_0-b1.txt | tail -8 | cut -c1-600
