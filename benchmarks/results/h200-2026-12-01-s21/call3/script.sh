# s21 call 3: the cluster-merged decode (form "cl", partitions cut to the clusters that fit): tests, A/B
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py -k "cluster" 2>&1 | tail -15 >> $L
for r in 1 2; do
  timeout 200 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd,rd_cl --rows 0,1,3,5,6,8,10,11,20 \
    --json $OUT/ab-$r.json > $OUT/ab-$r.txt 2>&1 || echo "round $r rc=$?" >> $L
done
cat $L; tail -12 $OUT/ab-1.txt; tail -11 $OUT/ab-2.txt
