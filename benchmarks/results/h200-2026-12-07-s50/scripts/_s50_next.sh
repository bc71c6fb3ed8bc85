#!/usr/bin/env bash
# Prepared for the next session (carry .whl; ~5 min cold): the wgmma GPU tests on the tree without the ring tiles
# (ff507c1: w64 / w64b2 against the float reference and bit-equal, GLU, traced, the diagnostics), then
# wgmma_peak.py --set alu (the tensor rate beside the tile's amount of dequantization, RS N 64 and SS N 256).
# After it, on an H200: OUT=$OUT bash tools/gpu/goals_check.sh in its own call (carry .whl and the peers' files).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 240 python3 -m pytest -q tests/kernels/test_gemm_rd.py -m gpu -k "wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout 200 python3 tools/gpu/wgmma_peak.py --set alu --json $OUT/wgmma_alu.json 2>&1 \
  | grep -v "warning\|unsigned a\|^ *\^\|^$" > $OUT/wgmma_alu.txt
echo "alu rc=$? at ${SECONDS}s"; cat $OUT/wgmma_alu.txt
