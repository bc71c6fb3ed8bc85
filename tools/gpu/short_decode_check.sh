#!/usr/bin/env bash
# Short-context decode on the lent H200 in one call (~150 s): GPU tests of the split argmax and of
# decode attention, the serve graph / async tests on a synthetic
# SmolLM2 GGUF, tools/gpu/short_decode_ab.py's table (attention shapes and argmax, graphed), then a
# timeline of a graphed smollm2 decode step. Everything under $OUT (short.log, short-ab.json).
#
#   OUT=... bash tools/gpu/short_decode_check.sh     # repo root; carry .whl
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-short}; mkdir -p "$OUT"; L=$OUT/short.log; T0=$(date +%s)
el() { echo "== $1 ($(( $(date +%s)-T0 )) s)" >> $L; }
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
export TOKENIZERS_PARALLELISM=false
machine_info >> $L 2>&1
el "tests: argmax (generic provider test), attention"
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py -k "argmax" >> $L 2>&1; echo "rc=$?" >> $L
timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_attention_gpu.py >> $L 2>&1; echo "rc=$?" >> $L
el "tests: serve graphs, async scheduling (synthetic SmolLM2 GGUF)"
timeout 30 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --synth-only --configs smollm2-135m:Q4_1 > /dev/null 2>&1
ONECAT_TEST_GGUF=/tmp/onecat-peers-gguf/smollm2-135m.Q4_1.gguf timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/serve/test_cuda_graph.py tests/serve/test_async_scheduling.py >> $L 2>&1; echo "rc=$?" >> $L
el "timeline smollm2"
timeout 40 python3 tools/ncu/target.py --model /tmp/onecat-peers-gguf/smollm2-135m.Q4_1.gguf --batch 1 --context 512 --timed 20 --timeline 3 --profiled 0 2>&1 | grep -v Warn >> $L
el "A/B table"
timeout 150 python3 tools/gpu/short_decode_ab.py --json $OUT/short-ab.json >> $L 2>&1
el done
