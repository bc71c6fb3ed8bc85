# s26 call 1: decode attention partition plans (#5) and the warp-specialized bulk-copy tile (#7 G3)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 240 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd,rd_w4p2,rd_w4p4,rd_w4p6,rd_w4p8,rd_w1 \
  --rows 5,10,6,0,1 --json $OUT/attn-parts.json > $OUT/attn-parts.txt 2>&1; echo "attn rc=$?"
patch -p1 -s < benchmarks/results/h200-2026-12-01-s25/warp-specialized-wt-untested.diff || exit 3
for T in wt1 wt2; do
  timeout 100 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles w64,$T --splits 1 --shapes 28672x4096 \
    --glu --no-cublas > $OUT/$T-gateup.txt 2>&1; echo "$T gate_up rc=$?"
  timeout 80 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles w64,$T --splits 4 --shapes 4096x14336 \
    --no-cublas > $OUT/$T-down.txt 2>&1; echo "$T down rc=$?"
done
for f in $OUT/*.txt; do echo "== $f"; tail -n 12 $f; done
