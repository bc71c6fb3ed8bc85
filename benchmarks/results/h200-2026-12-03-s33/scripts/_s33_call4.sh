#!/usr/bin/env bash
# s33 call 4: Q4_K_M batch-1 decode steps with cuda_gemv_mix (the two-format qkv in one launch) against the same
# graphs captured with it disabled (the unfused route of those 16 layers: rms_norm, a GEMV per part, rotary_cache),
# alternated in one process (tools/ncu/target.py --ab-disable)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call4; mkdir -p $OUT
G=/tmp/onecat-peers-gguf
timeout 60 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_K_M > /dev/null 2>&1; echo "synth at ${SECONDS}s"
timeout 190 python3 tools/ncu/target.py --model $G/llama3-8b.Q4_K_M.gguf --batch 1 --context 512 --timed 30 \
  --profiled 0 --rounds 4 --ab-disable "rms_norm_qkv_rotary_cache:cuda_gemv_mix,linear_rms_norm_qkv_rotary_cache:cuda_gemv_mix" \
  > $OUT/ab-q4_k_m-b1.txt 2>&1; echo "rc=$?" >> $OUT/ab-q4_k_m-b1.txt
grep -v -i warn $OUT/ab-q4_k_m-b1.txt | tail -14 | cut -c1-160
cd $FINAL && tar czf call4.tgz call4 && rm -rf call4
