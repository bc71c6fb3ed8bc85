# s23 call 9: ncu of gemm_wg w32s (gate_up 28672x4096, M 32): sections, stall reasons, SASS hot spots
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
python3 tools/gpu/_wg_launch.py w32s  # compile outside the profiler
timeout 150 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k "regex:gemm_wg" \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed" \
    python3 tools/gpu/_wg_launch.py w32s 2>&1 | grep -vE "^==PROF==|^$|^    (OPT|INF|WRN)|^          " > $OUT/ncu.txt
CSV=$OUT/ncu-source.csv
timeout 200 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k regex:gemm_wg --section WarpStateStats \
    --section SourceCounters --page source --print-source sass --csv python3 tools/gpu/_wg_launch.py w32s > "$CSV" 2> $OUT/ncu-source.err
python3 tools/gpu/ncu_source_top.py "$CSV" --top 45 > $OUT/top.txt 2>&1
gzip -f $CSV
grep -E "Duration|Throughput|Eligible|Cycles Per Issued|stalled_(barrier|long_scoreboard|short_scoreboard|wait|math_pipe|mio_throttle|lg_throttle|not_selected|dispatch|no_inst|membar|sleeping|branch)|Achieved Occ|Registers Per|inst_executed.sum|gmma|Block Limit" $OUT/ncu.txt
cat $OUT/top.txt
