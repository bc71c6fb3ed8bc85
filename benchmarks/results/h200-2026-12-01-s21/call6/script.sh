# s21 call 6: the bare streaming read in the decode launch's shape (the #5 rows' ceiling)
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/log.txt 2>&1
timeout 200 python3 tools/gpu/read_stream_row.py --json $OUT/read-stream.json > $OUT/read-stream.txt 2>&1
timeout 100 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd --rows 0,5,6,10,11 > $OUT/rows.txt 2>&1
cat $OUT/log.txt $OUT/read-stream.txt; tail -7 $OUT/rows.txt
