#!/usr/bin/env bash
# Packed GEMM check in one device call (the lent H200: torch + NVRTC 13 preinstalled, no network):
# compile gemm_packed.cu for this GPU (resource use), the packed-GEMM GPU tests (every kind, odd
# shapes, every tile x split, poisoned outputs, split-K determinism, graph capture), then the table:
# q4_0 / q4_k / q6_k / awq x llama3-8b matrices x M = 17..512 against cuBLAS fp16 (tools/gpu/gemm_bench.py).
# Table last; about 90 s on an H200.
#   bash tools/gpu/gemm_check.sh     # from anywhere; results under $OUT (or /tmp/onecat-gemm-check)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-gemm-check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
. tools/gpu/common.sh
gpu_env /tmp/onecat-gemm-site /tmp/onecat-gemm-cache
echo "== machine"
machine_info $PY || exit 2
echo "== compile gemm_packed.cu for this GPU"
$PY -m onecat.kernels sources --source gemm_packed.cu 2>&1 | tee "$OUT/resources.txt"
echo "== GPU tests (packed GEMM)"
$PY -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_packed.py tests/kernels/test_gemm_rd.py tests/kernels/test_gemm_wg.py -rs 2>&1 | tee "$OUT/gpu-tests.txt"
rc=${PIPESTATUS[0]}
echo "== packed GEMM vs cuBLAS (table last)"
$PY tools/gpu/gemm_bench.py --json "$OUT/gemm.json" ${GEMM_ARGS:-} 2>&1 | tee "$OUT/gemm.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv || true
echo "gpu tests exit code: $rc"
exit "$rc"
