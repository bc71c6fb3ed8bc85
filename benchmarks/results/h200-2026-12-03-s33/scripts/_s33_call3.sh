#!/usr/bin/env bash
# s33 call 3: the two-format qkv GEMV (weights.RowParts; gemv_packed.cu _mix entries): its GPU tests and the
# kernels it touches (gemv_rows' part offsets), engine_check with Q4_K_M's mix (llama3-8b shape, 3 layers: a mixed
# qkv first, behind a q6_k down, behind a q4_k down; batch 1), then Q4_K_M batch-1 decode steps, 59f9eaa
# (.ab) against the tree alternated, and the tree's kernel table
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache; ab_trees
FINAL=$OUT; OUT=$FINAL/call3; mkdir -p $OUT
G=/tmp/onecat-peers-gguf
[ -f $G/llama3-8b.Q4_K_M.gguf ] || timeout 120 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --gguf-dir $G \
  --synth-only --configs llama3-8b:Q4_K_M > /dev/null 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_mixed.py tests/kernels/test_linear_norm.py \
  tests/kernels/test_gemv_packed.py -k "mixed or gemv_ or rope" > $OUT/tests.txt 2>&1
echo "rc=$?" >> $OUT/tests.txt; tail -4 $OUT/tests.txt; echo "at ${SECONDS}s"
for p in 1; do
  timeout 120 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_k_m --layers 3 --prompts $p \
    --max-tokens 16 > $OUT/engine-check-p$p.txt 2>&1; echo "rc=$?" >> $OUT/engine-check-p$p.txt
  grep -E "clear positions|eager|mismatch|rc=" $OUT/engine-check-p$p.txt | cut -c1-160; echo "at ${SECONDS}s"
done
for r in 1 2 3; do for v in $VARIANTS; do
  [ $SECONDS -gt 420 ] && break 2
  PYTHONPATH=$(path_of $v) timeout 60 python3 tools/ncu/target.py --model $G/llama3-8b.Q4_K_M.gguf --batch 1 \
    --context 512 --timed 30 --profiled 0 > $OUT/steps-$v-r$r.txt 2>&1
  echo "r$r $v: $(grep median $OUT/steps-$v-r$r.txt | cut -c1-120)"
done; done
[ $SECONDS -lt 440 ] && ONECAT_PDL=0 timeout 60 python3 tools/ncu/target.py --model $G/llama3-8b.Q4_K_M.gguf --batch 1 \
  --context 512 --timed 5 --profiled 0 --timeline 3 2>&1 | grep -v -i warn > $OUT/timeline-tree-pdl-off.txt
head -22 $OUT/timeline-tree-pdl-off.txt | cut -c1-130
cd $FINAL && tar czf call3.tgz call3 && rm -rf call3
