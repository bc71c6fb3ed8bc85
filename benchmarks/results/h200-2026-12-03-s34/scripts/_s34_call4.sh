#!/usr/bin/env bash
# s34 call 4: the joined GEMVs with register caps (s34-caps.diff's instances, _s34_caps.py): GPU tests with every cap
# swapped in, then Q4_K_M batch-1 steps in one process: A the route, B cap:mix, C cap:q6_norm, D cap:q4_norm
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call4; mkdir -p $OUT
S=benchmarks/results/h200-2026-12-03-s34/scripts
G=/tmp/onecat-peers-gguf
(timeout 90 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_K_M > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s" >> $OUT/synth.txt) &
S34_CAPS=cap:mix,cap:q6_norm,cap:q4_norm PYTHONPATH=$S:${PYTHONPATH:-} timeout 150 python3 -m pytest -q \
  -p no:cacheprovider -p _s34_caps tests/kernels/test_linear_norm.py tests/kernels/test_gemv_mixed.py \
  -k "gemv_down_qkv or gemv_o_gate or joined" > $OUT/tests-capped.txt 2>&1; echo "tests rc=$? at ${SECONDS}s"
grep -m1 "s34 caps" $OUT/tests-capped.txt | cut -c1-300; tail -2 $OUT/tests-capped.txt
wait
PYTHONPATH=$S:${PYTHONPATH:-} timeout 360 python3 $S/_s34_caps.py --model $G/llama3-8b.Q4_K_M.gguf \
  --batch 1 --context 512 --timed 30 --profiled 0 --rounds 4 --steps-json $OUT/ab-caps-q4_k_m-b1.json \
  --ab-disable "cap:mix;cap:q6_norm;cap:q4_norm" > $OUT/ab-caps-q4_k_m-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-caps-q4_k_m-b1.txt
grep -E "^round|^decode|rc=|Error" $OUT/ab-caps-q4_k_m-b1.txt | tail -8 | cut -c1-300
cd $FINAL && tar czf call4.tgz call4 && rm -rf call4
