# s25 call 1: the wgmma tile's step, diagnostic variants (tools/gpu/_wgx_bench.py)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 300 python3 tools/gpu/_wgs_bench.py 64,48 >> $L 2>&1
echo "bench rc=$?" >> $L
cat $L
