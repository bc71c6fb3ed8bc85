#!/usr/bin/env bash
# s50 call 2 (carry .whl): _s50_occupancy.py (the bare consumer loop at 1 / 2 / 3 blocks an SM)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 400 python3 benchmarks/results/h200-2026-12-07-s50/scripts/_s50_occupancy.py > $OUT/occupancy.txt 2>&1
echo "occupancy rc=$? at ${SECONDS}s"; tail -20 $OUT/occupancy.txt
