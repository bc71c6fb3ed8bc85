#!/usr/bin/env bash
# s34 call 1: the q6_k down joined in front (gemv_r_q6_k_r4u1k2_norm) on the GPU against the unfused route; then
# Q4_K_M batch-1 steps in one process: A the route, B without the q6_k front (front:q6_k), C without cuda_gemv_mix
# (s33's pending A/B), alternated
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call1; mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/machine.txt 2>&1
G=/tmp/onecat-peers-gguf
(timeout 90 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_K_M > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s" >> $OUT/synth.txt) &
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_linear_norm.py tests/kernels/test_gemv_mixed.py \
  -k "gemv_down_qkv or joined or norm_in_front" > $OUT/tests.txt 2>&1; echo "tests rc=$? at ${SECONDS}s"
tail -3 $OUT/tests.txt
wait
cat $OUT/synth.txt | tail -2
timeout 330 python3 benchmarks/results/h200-2026-12-03-s34/scripts/_s34_ab.py --model $G/llama3-8b.Q4_K_M.gguf \
  --batch 1 --context 512 --timed 30 --profiled 0 --rounds 4 --steps-json $OUT/ab-q4_k_m-b1.json \
  --ab-disable "front:q6_k;rms_norm_qkv_rotary_cache:cuda_gemv_mix,linear_rms_norm_qkv_rotary_cache:cuda_gemv_mix" \
  > $OUT/ab-q4_k_m-b1.txt 2>&1; echo "rc=$? at ${SECONDS}s" >> $OUT/ab-q4_k_m-b1.txt
grep -v -i warn $OUT/ab-q4_k_m-b1.txt | tail -20 | cut -c1-220
cd $FINAL && tar czf call1.tgz call1 && rm -rf call1
