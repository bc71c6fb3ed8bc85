#!/usr/bin/env bash
# s39 call 1: gemm_wg's two-warpgroup forms w64x2 / w32x2 / w32x2p4 (one 64-feature tile per consumer warpgroup, 320 threads) against
# w64: the wgmma tile tests for both, then llama3-8b q4_0 gate_up (GLU) / down at M 64 / 48 / 32 (r32w beside:
# the route at 32), qkv / o at M 64.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call1; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"
timeout 130 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48,32 --tiles w64,w64x2,w32x2,w32x2p4,r32w --splits 1,2 --shapes 28672x4096 \
  --glu --no-cublas --budget 300 > $OUT/gateup-glu.txt 2>&1; echo "gate_up rc=$? at ${SECONDS}s"
timeout 130 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48,32 --tiles w64,w64x2,w32x2,w32x2p4,r32w --splits 4,8 --shapes 4096x14336 \
  --no-cublas --budget 300 > $OUT/down.txt 2>&1; echo "down rc=$? at ${SECONDS}s"
timeout $(( 570 - SECONDS )) python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,32 --tiles w64,w64x2,w32x2,w32x2p4,r32 --splits 2,4 \
  --shapes 6144x4096,4096x4096 --no-cublas --budget 300 > $OUT/qkv-o.txt 2>&1; echo "qkv/o rc=$? at ${SECONDS}s"
tail -n 3 $OUT/tests.txt
for f in $OUT/gateup-glu.txt $OUT/down.txt $OUT/qkv-o.txt; do echo "== $f"; tail -n 14 $f | cut -c1-200; done
