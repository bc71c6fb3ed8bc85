#!/usr/bin/env bash
# s53 (carry .whl): XB behind XB. gate_up's _glu_xb_xs writes its GLU output as down's x stages and down's w64 tile
# copies them whole (_norm_xb / _xb). The GPU tests (bit-equal to the row-major route, the chain and ops.linear on the
# stages, split-K), the engine against its CPU reference at 48 concurrent requests (llama3-8b-shaped, 2 layers, q4_0:
# down on w64, eager and graphed), then the batch-64 llama3-8b q4_0 decode step with the route on / off
# (switch_ab.py, linear_norm_ops.XB_FEEDS), the route captured again as a control.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
git log --oneline -1 > $OUT/tree.txt 2>/dev/null; git status --short >> $OUT/tree.txt 2>/dev/null
timeout 280 python3 -m pytest -q tests/kernels/test_linear_norm.py tests/kernels/test_gemm_rd.py \
  tests/kernels/test_x_stages.py -m gpu -k "x_stages or o_gate_up or down_qkv or wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout 150 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 48 \
  > $OUT/engine48.txt 2>&1
echo "engine rc=$? at ${SECONDS}s"; tail -6 $OUT/engine48.txt
timeout $((575 - SECONDS)) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --batch 64 --context 512 \
  --timed 25 --profiled 0 --ab-disable "set:linear_norm_ops.XB_FEEDS=False;set:linear_norm_ops.XB_FEEDS=True" \
  > $OUT/switch_b64.txt 2>&1
echo "switch rc=$? at ${SECONDS}s"; tail -14 $OUT/switch_b64.txt
