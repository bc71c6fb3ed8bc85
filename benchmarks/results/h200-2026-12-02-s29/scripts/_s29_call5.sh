#!/usr/bin/env bash
# s29 call 5: register-direct GEMM diagnostics DG 0-12 on gate_up / down (tools/gpu/_s29_rd_diag.py)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
mkdir -p /tmp/c5
timeout 300 python3 tools/gpu/_s29_rd_diag.py gate_up,down 2>&1 | tee /tmp/c5/diag.txt
tar czf $OUT/call5.tgz -C /tmp c5
