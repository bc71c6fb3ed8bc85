# tools/gpu/common.sh: sourced by the GPU scripts, from the repo root (the lent machine has torch
# and NVRTC 13, no network, no pip: what else a script needs travels as wheels in the ignored .whl/).
#
# gpu_env SITE CACHE: the workspace packages and SITE on PYTHONPATH (after them, before anything
#   set already), onecat's kernel cache in CACHE; the carried gguf wheel unpacked into SITE, and
#   pytest's (pytest, pluggy, iniconfig, packaging, pygments) where the machine has no pytest.
gpu_env() {
  local site=$1 w
  mkdir -p "$site"
  export ONECAT_CACHE_DIR=$2 PYTHONUNBUFFERED=1
  export PYTHONPATH="$(ls -d "$PWD"/packages/*/src | paste -sd:):$site${PYTHONPATH:+:$PYTHONPATH}"
  for w in .whl/gguf-*.whl; do [ -f "$w" ] && python3 -m zipfile -e "$w" "$site"; done
  python3 -c "import pytest" 2>/dev/null || for w in .whl/pytest-*.whl .whl/pluggy-*.whl .whl/iniconfig-*.whl \
    .whl/packaging-*.whl .whl/pygments-*.whl; do [ -f "$w" ] && python3 -m zipfile -e "$w" "$site"; done
  return 0
}

# machine_info [PY]: the GPU and its clocks as found, torch, NVRTC toolchains; fails (2) without a
# CUDA torch.
machine_info() {
  local py=${1:-python3}
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv || true
  $py -c "import torch; assert torch.cuda.is_available(); print('torch', torch.__version__, torch.cuda.get_device_name(0))" || return 2
  $py -c "from onecat.kernels import build; [print(t.describe()) for t in build.toolchains()]"
}
