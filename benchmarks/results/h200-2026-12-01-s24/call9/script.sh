# s24 call 9: stream-K wgmma tile (w64sk) vs w64 / the route; the wgmma GPU tests on the refactored kernel
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 150 python3 tools/gpu/_sk_bench.py 64,48 >> $L 2>&1
echo "bench rc=$?" >> $L
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "wgmma or register_direct_route" 2>&1 | tail -2 >> $L
cat $L
