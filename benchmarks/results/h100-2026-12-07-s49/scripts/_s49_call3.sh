#!/usr/bin/env bash
# s49 call 3: w64b2s (W through a 4-step shared-memory ring by cp.async) against w64b2 / w64: the GPU tests
# (bit-equal to w64b2), gemm_bench at M 64 / 48, then the batch-64 decode step A/B (gemm_ops.TWO_PER_SM).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 200 python3 -m pytest -q -x tests/kernels/test_gemm_rd.py -k "wgmma_tile" -m gpu > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout 90 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --shapes 28672x4096 --tiles w64b2,w64b2s --glu \
  --splits 1 --no-cublas --iters 20 > $OUT/bench-gate_up.txt 2>&1; echo "bench rc=$? at ${SECONDS}s"
timeout 90 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64 --shapes 4096x14336,6144x4096 --tiles w64,w64b2,w64b2s \
  --splits 1,2,4 --no-cublas --iters 20 > $OUT/bench-down-qkv.txt 2>&1; echo "bench rc=$? at ${SECONDS}s"
grep -E "^\|" $OUT/bench-gate_up.txt | head -12; grep -E "^\|" $OUT/bench-down-qkv.txt | head -24
timeout $(( 540 - SECONDS )) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --max-model-len 656 \
  --batch 64 --context 512 --timed 20 --profiled 0 --rounds 2 --steps-json $OUT/ab-b64.json \
  --ab-disable "set:gemm_ops.TWO_PER_SM='w64b2s';set:gemm_ops.TWO_PER_SM='w64b2'" > $OUT/ab-b64.txt 2>&1
echo "ab rc=$? at ${SECONDS}s"
grep -E "^round|^decode|rc=|Error|error" $OUT/ab-b64.txt | tail -8 | cut -c1-600
