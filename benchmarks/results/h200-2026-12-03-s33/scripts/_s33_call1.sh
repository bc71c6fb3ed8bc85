#!/usr/bin/env bash
# s33 call 1: s32's GPU tests whose bodies moved in review (test_linear_norm: GEMM and GEMV joins, the q4_k GEMV
# consumer with E4M3 / E5M2 caches), then G2's batch-1 rows on synthesized llama3-8b Q4_0 / Q4_K_M GGUFs (onecat
# only: G2 is a share of the copy bandwidth measured in the same run, not a ratio)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call1; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
timeout 330 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_linear_norm.py \
  tests/kernels/test_gemv_packed.py -k "norm or rs or rope or glu" > $OUT/t-linear-norm.txt 2>&1
echo "rc=$?" >> $OUT/t-linear-norm.txt; tail -4 $OUT/t-linear-norm.txt; echo "at ${SECONDS}s"
L=$(( 590 - SECONDS ))
PEERS_SKIP_BUILD=1 PEERS_LIMIT_S=$L OUT=$OUT bash tools/gpu/peers_check.sh --configs llama3-8b:Q4_0 llama3-8b:Q4_K_M \
  --engines onecat --batched > /dev/null 2>&1
echo "peers rc=$?"; sed -n '/^| shape/,/^$/p' $OUT/peers/peers.md; tail -3 $OUT/check.log
cd $FINAL && tar czf call1.tgz call1 && rm -rf call1
