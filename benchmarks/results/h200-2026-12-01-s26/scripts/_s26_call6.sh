# s26 call 6: decode attention at the G3 batches (32 / 64 x 512-1024 keys): forms and partition plans
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
timeout 300 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd,rd_w4,rd_w1,rd_deepp4,rd_deepp8,rd_deepp16,rd_w4p8,rd_w1p24 \
  --rows 17,21,18,19,23 --json $OUT/attn-g3.json > $OUT/attn-g3.txt 2>&1; echo "rc=$?"
tail -n 8 $OUT/attn-g3.txt
