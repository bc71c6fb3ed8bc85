#!/usr/bin/env bash
# A/B of the packed GEMM (M > 16) between whole trees in one device call: the working tree against the
# packages of earlier commits (prepared here with `bash tools/gpu/variants_ab.sh --prepare REV`; carry
# .whl and .ab). First the packed-GEMM GPU tests on the working tree, then per variant
# tools/gpu/gemm_bench.py (admitted tile x split only, weights from HBM), then the llama3-8b batched
# decode step (graphed, CUDA events and CUPTI busy per step) per variant, alternated ROUNDS times
# because one process's step moves by several % from the next one's (clocks not locked).
#   OUT=$OUT [ROUNDS=2] [BATCHES=32,64] [FORMATS=q4_0,q4_k] [MS=32,64] [WEIGHTS=q4_0] bash tools/gpu/gemm_ab.sh
set -u; cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-gemm-ab}; mkdir -p "$OUT"; L=$OUT/gemm-ab.log
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
ab_trees
{
  machine_info
  echo "variants: $VARIANTS"
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_packed.py tests/kernels/test_gemm_rd.py tests/kernels/test_gemm_wg.py 2>&1 | tail -3
  for v in $VARIANTS; do
    echo "== $v: gemm_bench"
    PYTHONPATH=$(path_of "$v") timeout 150 python3 tools/gpu/gemm_bench.py --no-variants --formats "${FORMATS:-q4_0,q4_k}" \
      --m "${MS:-32,64}" --iters 10 2>&1 | grep -E "^(q|a)[0-9a-z_]+ +[0-9]+x[0-9]+"
  done
  for round in $(seq "${ROUNDS:-2}"); do
    for v in $VARIANTS; do
      for b in $(echo "${BATCHES:-32,64}" | tr , " "); do
        echo "round $round $v llama3-8b ${WEIGHTS:-q4_0} b$b: $(PYTHONPATH=$(path_of "$v") timeout 90 python3 tools/ncu/target.py \
          --shape llama3-8b --weights "${WEIGHTS:-q4_0}" --batch "$b" --context 512 --timed 10 --timeline 2 --profiled 0 2>&1 \
          | grep -E "^decode step|^step 1:|gemm_p_" | tr '\n' ' ')"
      done
    done
  done
} > "$L" 2>&1
cat "$L"
