#!/usr/bin/env bash
# s30 call 2: cluster fit (max active clusters) and cluster vs counter merge per split, llama3-8b q4_0 at M 32
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c2; mkdir -p $OUT
timeout 280 python3 tools/gpu/_s30_cluster_fit.py > $OUT/fit.txt 2>&1; echo "rc=$?" >> $OUT/fit.txt
cat $OUT/fit.txt
tar czf $FINAL/call2.tgz -C /tmp c2
