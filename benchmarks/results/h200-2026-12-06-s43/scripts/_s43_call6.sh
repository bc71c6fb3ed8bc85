#!/usr/bin/env bash
# s43 call 6: the split-K merge of gemm_epilogue.cuh (the tile's last block merging into its staged tile with MU slots'
# loads of up to 4 splits in flight, then storing as an unsplit block) against main (a7d8ebd, .ab/ by
# `tools/gpu/variants_ab.sh --prepare HEAD`): the GEMM GPU tests on the tree, then llama3-8b q4_0 decode steps at
# batch 64 and 32 (graphed, CUDA events, 30 steps) alternated tree / main twice, then gemm_bench at M 64 / 32.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
ab_trees
FINAL=$OUT; OUT=$FINAL/call6; mkdir -p $OUT; L=$OUT/ab.log
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py tests/kernels/test_linear_norm.py \
  tests/kernels/test_gemm_packed.py > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
for round in 1 2; do
  for v in $VARIANTS; do
    for b in 64 32; do
      left=$(( 300 - SECONDS )); [ $left -lt 40 ] && continue
      r=$(PYTHONPATH=$(path_of "$v") timeout $(( left < 120 ? left : 120 )) python3 tools/ncu/target.py --shape llama3-8b \
        --weights q4_0 --batch $b --context 512 --max-model-len 656 --timed 30 --profiled 0 2>&1 | grep "^decode step")
      echo "round $round $v b$b: $r" | tee -a $L
    done
  done
done
for v in $VARIANTS; do
  left=$(( 380 - SECONDS )); [ $left -lt 40 ] && { echo "gemm_bench $v: not run (time)"; continue; }
  PYTHONPATH=$(path_of "$v") timeout $left python3 tools/gpu/gemm_bench.py --no-variants --formats q4_0 --m 32,64 \
    --no-cublas --iters 10 > $OUT/gemm-$v.txt 2>&1
  echo "gemm_bench $v rc=$?"; grep -E "^q4_0 +[0-9]+x[0-9]+" $OUT/gemm-$v.txt
done
