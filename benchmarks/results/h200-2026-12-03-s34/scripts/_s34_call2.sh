#!/usr/bin/env bash
# s34 call 2: the mixed qkv with either part's blocks first and the q4_k rs_glu nw8 instance on the GPU; engine_check
# of the Q4_K_M mix (2 layers: the q6_k down joined in front of the mixed qkv); Q4_K_M batch-1 steps in one process:
# A the route (v's blocks first), B [q | k]'s blocks first (mix:a_first), C the q4_k gate_up behind in 8-warp blocks
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call2; mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/machine.txt 2>&1
G=/tmp/onecat-peers-gguf
(timeout 90 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_K_M > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s" >> $OUT/synth.txt) &
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_mixed.py tests/kernels/test_linear_norm.py \
  -k "gemv or joined or norm_in_front" > $OUT/tests.txt 2>&1; echo "tests rc=$? at ${SECONDS}s"
tail -3 $OUT/tests.txt
wait
timeout 330 python3 benchmarks/results/h200-2026-12-03-s34/scripts/_s34_ab.py --model $G/llama3-8b.Q4_K_M.gguf \
  --batch 1 --context 512 --timed 30 --profiled 0 --rounds 4 --steps-json $OUT/ab-q4_k_m-b1.json \
  --ab-disable "mix:a_first;glu:nw8" > $OUT/ab-q4_k_m-b1.txt 2>&1; echo "rc=$? at ${SECONDS}s" >> $OUT/ab-q4_k_m-b1.txt
grep -E "^round|^decode|rc=|Error|error" $OUT/ab-q4_k_m-b1.txt | tail -8 | cut -c1-260
timeout $((570 - SECONDS)) python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_k_m --layers 2 \
  --prompts 1 > $OUT/engine-check-q4_k_m.txt 2>&1; echo "engine_check rc=$? at ${SECONDS}s" >> $OUT/engine-check-q4_k_m.txt
tail -4 $OUT/engine-check-q4_k_m.txt | cut -c1-200
cd $FINAL && tar czf call2.tgz call2 && rm -rf call2
