#!/usr/bin/env bash
# CUPTI timelines (tools/ncu/target.py --timeline) of graphed decode steps on the lent GPU, for the
# shapes and batches where the step time is unexplained: llama3-8b (generated Q4_0 weights) at
# batch 1, 32 and 64, smollm2-135m at batch 1. Prints each step's kernel table; ~3-4 min.
#   bash tools/gpu/decode_timelines.sh        # repo root; carry .whl
set -u; cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-timelines}; mkdir -p "$OUT"; L=$OUT/timelines.log
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
machine_info >> $L 2>&1 || exit 2
run() { echo "== $*" >> $L; timeout ${T:-90} python3 tools/ncu/target.py --timed 10 --profiled 0 "$@" 2>&1 | grep -v Warn >> $L; }
for b in ${BATCHES:-1 64 32}; do run --shape llama3-8b --weights q4_0 --batch $b --context 512 --timeline 2; done
run --shape smollm2-135m --weights q4_0 --batch 1 --context 512 --timeline 2
