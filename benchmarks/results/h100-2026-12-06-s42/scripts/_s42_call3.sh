#!/usr/bin/env bash
# s42 call 3: #7's goals G1 / G2 / G3 in one same-run peers report on main after s39-s40's w64b2 routes (llama.cpp's
# binaries built on the CPU machine by tools/peers/build_here.sh and carried): smollm2-135m Q4_1, llama3-8b Q4_0 /
# Q4_K_M at batch 1, Q4_0 at 32 / 64 concurrent sequences (llama-batched-bench)
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > /dev/null 2>&1; nvidia-smi --query-gpu=name --format=csv,noheader
set -u
FINAL=$OUT; OUT=$FINAL/call3; mkdir -p $OUT
PEERS_LIMIT_S=${PEERS_LIMIT_S:-570} OUT=$OUT bash tools/gpu/peers_check.sh --configs smollm2-135m:Q4_1 llama3-8b:Q4_0 llama3-8b:Q4_K_M \
  --engines llama.cpp onecat --batched llama3-8b:Q4_0=32,64 > /dev/null 2>&1
echo "peers rc=$?"; sed -n '/^| shape/,/^$/p' $OUT/peers/peers.md; sed -n '/^Ratios/,/^How measured/p' $OUT/peers/peers.md
tail -4 $OUT/check.log
rm -f $OUT/llama-bin.tar.xz.*
cd $FINAL && tar czf call3.tgz call3 && rm -rf call3
