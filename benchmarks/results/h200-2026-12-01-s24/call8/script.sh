# s24 call 8: llama3-8b q4_0 decode steps at batch 64 / 48 (context 512), the tree (35ecae2: x loaded 64
# bytes a row) vs f8e7844 (.ab), one process each, alternated
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
ab_trees
L=$OUT/log.txt
{ machine_info; echo "variants: $VARIANTS"; } > $L 2>&1
for bv in "64 tree" "64 f8e7844" "64 tree" "64 f8e7844" "48 tree" "48 f8e7844"; do set -- $bv; b=$1; v=$2
  echo "== batch $b $v" >> $L
  PYTHONPATH=$(path_of $v) timeout 40 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 \
    --timed 30 --profiled 0 2>&1 | grep -iE "step|tok/s" | tail -3 >> $L
done
cat $L
