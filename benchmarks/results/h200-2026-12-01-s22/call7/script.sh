#!/usr/bin/env bash
# s22 call 7: the register-direct decode's two-launch fallback (no counter array: partials + attn_reduce)
# with E4M3 in hardware: the new test on HEAD's packages (.ab) and on the tree (the fix), then the route's
# rows graphed, HEAD against the tree (the partials' factor is one more kernel argument of the body)
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache; ab_trees
machine_info > $OUT/machine.txt 2>&1
for v in $VARIANTS; do
  echo "== $v" >> $OUT/tests.txt
  PYTHONPATH=$(path_of $v) timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py -k "two_launch" >> $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
done
grep -E "^==|passed|failed|rel err|rc=" $OUT/tests.txt | cut -c1-220
PYTHONPATH=$(path_of tree) timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py -k "rd" > $OUT/tests-rd.txt 2>&1; echo "rc=$?" >> $OUT/tests-rd.txt; tail -2 $OUT/tests-rd.txt
for r in 1 2; do for v in $( [ $r = 1 ] && echo $VARIANTS || echo $VARIANTS | tr ' ' '\n' | tac | tr '\n' ' ' ); do
  PYTHONPATH=$(path_of $v) timeout 100 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd --rows 0,5,6,10 --json $OUT/ab-$v-$r.json > $OUT/ab-$v-$r.txt 2>&1
done; done
python3 tools/gpu/ab_table.py $OUT > $OUT/ab-table.txt 2>&1; tail -8 $OUT/ab-table.txt
cd $OUT && tar czf ab.tgz ab-*-*.json ab-*-?.txt && rm ab-*-*.json ab-*-?.txt && cd - > /dev/null
