#!/usr/bin/env bash
# s22 call 9: the register-direct decode's fused merge with the count as a ticket (tree) against HEAD
# (.ab): GPU tests of the tree, then the decode rows graphed, alternated, two rounds
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache; ab_trees
machine_info > $OUT/machine.txt 2>&1
PYTHONPATH=$(path_of tree) timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py -k "rd or decode or fused" > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt; tail -2 $OUT/tests.txt
grep -E "Error|rel err" $OUT/tests.txt | head -5 | cut -c1-250
for r in 1 2; do for v in $( [ $r = 1 ] && echo $VARIANTS || echo $VARIANTS | tr ' ' '\n' | tac | tr '\n' ' ' ); do
  PYTHONPATH=$(path_of $v) timeout 150 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd --rows 0,5,6,7,8,10,11,17,18,20,29,30,33 --json $OUT/ab-$v-$r.json > $OUT/ab-$v-$r.txt 2>&1
done; done
python3 tools/gpu/ab_table.py $OUT > $OUT/ab-table.txt 2>&1; cat $OUT/ab-table.txt
cd $OUT && tar czf ab.tgz ab-*-*.json ab-*-?.txt && rm ab-*-*.json ab-*-?.txt && cd - > /dev/null
