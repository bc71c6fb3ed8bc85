# s23 call 3: gemm_wg.cu (wgmma) prototype vs the register-direct route, llama3-8b q4_0 matrices, M 32 / 64
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/log.txt 2>&1
timeout 400 python3 tools/gpu/_wg_bench.py 32,64 >> $OUT/log.txt 2>&1; echo "rc=$?" >> $OUT/log.txt
tail -40 $OUT/log.txt
