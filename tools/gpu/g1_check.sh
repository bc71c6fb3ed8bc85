#!/usr/bin/env bash
# The batch-1 small-model route (G1) on the lent H200 in one call (~300 s): GPU tests of the kernels
# this route added lately (embedding, split argmax, decode attention), the serve graph / async tests
# on a synthetic SmolLM2 GGUF, a CUPTI timeline of a graphed smollm2 decode step, then the peers
# report for smollm2-135m Q4_1 alone (llama.cpp's prebuilt binaries and onecat; G1 stated); with AB=1
# first tools/gpu/short_decode_ab.py's table (argmax and short-context attention, graphed).
# Everything under $OUT: g1.log, check.log, peers/ (and short-ab.json).
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
el "tests: embedding, argmax (generic provider test), attention, serve graphs / async (synthetic SmolLM2)"
short_route_tests $L "embedding or argmax"
el "timeline smollm2"
smollm2_timeline $L
if [ "${AB:-0}" = 1 ]; then el "A/B table"; timeout 150 python3 tools/gpu/short_decode_ab.py --json $OUT/short-ab.json >> $L 2>&1; fi
el "peers smollm2"
PEERS_LIMIT_S=$(( $(left) - 10 )) OUT=$OUT bash tools/gpu/peers_check.sh --configs smollm2-135m:Q4_1 --engines llama.cpp onecat --batched > /dev/null 2>&1
sed -n '/^| shape/,/^$/p' $OUT/peers/peers.md >> $L 2>/dev/null
el done
