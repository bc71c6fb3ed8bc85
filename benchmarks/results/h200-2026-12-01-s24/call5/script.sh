# s24 call 5: w64 with x64's loads (committed form) and n64 / n64d2 (two warpgroups over 256 features sharing x)
# vs the route; GPU tests; ncu of w64 GLU gate_up M 64
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "wgmma or register_direct_route" 2>&1 | tail -2 >> $L
timeout 200 python3 tools/gpu/_pp_bench.py 64,48 >> $L 2>&1
echo "bench rc=$?" >> $L
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
python3 tools/gpu/_wg_launch.py w64
timeout 120 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k "regex:gemm_wg" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SchedulerStats --section WarpStateStats --section InstructionStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__t_requests.sum,l1tex__t_wavefronts.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__cycles_elapsed.avg,l1tex__lsu_writeback_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active" \
    python3 tools/gpu/_wg_launch.py w64 > $OUT/ncu-w64.txt 2>&1
grep -vE "^==PROF==|^$|^    (OPT|INF|WRN)|^          " $OUT/ncu-w64.txt | grep -E "Duration|Throughput|Busy|Pipe|pipe|wavefront|requests|conflict|cycles|stalled_(barrier|long_scoreboard|short_scoreboard|wait|math_pipe|mio_throttle|lg_throttle|not_selected|dispatch|no_inst|tex|membar|sleeping)|Eligible|Issued|gmma" | head -70 >> $L
cat $L
