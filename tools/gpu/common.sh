# tools/gpu/common.sh: sourced by the GPU scripts, from the repo root (the lent machine has torch
# and NVRTC 13, no network, no pip: what else a script needs travels as wheels in the ignored .whl/,
# filled by tools/gpu/prepare_carry.sh).
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

# ab_trees: for the whole-tree A/Bs (variants_ab.sh, gemm_ab.sh), after gpu_env /tmp/site: VARIANTS =
#   every .ab/<rev>/ (prepared by `variants_ab.sh --prepare REV`) and "tree" (the working tree);
#   path_of V prints V's PYTHONPATH (its packages, then /tmp/site).
ab_trees() {
  AB_TREE=$PYTHONPATH
  VARIANTS="$(ls .ab 2>/dev/null | grep -v '\.py$' | tr '\n' ' ')tree"
}
path_of() { [ "$1" = tree ] && echo "$AB_TREE" || echo "$(ls -d "$PWD/.ab/$1"/packages/*/src | paste -sd:):/tmp/site"; }

# machine_info [PY]: the GPU and its clocks as found, torch, NVRTC toolchains; fails (2) without a
# CUDA torch.
machine_info() {
  local py=${1:-python3}
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv || true
  $py -c "import torch; assert torch.cuda.is_available(); print('torch', torch.__version__, torch.cuda.get_device_name(0))" || return 2
  $py -c "from onecat.kernels import build; [print(t.describe()) for t in build.toolchains()]"
}

# short_route_tests LOG PATTERN: the batch-1 route's GPU tests, appended to LOG with an rc= line
#   each: the generic provider tests of the ops PATTERN selects (pytest -k), decode attention, then
#   the serve graph / async tests on a synthetic SmolLM2 GGUF (the embedded model's wheel does not
#   travel), which it leaves at $SMOLLM2_GGUF for the timeline and peers runs after it.
SMOLLM2_GGUF=/tmp/onecat-peers-gguf/smollm2-135m.Q4_1.gguf
short_route_tests() {
  local log=$1 pat=$2
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py -k "$pat" >> "$log" 2>&1
  echo "rc=$?" >> "$log"
  timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_attention_gpu.py >> "$log" 2>&1
  echo "rc=$?" >> "$log"
  timeout 30 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --synth-only --configs smollm2-135m:Q4_1 \
    > /dev/null 2>&1
  ONECAT_TEST_GGUF=$SMOLLM2_GGUF timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/serve/test_cuda_graph.py tests/serve/test_async_scheduling.py >> "$log" 2>&1
  echo "rc=$?" >> "$log"
}

# smollm2_timeline LOG: CUPTI timeline of a graphed SmolLM2 decode step (batch 1 x 512), appended to LOG
smollm2_timeline() {
  timeout 40 python3 tools/ncu/target.py --model "$SMOLLM2_GGUF" --batch 1 --context 512 --timed 20 --timeline 3 \
    --profiled 0 2>&1 | grep -v Warn >> "$1"
}
