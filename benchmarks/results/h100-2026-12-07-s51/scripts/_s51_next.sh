#!/usr/bin/env bash
# Prepared in s51 for the next session, on branch xb-route (or main with `git apply benchmarks/results/h100-2026-12-07-s51/xb-route.diff`;
# carry .whl; ~7 min cold):
# the XB route's GPU tests (o's _norm epilogue writing gate_up's x stages, _glu_xb; test_o_gate_up_x_stages,
# test_o_gate_up_against_unfused at 48 / 64 now through it, test_wgmma_bulk_x_stages with GLU), the pair's timing
# (_s51_xb_pair.py: o + gate_up with XB against x~ row-major), then wgmma_peak.py --set alu with its fixed dq rows.
# Then in a second call (~6 min): the batch-64 decode step with XB on / off (switch_ab.py, gemm_ops.XB_ROUTE), and
# engine_steps.py at batch 64 (_s51_steps.sh's second half).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 330 python3 -m pytest -q tests/kernels/test_linear_norm.py tests/kernels/test_gemm_rd.py -m gpu \
  -k "x_stages or o_gate_up or down_qkv or wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout 90 python3 benchmarks/results/h100-2026-12-07-s51/scripts/_s51_xb_pair.py > $OUT/xb_pair.txt 2>&1
echo "pair rc=$? at ${SECONDS}s"; cat $OUT/xb_pair.txt
timeout 90 python3 tools/gpu/wgmma_peak.py --set alu --json $OUT/wgmma_alu.json 2>&1 \
  | grep -v "warning\|unsigned a\|^ *\^\|^$" > $OUT/wgmma_alu.txt
echo "alu rc=$? at ${SECONDS}s"; cat $OUT/wgmma_alu.txt
# second call:
#   . tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
#   python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --batch 64 --context 512 --timed 25 --profiled 0 \
#     --ab-disable "set:gemm_ops.XB_ROUTE=False" > $OUT/switch_b64.txt 2>&1; tail -30 $OUT/switch_b64.txt
