#!/usr/bin/env bash
# s46 call 3 (carry .whl, ~5 min): the XL1 diagnostic (what x's L2 traffic costs the wgmma tiles at M 64): its GPU
# test, then tools/gpu/gemm_xl1.py (route vs _xl1 entry alternated, llama3-8b's four matrices on their M 64 route
# tiles); then G2's normed GEMVs split: chains of gate_up / qkv plain, with the norm in front (rn:), and gate_up with
# the norm and the GLU (glu:), to see whether the prologue or the GLU epilogue holds the ~3.4 us s30 measured.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "xl1" > $OUT/xl1-test.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/xl1-test.txt; tail -2 $OUT/xl1-test.txt
timeout $(( 200 - SECONDS )) python3 tools/gpu/gemm_xl1.py --m 64,48 --iters 30 --rounds 2 > $OUT/xl1.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/xl1.txt; tail -14 $OUT/xl1.txt
timeout $(( 330 - SECONDS )) python3 tools/gpu/gemv_chain.py --formats q4_0 --pdl 1 \
  --chains 28672x4096,rn:28672x4096,glu:28672x4096,6144x4096,rn:6144x4096 > $OUT/gemv-norm-split.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/gemv-norm-split.txt; tail -12 $OUT/gemv-norm-split.txt | cut -c1-200
