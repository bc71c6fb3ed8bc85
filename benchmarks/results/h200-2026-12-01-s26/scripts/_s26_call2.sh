# s26 call 2: the warp-specialized tile reading tile_q4_0's layout (4 bulk copies a step): wtt1 / wtt2 vs w64
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
for T in wtt1 wtt2; do
  timeout 120 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles w64,$T --splits 1 --shapes 28672x4096 \
    --glu --no-cublas --tiled > $OUT/$T-gateup.txt 2>&1; echo "$T gate_up rc=$?"
  timeout 90 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles w64,$T --splits 4,2 --shapes 4096x14336 \
    --no-cublas --tiled > $OUT/$T-down.txt 2>&1; echo "$T down rc=$?"
done
for f in $OUT/*.txt; do echo "== $f"; grep -E "route|rel err|Error|error" $f | head -8; done
