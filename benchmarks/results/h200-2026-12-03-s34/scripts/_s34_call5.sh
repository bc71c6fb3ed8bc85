#!/usr/bin/env bash
# s34 call 5: the committed capped _mix..._rs_rope (3 blocks per SM) on the GPU (test_gemv_mixed), then G2's batch-1
# rows again (onecat only, Q4_K_M and Q4_0, copy bandwidth in the same run)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call5; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_mixed.py > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"; tail -2 $OUT/tests.txt
PEERS_SKIP_BUILD=1 PEERS_LIMIT_S=$(( 560 - SECONDS )) OUT=$OUT bash tools/gpu/peers_check.sh \
  --configs llama3-8b:Q4_K_M llama3-8b:Q4_0 --engines onecat --batched > /dev/null 2>&1
echo "peers rc=$? at ${SECONDS}s"; sed -n '/^| shape/,/^$/p' $OUT/peers/peers.md; tail -3 $OUT/check.log
cd $FINAL && tar czf call5.tgz call5 && rm -rf call5
