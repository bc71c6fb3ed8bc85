# s23 call 10: ncu source stalls of gemm_wg w32 (PDW 2): gate_up 28672x4096 (HBM) and 8192x4096 (64 blocks, L2-resident), M 32
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
python3 tools/gpu/_wg_launch.py w32 28672
for n in 28672 8192; do
CSV=$OUT/ncu-source-$n.csv
timeout 200 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k regex:gemm_wg --section WarpStateStats --section SpeedOfLight \
    --section SourceCounters --page source --print-source sass --csv python3 tools/gpu/_wg_launch.py w32 $n > "$CSV" 2> $OUT/ncu-source.err
python3 tools/gpu/ncu_source_top.py "$CSV" --top 30 > $OUT/top-$n.txt 2>&1
gzip -f $CSV
timeout 100 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k "regex:gemm_wg" --section SpeedOfLight --section WarpStateStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" python3 tools/gpu/_wg_launch.py w32 $n 2>&1 \
    | grep -E "Duration|L1/TEX Cache|DRAM Through|stalled_(barrier|long_scoreboard|wait|gmma|math_pipe|mio|lg_th|dispatch|not_sel)|Cycles Per Issued" > $OUT/ncu-$n.txt
done
for n in 28672 8192; do echo "== $n"; cat $OUT/ncu-$n.txt; head -25 $OUT/top-$n.txt; done
