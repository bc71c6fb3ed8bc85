#!/usr/bin/env bash
# s30 call 1: split-K merged through thread-block clusters: GEMM GPU tests (incl. cluster == counter bits),
# per-matrix timing cluster vs counter, then llama3-8b q4_0 steps at batch 32 / 64 with ONECAT_GEMM_CLUSTER=0 / 1
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c1; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "cluster or tiles or glu or rope or wgmma" \
  > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
tail -3 $OUT/tests.txt; echo "tests done at ${SECONDS}s"
timeout 150 python3 tools/gpu/_s30_cluster_bench.py > $OUT/bench.txt 2>&1; echo "rc=$?" >> $OUT/bench.txt
cat $OUT/bench.txt; echo "bench done at ${SECONDS}s"
for r in 1 2; do for cl in 0 1; do for b in 32 64; do
  [ $SECONDS -gt 540 ] && break 3
  ONECAT_GEMM_CLUSTER=$cl timeout 60 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 \
    --timed 30 --profiled 0 --steps-json $OUT/b$b-cl$cl-r$r.json > $OUT/b$b-cl$cl-r$r.txt 2>&1
  echo "r$r cluster=$cl b$b: $(grep median $OUT/b$b-cl$cl-r$r.txt | cut -c1-120)"
done; done; done
tar czf $FINAL/call1.tgz -C /tmp c1
