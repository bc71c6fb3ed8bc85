# s26 call 7: s24's stream-K w64sk (3-4x slower, undiagnosed): time it at grid 224 / 132 against w64, then
# ncu of both (28672 x 4096, M 32: gemm_launches.py) to see where the grid-224 launch's time goes
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
timeout 120 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64 --tiles w64sk --splits 224,132 --shapes 28672x4096 \
  --no-cublas > $OUT/sk-bench.txt 2>&1; echo "bench rc=$?"; grep -E "route|Error" $OUT/sk-bench.txt
OUT=$OUT timeout 300 bash tools/gpu/ncu_gemm.sh "28672 w64 1" "28672 w64sk 224" > $OUT/sk-ncu.txt 2>&1; echo "ncu rc=$?"
cat $OUT/sk-ncu.txt
