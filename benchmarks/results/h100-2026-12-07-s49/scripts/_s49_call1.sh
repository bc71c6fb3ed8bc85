#!/usr/bin/env bash
# s49 call 1: wgmma's tensor-pipe rate by N and A source (tools/gpu/wgmma_peak.py), for G3's GEMM design.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
python3 tools/gpu/wgmma_peak.py --json $OUT/wgmma_peak.json > $OUT/wgmma_peak.txt 2>&1; echo "rc=$?"
cat $OUT/wgmma_peak.txt | grep -v "warning #\|Remark\|^$" | tail -45
