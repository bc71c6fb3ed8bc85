#!/usr/bin/env bash
# s29 call 8: which A-descriptor reading makes the warp-specialized prototype correct (tools/gpu/_s29_wss2.py)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
mkdir -p $OUT/c8
# (_s29_wss2.py = _s29_wss.py patched by _s29_wss2.diff: patch -o _s29_wss2.py _s29_wss.py _s29_wss2.diff)
timeout 150 python3 tools/gpu/_s29_wss2.py 2>&1 | tee $OUT/c8/wss2.txt
