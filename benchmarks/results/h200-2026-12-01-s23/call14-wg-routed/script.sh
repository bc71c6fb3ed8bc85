# s23 call 14: the wgmma 64-row tile routed (33..64 rows of q4_0's wide matrices on sm_90): GPU tests, engine
# tokens vs the CPU reference at batch 48, llama3-8b q4_0 batch-64 / 48 steps vs 39867b5 (alternated)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
ab_trees
L=$OUT/log.txt
{ machine_info; echo "variants: $VARIANTS"; } > $L 2>&1
timeout 75 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "wgmma or register_direct_route" 2>&1 | tail -3 >> $L
echo "tests rc=$?" >> $L
timeout 70 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 48 --max-tokens 8 2>&1 | tail -4 >> $L
for b in 64 48; do for v in tree 39867b5; do
  echo "== batch $b $v" >> $L
  PYTHONPATH=$(path_of $v) timeout 40 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 \
    --timed 30 --profiled 0 2>&1 | grep -iE "step|tok/s" | tail -3 >> $L
done; done
cat $L
