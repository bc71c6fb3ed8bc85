# s23 call 6: gemm_wg w32 on row-major vs tiled q4_0 planes (DRAM access pattern), the route beside
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
timeout 400 python3 tools/gpu/_wg_tiled.py > $OUT/log.txt 2>&1; echo "rc=$?" >> $OUT/log.txt
tail -30 $OUT/log.txt
