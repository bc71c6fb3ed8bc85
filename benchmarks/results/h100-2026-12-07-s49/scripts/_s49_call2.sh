#!/usr/bin/env bash
# s49 call 2: where the M 64 wgmma tiles' warps stall, per SASS instruction (ncu source page): gate_up on w64b2 x1
# (G3's largest GEMM) and down on w64 x4.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
OUT=$OUT bash tools/gpu/ncu_source.sh 28672 4096 w64b2 1 64 > $OUT/src-gate_up.txt 2>&1
OUT=$OUT bash tools/gpu/ncu_source.sh 4096 14336 w64 4 64 > $OUT/src-down.txt 2>&1
gzip -f $OUT/*.csv
head -40 $OUT/src-gate_up.txt | cut -c1-200; head -25 $OUT/src-down.txt | cut -c1-200
