#!/usr/bin/env bash
# s38 call 1: the committed fp32 chunk_x_sum and tests (2b6cb68: s37's GPU record was lost with its workspace) at one
# seed; then llama3-8b Q4_0 batch-1 steps in one process: A the route, B-F an L2 prefetch of each layer's gate_up
# rows in front of attention / qkv (_s38_l2pf.py), G a control (captured again, no prefetch; the context grows
# through a round, so later variants see more keys)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call1; mkdir -p $OUT
S=benchmarks/results/h100-2026-12-05-s38/scripts
machine_info > $OUT/machine.txt 2>&1
G=/tmp/onecat-peers-gguf
(timeout 150 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_0 > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s" >> $OUT/synth.txt) &
[ -n "${S38_SKIP_TESTS:-}" ] || ONECAT_TEST_SEED=25 timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_mixed.py \
  "tests/kernels/test_gpu_kernels.py::test_kernel_vs_reference[linear_rms_norm_linear]" > $OUT/tests-seed25.txt 2>&1
echo "tests(seed 25) rc=$? at ${SECONDS}s"; tail -2 $OUT/tests-seed25.txt
wait; tail -1 $OUT/synth.txt
timeout $(( 575 - SECONDS )) python3 $S/_s38_l2pf.py --model $G/llama3-8b.Q4_0.gguf --max-model-len 1088 \
  --batch 1 --context 512 --timed 25 --profiled 0 --rounds 3 --steps-json $OUT/ab-l2pf-q4_0-b1.json \
  --ab-disable "pf:attn:16:0;pf:attn:32:0;pf:attn:24:1;pf:qkv:24:0;pf:attn:24:2;pf:none:0:0" > $OUT/ab-l2pf-q4_0-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-l2pf-q4_0-b1.txt
grep -E "^round|^decode|rc=|Error|error" $OUT/ab-l2pf-q4_0-b1.txt | tail -12 | cut -c1-400
cd $FINAL && tar czf call1.tgz call1 && rm -rf call1
