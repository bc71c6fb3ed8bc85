# s26 call 3: the bulk-copy M = 1 GEMV (csrc/gemv_bulk.cu) against the route's GEMVs in dependent chains
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
timeout 400 python3 tools/gpu/_gemv_bulk.py --variants auto,r96s16,r96s32,r64s16,r200s32 \
  --chains square,updown,6144x4096,4096x14336,28672x4096 > $OUT/gemv-bulk.txt 2>&1; echo "rc=$?"
tail -n 30 $OUT/gemv-bulk.txt
