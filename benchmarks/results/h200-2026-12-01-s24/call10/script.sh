# s24 call 10: stream-K diagnostics on gate_up M 64: grids with whole tiles per block (224, 112) vs cut tiles (132, 66)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 150 python3 tools/gpu/_sk_bench.py 64 >> $L 2>&1
echo "bench rc=$?" >> $L
cat $L
