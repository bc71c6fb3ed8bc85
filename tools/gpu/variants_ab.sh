#!/usr/bin/env bash
# A/B of whole trees in one device call: the working tree against the packages of earlier commits,
# alternated process by process, because one process's decode-step median on the lent H200 moves by
# up to +-15% from the next one's (clocks not locked; session 6: the same tree measured 725 and
# 840 us in two processes). Printed per variant: the graphed decode step (CUDA events) of each run
# and, less noisy, the kernels' busy time per step from a CUPTI timeline; then each variant's decode
# attention alone on a few shapes (tools/gpu/decode_attention_row.py, attention_check.sh's rows).
#
# Here, before the call (the variants travel as an ignored folder; ~1 MB each):
#   bash tools/gpu/variants_ab.sh --prepare REV [REV ...]   # -> .ab/<rev>/packages (git archive)
# Then on the device (repo root; carry .whl and .ab):
#   bash tools/gpu/variants_ab.sh [ROUNDS]                  # ROUNDS (default 3) alternations
#   ATTN=0 bash tools/gpu/variants_ab.sh [ROUNDS]           # without the attention shapes
#   LLAMA=0 ...                                             # without the llama3-8b step
# Variants: every .ab/<rev>/ and "tree" (the working tree). ~40 s per variant and round on smollm2,
# plus llama3-8b once per variant and the attention shapes: 3 rounds of 2 variants take ~4 min.
set -u; cd "$(dirname "$0")/../.."
if [ "${1:-}" = "--prepare" ]; then
  shift; grep -qx "/.ab/" .git/info/exclude 2>/dev/null || echo "/.ab/" >> .git/info/exclude
  for rev in "$@"; do
    short=$(git rev-parse --short "$rev") || exit 1
    rm -rf ".ab/$short"; mkdir -p ".ab/$short"
    git archive "$rev" packages | tar -x -C ".ab/$short" && echo "prepared .ab/$short ($rev)"
  done
  exit 0
fi
ROUNDS=${1:-3}
OUT=${OUT:-/tmp/onecat-variants-ab}; mkdir -p "$OUT"; L=$OUT/variants-ab.log
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
export TOKENIZERS_PARALLELISM=false
ab_trees
GGUF=/tmp/onecat-peers-gguf/smollm2-135m.Q4_1.gguf
{
  machine_info
  echo "variants: $VARIANTS; rounds: $ROUNDS"
  timeout 60 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --synth-only --configs smollm2-135m:Q4_1 > /dev/null 2>&1
  for round in $(seq "$ROUNDS"); do
    for v in $VARIANTS; do
      step=$(PYTHONPATH=$(path_of "$v") timeout 60 python3 tools/ncu/target.py --model $GGUF --batch 1 --context 512 \
        --timed 30 --timeline 2 --profiled 0 2>&1 | grep -E "^decode step|^step 1:")
      echo "round $round $v smollm2: $(echo "$step" | tr '\n' ' ')"
    done
  done
  for v in $( [ "${LLAMA:-1}" != 0 ] && echo $VARIANTS ); do
    echo "$v llama3-8b q4_0: $(PYTHONPATH=$(path_of "$v") timeout 60 python3 tools/ncu/target.py --shape llama3-8b \
      --weights q4_0 --batch 1 --context 512 --timed 20 --timeline 2 --profiled 0 2>&1 | grep -E "^decode step|^step 1:" | tr '\n' ' ')"
  done
  # decode attention alone (skipped with ATTN=0): the #5 table's rows (tools/gpu/decode_attention_row.py)
  for v in $( [ "${ATTN:-1}" != 0 ] && echo $VARIANTS ); do
    PYTHONPATH=$(path_of "$v"):tools/gpu timeout 90 python3 - "$v" <<'PYEOF'
import sys
from decode_attention_row import decode_row
for args in [("f16", 1, 512, 9, 3, 64), ("f16", 4, 8192, 32, 8, 128), ("f16", 16, 8192, 32, 8, 128),
             ("e4m3", 4, 16384, 32, 8, 128), ("f16", 8, 16384, 32, 4, 256)]:
    r = decode_row(*args)
    print(f"{sys.argv[1]} attention {r['kv']} b{r['batch']} ctx {r['ctx']} {r['heads']} D{r['d']}: "
          f"{r['us']:.2f} us (min {r['us_min']:.2f}), {r['gbs']:.0f} GB/s")
PYEOF
  done
} > "$L" 2>&1
cat "$L"
