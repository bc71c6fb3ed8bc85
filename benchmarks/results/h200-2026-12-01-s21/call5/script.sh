# s21 call 5: cluster form with the spread scheduling policy: failing tests' lines, rows
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
python3 - >> $L 2>&1 <<'PY'
from onecat.kernels import attention_ops as A
k = A._DECODE_RD_CL[(128, "f16")]
print("max active clusters (spread):", {n: A._clusters_fit(k, n, 128, 0) for n in (2, 4, 8, 12, 16)})
PY
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py -k "rd or decode or cluster" --tb=line 2>&1 | grep -v "^\.\|passed" | tail -12 >> $L
for r in 1 2; do
  timeout 150 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd,rd_w4 --rows 20,24,25,26,27,28 \
    --json $OUT/ab-$r.json > $OUT/ab-$r.txt 2>&1 || echo "ab round $r rc=$?" >> $L
done
cat $L; tail -8 $OUT/ab-1.txt; tail -7 $OUT/ab-2.txt
