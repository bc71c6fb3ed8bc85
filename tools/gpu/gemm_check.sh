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
SITE=/tmp/onecat-gemm-site
mkdir -p "$OUT" "$SITE"
export ONECAT_CACHE_DIR=/tmp/onecat-gemm-cache PYTHONUNBUFFERED=1
export PYTHONPATH="$(ls -d "$PWD"/packages/*/src | tr '\n' ':')$SITE${PYTHONPATH:+:$PYTHONPATH}"
if ! $PY -c "import gguf" 2>/dev/null; then  # not needed by these kernels; kept like the other checks
  w=$(ls .whl/gguf-*.whl 2>/dev/null | head -1)
  [ -n "$w" ] && $PY -m zipfile -e "$w" "$SITE" && echo "gguf from $w"
fi
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv || true
$PY -c "import torch; assert torch.cuda.is_available(); print('torch', torch.__version__, torch.cuda.get_device_name(0))" || exit 2
$PY -c "from onecat.kernels import build; [print(t.describe()) for t in build.toolchains()]"
echo "== compile gemm_packed.cu for this GPU"
$PY -m onecat.kernels sources --source gemm_packed.cu 2>&1 | tee "$OUT/resources.txt"
echo "== GPU tests (packed GEMM)"
$PY -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_packed.py -rs 2>&1 | tee "$OUT/gpu-tests.txt"
rc=${PIPESTATUS[0]}
echo "== packed GEMM vs cuBLAS (table last)"
$PY tools/gpu/gemm_bench.py --json "$OUT/gemm.json" ${GEMM_ARGS:-} 2>&1 | tee "$OUT/gemm.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv || true
echo "gpu tests exit code: $rc"
exit "$rc"
