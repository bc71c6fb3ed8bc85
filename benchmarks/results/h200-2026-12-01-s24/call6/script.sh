# s24 call 6: w64 with 4 x stages (w64s4), n64 / n64d2 at 168 registers (launch bounds) vs w64
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 200 python3 tools/gpu/_pp_bench.py 64,48 >> $L 2>&1
echo "bench rc=$?" >> $L
cat $L
