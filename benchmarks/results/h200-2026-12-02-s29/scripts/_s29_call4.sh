#!/usr/bin/env bash
# s29 call 4: mma.sync FP16-accumulate rate (tools/gpu/_s29_mma_rate.py); register-direct GEMM diagnostics
# DG 0-8 on gate_up / down / qkv (tools/gpu/_s29_rd_diag.py)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
mkdir -p /tmp/c4
timeout 120 python3 tools/gpu/_s29_mma_rate.py 2>&1 | grep -v "^wg_n\|^mma_sync {" | tee /tmp/c4/mma-rate.txt
timeout 300 python3 tools/gpu/_s29_rd_diag.py gate_up,down,qkv 2>&1 | tee /tmp/c4/diag.txt
tar czf $OUT/call4.tgz -C /tmp c4
