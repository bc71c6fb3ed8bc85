# s23 call 2: Nsight Compute on the register-direct GEMM r32w (gate_up 28672x4096, M 32): sections, stall reasons, SASS hot spots
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
bash tools/gpu/ncu_gemm.sh "28672 r32w 1" "4096 r32 4" > $OUT/ncu-gemm.txt 2>&1
bash tools/gpu/ncu_source.sh 28672 4096 r32w 1 > $OUT/ncu-source-top.txt 2>&1
gzip -f $OUT/ncu-source-r32w.csv
cat $OUT/ncu-gemm.txt; head -60 $OUT/ncu-source-top.txt
