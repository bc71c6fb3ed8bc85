#!/usr/bin/env bash
# s41 call 2: W prefetched into L2 2 / 4 steps ahead of the wgmma tiles' register ring (prefetch.global.L2; w64b2
# holds W one step ahead in registers, w64 three): gate_up GLU at 64 / 48 rows (two rounds, tile order reversed),
# the q4_0 LM head, down x4. The diff (../l2a.diff) is applied here, not committed.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call2; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
patch -p1 < benchmarks/results/h100-2026-12-06-s41/l2a.diff && echo "l2a.diff applied"
for r in 1 2; do
  [ $r = 1 ] && T=w64b2,w64b2p2,w64b2p4 || T=w64b2p4,w64b2p2,w64b2
  timeout 55 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles $T --splits 1 --shapes 28672x4096 --glu \
    --no-cublas --budget 30 > $OUT/glu-r$r.txt 2>&1; echo "glu r$r rc=$? at ${SECONDS}s"
  grep "route" $OUT/glu-r$r.txt | sed "s/(err [0-9.e-]*)//g"
done
timeout 55 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64 --tiles w64b2,w64b2p2,w64b2p4 --splits 1 \
  --shapes 128256x4096 --no-cublas --budget 30 > $OUT/lmhead.txt 2>&1; echo "lm head rc=$? at ${SECONDS}s"
timeout 55 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles w64,w64p4 --splits 4 \
  --shapes 4096x14336 --no-cublas --budget 30 > $OUT/down.txt 2>&1; echo "down rc=$? at ${SECONDS}s"
for f in lmhead down; do grep "route" $OUT/$f.txt | sed "s/(err [0-9.e-]*)//g"; done
patch -R -p1 < benchmarks/results/h100-2026-12-06-s41/l2a.diff
