#!/usr/bin/env bash
# s49 call 6: w64b2e (w64b2s reading the next step's W at the end of a step) against w64b2s / w64b2 (gate_up GLU).
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 195 python3 benchmarks/results/h100-2026-12-07-s49/scripts/_s49_wle.py > $OUT/wle.txt 2>&1; echo "rc=$? at ${SECONDS}s"
tail -8 $OUT/wle.txt
