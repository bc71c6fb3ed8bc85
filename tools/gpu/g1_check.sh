#!/usr/bin/env bash
# The batch-1 small-model route (G1) on the lent H200 in one call (~300 s): GPU tests of the kernels
# this route added lately (embedding, split argmax, decode attention), the serve graph / async tests
# on a synthetic SmolLM2 GGUF, a CUPTI timeline of a graphed smollm2 decode step, then the peers
# report for smollm2-135m Q4_1 alone (llama.cpp's prebuilt binaries and onecat; G1 stated).
# Everything under $OUT: g1.log, check.log, peers/.
#
#   OUT=... bash tools/gpu/g1_check.sh    # repo root; carry .whl, .peers/llama-bin.tar.xz.0* and
#                                         # .peers/llama.cpp/ONECAT_SOURCE
# G1_LIMIT_S (default 560): seconds for the whole script; the peers run gets what the rest leaves.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-g1}; mkdir -p "$OUT"; L=$OUT/g1.log; T0=$(date +%s); LIMIT=${G1_LIMIT_S:-560}
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
el() { echo "== $1 ($(( $(date +%s)-T0 )) s, $(left) s left)" >> $L; }
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
export TOKENIZERS_PARALLELISM=false
machine_info >> $L 2>&1
el "tests: embedding, argmax (generic provider test), attention"
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py -k "embedding or argmax" >> $L 2>&1; echo "rc=$?" >> $L
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_attention_gpu.py >> $L 2>&1; echo "rc=$?" >> $L
el "tests: serve graphs, async scheduling, quantized weights (synthetic SmolLM2 GGUF)"
timeout 30 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --synth-only --configs smollm2-135m:Q4_1 > /dev/null 2>&1
ONECAT_TEST_GGUF=/tmp/onecat-peers-gguf/smollm2-135m.Q4_1.gguf timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/serve/test_cuda_graph.py tests/serve/test_async_scheduling.py >> $L 2>&1; echo "rc=$?" >> $L
el "timeline smollm2"
timeout 40 python3 tools/ncu/target.py --model /tmp/onecat-peers-gguf/smollm2-135m.Q4_1.gguf --batch 1 --context 512 --timed 20 --timeline 3 --profiled 0 2>&1 | grep -v Warn >> $L
el "peers smollm2"
PEERS_LIMIT_S=$(( $(left) - 10 )) OUT=$OUT bash tools/gpu/peers_check.sh --configs smollm2-135m:Q4_1 --engines llama.cpp onecat --batched > /dev/null 2>&1
sed -n '/^| shape/,/^$/p' $OUT/peers/peers.md >> $L 2>/dev/null
el done
