# s23 call 1: L2 prefetch of the steps after the preloaded ones, right after the PDL wait (RD_PF 1 / 2 / 4) vs HEAD
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
ab_trees
L=$OUT/log.txt
{ machine_info; echo "variants: $VARIANTS"; } > $L 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py tests/kernels/test_attention_fp8.py -k "rd or decode" 2>&1 | tail -3 >> $L
mkdir -p /tmp/ab
for r in 1 2; do for v in $VARIANTS; do
  PYTHONPATH=$(path_of $v) timeout 150 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd --rows 0,1,5,6,10,11,16,28,32,33 \
    --json /tmp/ab/$v-$r.json > /tmp/ab/$v-$r.txt 2>&1 || echo "$v $r rc=$?" >> $L
  echo "done $v $r $(date +%T)" >> $L
done; done
python3 tools/gpu/ab_table.py /tmp/ab >> $L 2>&1
tar czf $OUT/ab.tgz -C /tmp ab
cat $L
