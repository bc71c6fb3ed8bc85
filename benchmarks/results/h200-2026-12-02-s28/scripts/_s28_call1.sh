#!/usr/bin/env bash
# s28 call 1: the W access-pattern read ceiling (tools/gpu/_s28_pattern_read.py)
set -uo pipefail
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/r/machine.txt 2>&1
python3 tools/gpu/_s28_pattern_read.py 2>&1 | tee $OUT/r/pattern.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
