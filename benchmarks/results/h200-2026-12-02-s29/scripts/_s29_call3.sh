#!/usr/bin/env bash
# s29 call 3: tensor-core issue rates (tools/gpu/_s29_mma_rate.py); register-direct GEMM diagnostics with DG 6
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
mkdir -p /tmp/c3
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/c3/machine.txt 2>&1
timeout 200 python3 tools/gpu/_s29_mma_rate.py 2>&1 | tee /tmp/c3/mma-rate.txt
timeout 300 python3 tools/gpu/_s29_rd_diag.py 2>&1 | tee /tmp/c3/diag.txt
tar czf $OUT/call3.tgz -C /tmp c3
