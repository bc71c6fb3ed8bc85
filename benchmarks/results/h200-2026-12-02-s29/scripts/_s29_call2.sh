#!/usr/bin/env bash
# s29 call 2: register-direct GEMM step diagnostics at M 32 (tools/gpu/_s29_rd_diag.py; wrong outputs except DG 0)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
mkdir -p /tmp/c2
timeout 500 python3 tools/gpu/_s29_rd_diag.py 2>&1 | tee /tmp/c2/diag.txt
tar czf $OUT/call2.tgz -C /tmp c2
