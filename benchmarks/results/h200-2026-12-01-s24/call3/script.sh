# s24 call 4: x64 (x loaded 64 bytes a row, 16-byte stores into padded slices), p64x vs w64
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 240 python3 tools/gpu/_pp_bench.py 64,48,40 >> $L 2>&1
echo "bench rc=$?" >> $L
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "wgmma" 2>&1 | tail -2 >> $L
cat $L
