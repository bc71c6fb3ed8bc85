#!/usr/bin/env bash
# s49, prepared for the next session (carry .whl; ~5 min cold): the wgmma diagnostics and WLE tests, then what W's
# loads / x's staging cost w64b2 (_s49_diag.py), then w64b2e against w64b2s / w64b2 (_s49_wle.py; gate_up GLU).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 200 python3 -m pytest -q tests/kernels/test_gemm_rd.py -m gpu -k "wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout 120 python3 benchmarks/results/h100-2026-12-07-s49/scripts/_s49_diag.py > $OUT/diag.txt 2>&1; echo "diag rc=$? at ${SECONDS}s"
timeout 120 python3 benchmarks/results/h100-2026-12-07-s49/scripts/_s49_wle.py > $OUT/wle.txt 2>&1; echo "wle rc=$? at ${SECONDS}s"
tail -3 $OUT/diag.txt; tail -6 $OUT/wle.txt
