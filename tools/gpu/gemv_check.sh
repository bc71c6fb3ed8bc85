#!/usr/bin/env bash
# Packed GEMV check in one device call (the lent H200: torch + NVRTC 13 preinstalled, no network):
# compile gemv_packed.cu for this GPU (resource use), the linear GPU tests (every provider vs the
# torch reference, poisoned outputs), then the K2 table: formats x llama3-8b shapes x M, % of the
# copy bandwidth measured in the same run, V100 projection. Table last.
#   bash tools/gpu/gemv_check.sh     # from anywhere; results under $OUT (or /tmp/onecat-gemv-check)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-gemv-check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
. tools/gpu/common.sh
gpu_env /tmp/onecat-gemv-site /tmp/onecat-gemv-cache
echo "== machine"
machine_info $PY || exit 2
echo "== compile gemv_packed.cu for this GPU"
$PY -m onecat.kernels sources --source gemv_packed.cu 2>&1 | tee "$OUT/resources.txt"
echo "== GPU tests (linear)"
$PY -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py -k "linear or graph or available" -rs 2>&1 | tee "$OUT/gpu-tests.txt"
rc=${PIPESTATUS[0]}
echo "== packed GEMV benchmark (table last)"
$PY -m onecat.kernels.bench --gemv --iters "${ITERS:-50}" ${GEMV_ARGS:-} --json "$OUT/gemv.json" 2>&1 | tee "$OUT/gemv.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv || true
echo "gpu tests exit code: $rc"
exit "$rc"
