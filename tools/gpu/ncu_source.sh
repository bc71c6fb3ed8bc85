#!/usr/bin/env bash
# tools/gpu/ncu_source.sh: where a packed GEMM kernel's warps stall, per SASS instruction (Nsight Compute
# source page, warp-state sampling), at M = 32 (or M) on one q4_0 matrix. Writes $OUT/ncu-source-<tile>.csv and
# prints the instructions that gather the most stall samples.
#   OUT=$OUT bash tools/gpu/ncu_source.sh [N K TILE SPLITS [M]]     (default: 4096 4096 r32 4 32)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
N=${1:-4096} K=${2:-4096} TILE=${3:-r32} SPLITS=${4:-4} M=${5:-32}
CSV=$OUT/ncu-source-$TILE-${N}x${K}-m$M.csv
timeout 200 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k regex:gemm_ --section WarpStateStats \
    --section SourceCounters --page source --print-source sass --csv python3 tools/gpu/gemm_launches.py $N $K $TILE $SPLITS $M > "$CSV" 2> "$OUT/ncu-source.err"
echo "ncu rc=$? ($(wc -l < "$CSV") lines)"
python3 tools/gpu/ncu_source_top.py "$CSV" || tail -5 "$OUT/ncu-source.err"
