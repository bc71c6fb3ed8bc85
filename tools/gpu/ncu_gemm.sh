#!/usr/bin/env bash
# tools/gpu/ncu_gemm.sh: Nsight Compute sections + every warp-stall reason of the packed GEMM kernels on
# llama3-8b matrices at M = 32, one line per (N, tile, splits): OUT=$OUT bash tools/gpu/ncu_gemm.sh ["N TILE SPLITS" ...]
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
SPECS=("$@"); [ ${#SPECS[@]} -gt 0 ] || SPECS=("28672 r32 1" "4096 r32 4" "28672 m32w 2")
for spec in "${SPECS[@]}"; do
set -- $spec
echo "== ncu $2 x$3 N=$1 K=4096 M=32"
timeout 100 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k "regex:gemm_" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats --section WarpStateStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,dram__sectors_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" \
    python3 tools/gpu/gemm_launches.py $1 4096 $2 $3 2>&1 | grep -vE "^==PROF==|^$|^    (OPT|INF|WRN)|^          " | grep -E "Duration|Throughput|Eligible|Cycles Per Issued|stalled_(barrier|long_scoreboard|short_scoreboard|wait|math_pipe|mio_throttle|lg_throttle|not_selected|dispatch|no_inst|tex)|Achieved Occ|Registers Per|Executed Ipc A|Mem Busy|Max Bandwidth|Mem Pipes|dram__sectors|lts__t_sectors|inst_executed.sum|hmma|L1/TEX Hit|L2 Hit"
done
