# s25 call 9: the warp-specialized wgmma tile (wd3 / wd2) against w64, correctness and time
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 300 python3 tools/gpu/_wgx_bench.py 64,48,33 >> $L 2>&1
echo "bench rc=$?" >> $L
cat $L
