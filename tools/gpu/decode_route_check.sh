#!/usr/bin/env bash
# The decode route end to end on the lent H200, in one call (~520 s): GPU tests of the route's newer
# kernels (a fused provider that fails is switched off through $ONECAT_DISABLED_PROVIDERS for the
# rest of the call, and the log says so; attention has no alternative
# and is only flagged), the peers report (tools/gpu/peers_check.sh: llama.cpp, HF transformers
# and onecat on the same GGUF files; G1-G3 stated), the packed-GEMM table (with GEMM_TABLE=1),
# torch.profiler timelines of graphed smollm2 (its GGUF) and llama3-8b (generated Q4_0) decode
# steps and, time left, an ncu kernel table of one. The A/B experiments are tools/gpu/decode_ab.sh. Everything lands under $OUT:
# final.log, check.log, peers/ (at most 8 files, as the device tool brings back).
#
#   bash tools/gpu/decode_route_check.sh     # repo root; carry .whl and, to skip the ~260 s llama.cpp
#                                            # build, .peers/llama-bin.tar.xz.* + .peers/llama.cpp/ONECAT_SOURCE
# ROUTE_LIMIT_S (default 520): seconds for the whole script; the peers run gets what the rest leaves.
# PEERS_ARGS: options for `onecat-bench peers` (e.g. "--onecat-scheduling sync").
set -u; export PATH=$PATH:/usr/local/cuda/bin
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-decode-route}; mkdir -p "$OUT"
LIMIT=${ROUTE_LIMIT_S:-520}; T0=$(date +%s); L=$OUT/final.log
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
el() { echo "== $1 ($(( $(date +%s)-T0 )) s, $(left) s left)" >> $L; }
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
export TOKENIZERS_PARALLELISM=false
DIS=""
el "tests: normed projections, rms_norm"
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_gpu_kernels.py -k "rms_norm" >> $L 2>&1; rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && DIS="$DIS,cuda_gemv_norm"; echo "rc=$rc" >> $L
el "tests: attention"
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_attention_gpu.py >> $L 2>&1; rc=$?
echo "rc=$rc$([ $rc -ne 0 ] && echo ' ATTENTION FAILED: the figures below are not valid')" >> $L
export ONECAT_DISABLED_PROVIDERS=${DIS#,}; echo "disabled: '$ONECAT_DISABLED_PROVIDERS'" >> $L
el "tests: serve graphs, async scheduling (on a synthetic SmolLM2 GGUF: the embedded model's wheel does not travel)"
timeout 30 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --synth-only --configs smollm2-135m:Q4_1 > /dev/null 2>&1
ONECAT_TEST_GGUF=/tmp/onecat-peers-gguf/smollm2-135m.Q4_1.gguf timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/serve/test_cuda_graph.py tests/serve/test_async_scheduling.py >> $L 2>&1
el peers
PEERS_LIMIT_S=$(( $(left) - 100 )) OUT=$OUT bash tools/gpu/peers_check.sh ${PEERS_ARGS:-} > /dev/null 2>&1
[ -n "${GEMM_TABLE:-}" ] && { el "gemm table"; timeout 45 python3 tools/gpu/gemm_bench.py --no-variants >> $L 2>&1; }
el "timeline smollm2"
timeout 35 python3 tools/ncu/target.py --model /tmp/onecat-peers-gguf/smollm2-135m.Q4_1.gguf --batch 1 --context 512 --timed 20 --timeline 3 --profiled 0 2>&1 | grep -v Warn >> $L
el "timeline llama3-8b (generated Q4_0)"
timeout 45 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 1 --context 512 --timed 20 --timeline 2 --profiled 0 2>&1 | grep -v Warn >> $L
el "ncu smollm2"
T=$(( $(left) - 5 )); [ $T -gt 40 ] && timeout $T python3 tools/ncu/ncu_profile.py --out /tmp/ncu/smollm2 -- --model /tmp/onecat-peers-gguf/smollm2-135m.Q4_1.gguf --batch 1 --context 512 --profiled 1 --timed 20 > /tmp/ncu.log 2>&1
tail -3 /tmp/ncu.log >> $L; cat /tmp/ncu/smollm2.md >> $L 2>/dev/null
el done
