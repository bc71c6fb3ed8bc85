#!/usr/bin/env bash
# CUPTI timelines (tools/ncu/target.py --timeline) of graphed decode steps on the lent GPU, for the
# shapes and batches where the step time is unexplained: llama3-8b (generated Q4_0 weights) at
# batch 1, 32 and 64, smollm2-135m at batch 1. Prints each step's kernel table; ~3-4 min.
#   bash tools/gpu/decode_timelines.sh        # repo root; carry .whl
set -u; cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-timelines}; mkdir -p "$OUT"; L=$OUT/timelines.log
python3 -m zipfile -e .whl/gguf-0.19.0-py3-none-any.whl /tmp/site
export PYTHONPATH=$(ls -d $PWD/packages/*/src | paste -sd:):/tmp/site ONECAT_CACHE_DIR=/tmp/onecat-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader >> $L
run() { echo "== $*" >> $L; timeout ${T:-90} python3 tools/ncu/target.py --timed 10 --profiled 0 "$@" 2>&1 | grep -v Warn >> $L; }
for b in ${BATCHES:-1 64 32}; do run --shape llama3-8b --weights q4_0 --batch $b --context 512 --timeline 2; done
run --shape smollm2-135m --weights q4_0 --batch 1 --context 512 --timeline 2
