#!/usr/bin/env bash
# s34 call 3: G2's batch-1 rows on synthesized llama3-8b Q4_0 / Q4_K_M GGUFs with the q6_k downs joined (2e64446;
# onecat only: G2 is a share of the copy bandwidth measured in the same run), then the Q4_K_M kernel table (CUPTI,
# PDL off so kernel times add up, 3 steps)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call3; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
PEERS_SKIP_BUILD=1 PEERS_LIMIT_S=420 OUT=$OUT bash tools/gpu/peers_check.sh --configs llama3-8b:Q4_0 llama3-8b:Q4_K_M \
  --engines onecat --batched > /dev/null 2>&1
echo "peers rc=$? at ${SECONDS}s"; sed -n '/^| shape/,/^$/p' $OUT/peers/peers.md; tail -3 $OUT/check.log
L=$(( 580 - SECONDS ))
if [ $L -gt 60 ]; then
  ONECAT_PDL=0 timeout $L python3 tools/ncu/target.py --model /tmp/onecat-peers-gguf/llama3-8b.Q4_K_M.gguf --batch 1 \
    --context 512 --timed 10 --profiled 0 --timeline 3 2>&1 | grep -v -i warn > $OUT/timeline-b1-Q4_K_M-pdl-off.txt
  echo "timeline at ${SECONDS}s"; head -24 $OUT/timeline-b1-Q4_K_M-pdl-off.txt | cut -c1-130
fi
cd $FINAL && tar czf call3.tgz call3 && rm -rf call3
