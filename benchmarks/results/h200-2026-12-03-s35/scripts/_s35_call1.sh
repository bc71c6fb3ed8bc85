#!/usr/bin/env bash
# s35 call 1: GPU tests of s34's untested changes (f86f1a3's norm_join.cuh; 38310c2's relaxed test_gemv_mixed at the
# seed that failed, 1171421130) and of glu-shapes.diff's q4_k gate_up shapes (test_gemv_o_gate_up with each shape
# swapped in); then Q4_K_M batch-1 steps in one process: A the route, B-E the gate_up in the four shapes
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call1; mkdir -p $OUT
S=benchmarks/results/h200-2026-12-03-s35/scripts
machine_info > $OUT/machine.txt 2>&1
G=/tmp/onecat-peers-gguf
(timeout 120 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G --synth-only \
  --configs llama3-8b:Q4_K_M > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s" >> $OUT/synth.txt) &
ONECAT_TEST_SEED=1171421130 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_mixed.py \
  tests/kernels/test_linear_norm.py > $OUT/tests-seed.txt 2>&1; echo "tests(seed) rc=$? at ${SECONDS}s"
tail -2 $OUT/tests-seed.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "norm or rs" \
  > $OUT/tests-rd.txt 2>&1; echo "tests(rd) rc=$? at ${SECONDS}s"; tail -1 $OUT/tests-rd.txt
for g in r2u1k1n r2u1k1nw8 r4u2k1n r4u1k1np; do
  S35_GLU=$g PYTHONPATH=$S:$PYTHONPATH timeout 60 python3 -m pytest -q -p no:cacheprovider -p _s35_glu \
    tests/kernels/test_linear_norm.py -k gemv_o_gate > $OUT/tests-glu-$g.txt 2>&1
  echo "glu $g rc=$? at ${SECONDS}s $(tail -1 $OUT/tests-glu-$g.txt)"
done
wait; tail -1 $OUT/synth.txt
timeout $(( 570 - SECONDS )) python3 $S/_s35_ab.py --model $G/llama3-8b.Q4_K_M.gguf \
  --batch 1 --context 512 --timed 30 --profiled 0 --rounds 4 --steps-json $OUT/ab-glu-q4_k_m-b1.json \
  --ab-disable "glu:r2u1k1n;glu:r2u1k1nw8;glu:r4u2k1n;glu:r4u1k1np" > $OUT/ab-glu-q4_k_m-b1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/ab-glu-q4_k_m-b1.txt
grep -E "^round|^decode|rc=|Error" $OUT/ab-glu-q4_k_m-b1.txt | tail -10 | cut -c1-300
cd $FINAL && tar czf call1.tgz call1 && rm -rf call1
