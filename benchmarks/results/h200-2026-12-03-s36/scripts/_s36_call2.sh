#!/usr/bin/env bash
# s36 call 2: the int8-activation q4_0 GEMM experiment (_s36_rds8.cu / .py) on llama3-8b's matrices at M 32 / 64
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/${CALL:-call2}; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
S=benchmarks/results/h200-2026-12-03-s36/scripts/_s36_rds8.py
timeout 300 python3 $S --m 32 --variants r32w,r32w1,r32 ${EXTRA:-} > $OUT/rds8-m32.txt 2>&1; echo "m32 rc=$?"
cat $OUT/rds8-m32.txt | tail -40
timeout 200 python3 $S --m 64 --matrices gate_up,down --variants r32w,r32w1 --rounds 1 > $OUT/rds8-m64.txt 2>&1; echo "m64 rc=$?"
tail -12 $OUT/rds8-m64.txt
cd $FINAL && tar czf ${CALL:-call2}.tgz ${CALL:-call2} && rm -rf ${CALL:-call2}
