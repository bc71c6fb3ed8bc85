# s25 call 11: wb2 (two register sets per dequantizing thread, setmaxnreg 208 / 96) against w64, correctness and time
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 300 python3 tools/gpu/_wgx_bench.py 64 >> $L 2>&1
echo "bench rc=$?" >> $L
cat $L
