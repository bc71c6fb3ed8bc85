#!/usr/bin/env bash
# Prepared for the next session (carry .whl; ~7 min cold): the wgmma GPU tests on the tree without the ring tiles
# (ff507c1: w64 / w64b2 against the float reference and bit-equal, GLU, traced, the diagnostics), then
# wgmma_peak.py --set alu (the tensor rate beside the tile's amount of dequantization, RS N 64 and SS N 256), then
# _s49_diag.py, which now times the _qd / _nwxbq diagnostics too (q x d in one HFMA2 a pair: what candidate 1 of the
# README's G3 section would save on the route and on the bare loop; test_wgmma_diagnostics_run checks its math), then
# _s50_xb.py (x's stages by bulk copies, WG_XB, against the route; test_wgmma_bulk_x_stages checks its bits).
# After it, on an H200: OUT=$OUT bash tools/gpu/goals_check.sh in its own call (carry .whl and the peers' files), and
# G3 with 8-bit caches on both sides (onecat E4M3, llama.cpp q8_0) in another:
#   PEERS_LIMIT_S=570 OUT=$OUT bash tools/gpu/peers_check.sh --configs llama3-8b:Q4_0 --engines llama.cpp onecat \
#     --batched llama3-8b:Q4_0=32,64 --kv 8bit
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 240 python3 -m pytest -q tests/kernels/test_gemm_rd.py -m gpu -k "wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout 200 python3 tools/gpu/wgmma_peak.py --set alu --json $OUT/wgmma_alu.json 2>&1 \
  | grep -v "warning\|unsigned a\|^ *\^\|^$" > $OUT/wgmma_alu.txt
echo "alu rc=$? at ${SECONDS}s"; cat $OUT/wgmma_alu.txt
timeout 120 python3 benchmarks/results/h100-2026-12-07-s49/scripts/_s49_diag.py > $OUT/diag.txt 2>&1
echo "diag rc=$? at ${SECONDS}s"; cat $OUT/diag.txt
timeout 90 python3 benchmarks/results/h200-2026-12-07-s50/scripts/_s50_xb.py > $OUT/xb.txt 2>&1
echo "xb rc=$? at ${SECONDS}s"; cat $OUT/xb.txt
