#!/usr/bin/env bash
# s38 call 3 (run inline on the warm machine of call 2): the same A/B with small prefetches, to part the cost of the
# extra launch in the chain (0 MB: the kernel with no ranges) from the cost of the bytes
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache; mkdir -p $OUT/call3
timeout 300 python3 benchmarks/results/h100-2026-12-05-s38/scripts/_s38_l2pf.py --model /tmp/onecat-peers-gguf/llama3-8b.Q4_0.gguf \
  --max-model-len 1088 --batch 1 --context 512 --timed 25 --profiled 0 --rounds 3 --steps-json $OUT/call3/ab-l2pf-small.json \
  --ab-disable "pf:attn:0:0;pf:attn:1:0;pf:attn:4:0;pf:attn:4:2;pf:none:0:0" > $OUT/call3/ab-l2pf-small.txt 2>&1
echo rc=$?; grep -E "^round|^decode" $OUT/call3/ab-l2pf-small.txt | cut -c1-600
