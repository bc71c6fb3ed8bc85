#!/usr/bin/env bash
# s42 call 2: the persistent q4_0 GEMV chain (gemv_pchain.cu: 1 x 1024 or 2 x 512 threads an SM, every warp's
# register-prefetch stream kept across units and grid barriers) against the graphed PDL chain of the route's GEMVs
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call2; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt
timeout 400 python3 benchmarks/results/h100-2026-12-06-s42/scripts/_s42_pchain.py ${PCHAIN_ARGS:-} 2>&1 | grep -v -i warn | tee $OUT/pchain.txt
echo "rc=${PIPESTATUS[0]} at ${SECONDS}s"
