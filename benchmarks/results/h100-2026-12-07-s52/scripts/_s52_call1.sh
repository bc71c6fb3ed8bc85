#!/usr/bin/env bash
# s52 call 1 (branch xb-route; carry .whl): the XB route's GPU tests (o's _norm epilogue writing gate_up's x stages,
# _glu_xb; test_o_gate_up_x_stages, test_o_gate_up_against_unfused at 48 / 64 through it, test_wgmma_bulk_x_stages
# with GLU), the pair's timing (s51's _s51_xb_pair.py: o + gate_up with XB against x~ row-major), then the batch-64
# llama3-8b q4_0 decode step with XB on / off (switch_ab.py, gemm_ops.XB_ROUTE).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
git log --oneline -1 > $OUT/tree.txt 2>/dev/null; git status --short >> $OUT/tree.txt 2>/dev/null
timeout 300 python3 -m pytest -q tests/kernels/test_linear_norm.py tests/kernels/test_gemm_rd.py -m gpu \
  -k "x_stages or o_gate_up or down_qkv or wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout 60 python3 benchmarks/results/h100-2026-12-07-s51/scripts/_s51_xb_pair.py > $OUT/xb_pair.txt 2>&1
echo "pair rc=$? at ${SECONDS}s"; tail -8 $OUT/xb_pair.txt
timeout $((570 - SECONDS)) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --batch 64 --context 512 \
  --timed 25 --profiled 0 --ab-disable "set:gemm_ops.XB_ROUTE=False" > $OUT/switch_b64.txt 2>&1
echo "switch rc=$? at ${SECONDS}s"; tail -14 $OUT/switch_b64.txt
