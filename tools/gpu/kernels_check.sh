#!/usr/bin/env bash
# GPU check of onecat-kernels in one call (the lent H200: torch+CUDA preinstalled, no network):
# GPU tests, the admission table for this GPU, resource use of every kernel, then the benchmark.
#
#   bash tools/gpu/kernels_check.sh            # from the repo root; results under $OUT (or /tmp/...)
#
# Wheels come from the carried .whl/ folder (repo root, git-ignored). Fill it on a CPU machine:
#   pip download -d .whl --no-deps nvidia-cuda-nvrtc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79 \
#       pytest==9.2.0 pluggy iniconfig packaging pygments
# They are unpacked into $OUT/site and put on PYTHONPATH (no pip, the machine's env is untouched);
# the pytest family only if pytest is not importable there already.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-kernels-check}
PY=${PYTHON:-python3}
mkdir -p "$OUT/site"
export ONECAT_CACHE_DIR="$OUT/cache"
export PYTHONPATH="$PWD/packages/onecat-kernels/src:$OUT/site${PYTHONPATH:+:$PYTHONPATH}"

unpack() {  # unpack .whl/<prefix>*.whl into $OUT/site
  local w
  for w in .whl/$1*.whl; do
    [ -e "$w" ] || { echo "missing .whl/$1*.whl"; return 1; }
    $PY -m zipfile -e "$w" "$OUT/site" && echo "unpacked $w"
  done
}
if [ -d .whl ]; then
  unpack nvidia_cuda_nvrtc_cu12-12.9.86 && unpack nvidia_cuda_runtime_cu12-12.9
  if ! $PY -c "import pytest" 2>/dev/null; then
    for p in pytest- pluggy- iniconfig- packaging- pygments-; do unpack "$p"; done
  fi
else
  echo "no .whl/ folder: relying on NVRTC and pytest already installed"
fi

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total --format=csv || true
if ! $PY -c "import torch; assert torch.cuda.is_available(); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"; then
  echo "no usable CUDA device through torch: nothing to check"; exit 2
fi
$PY -c "from onecat.kernels import build; [print(t.describe(), t.includes) for t in build.toolchains()]"

echo "== kernels: compile for this GPU, resource use"
$PY -m onecat.kernels sources 2>&1 | tee "$OUT/sources.txt"  # this GPU's arch

echo "== admission on this GPU"
$PY -m onecat.kernels explain --device cuda --all-cases --check-available 2>&1 | tee "$OUT/explain.txt"

echo "== GPU tests"
$PY -m pytest -q -p no:cacheprovider tests/kernels -m gpu -rs --junitxml "$OUT/gpu-tests.xml" 2>&1 | tee "$OUT/gpu-tests.txt"
rc=${PIPESTATUS[0]}

echo "== benchmark (table last)"
$PY -m onecat.kernels.bench --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt"
echo "gpu tests exit code: $rc"
exit "$rc"
