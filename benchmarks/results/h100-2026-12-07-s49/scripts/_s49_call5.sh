#!/usr/bin/env bash
# s49 call 5: where w64b2s's warps stall (ncu source page, gate_up M 64), then test_gemm_rd's GPU cases.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
OUT=$OUT bash tools/gpu/ncu_source.sh 28672 4096 w64b2s 1 64 > $OUT/src-gate_up-w64b2s.txt 2>&1
gzip -f $OUT/*.csv; head -24 $OUT/src-gate_up-w64b2s.txt | cut -c1-180
timeout 200 python3 -m pytest -q tests/kernels/test_gemm_rd.py -m gpu > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
