#!/usr/bin/env bash
# s29 call 7: the warp-specialized wgmma q4_0 GEMM prototype (tools/gpu/_s29_wss.py) against the route's r32w tile
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
mkdir -p $OUT/c7
timeout 220 python3 tools/gpu/_s29_wss.py 2>&1 | tee $OUT/c7/wss.txt
echo "rc=${PIPESTATUS[0]}" | tee -a $OUT/c7/wss.txt
