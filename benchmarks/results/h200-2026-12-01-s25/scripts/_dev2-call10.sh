# s25 call 6: where w64's warps stall, per SASS instruction (ncu source page), GLU gate_up M 64
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
python3 tools/gpu/_wg_launch.py wd3
for T in wd3; do
CSV=$OUT/ncu-source-$T.csv
timeout 200 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k regex:gemm_wg --section WarpStateStats \
    --section SourceCounters --page source --print-source sass --csv python3 tools/gpu/_wg_launch.py $T > "$CSV" 2> "$OUT/ncu-source.err"
echo "ncu rc=$? ($(wc -l < "$CSV") lines)"
python3 tools/gpu/ncu_source_top.py "$CSV" --top 40 || tail -5 "$OUT/ncu-source.err"
gzip -f "$CSV"
done
