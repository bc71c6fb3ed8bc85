#!/usr/bin/env bash
# s39 call 3: Nsight Compute of gate_up 28672 x 4096 at M 64 on w64 and w64x2 (one launch each, the third), and down
# 4096 x 14336 x4: why two consumer warpgroups change nothing (call 1)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call3; mkdir -p $OUT
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for spec in "28672 w64 1" "28672 w64x2 1" "4096 w64 4" "4096 w64x2 4"; do
  set -- $spec
  K=4096; [ $1 = 4096 ] && K=14336
  echo "== ncu $2 x$3 N=$1 K=$K M=64" | tee -a $OUT/ncu.txt
  timeout 120 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k "regex:gemm_" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats \
    --section WarpStateStats --section LaunchStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,dram__sectors_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum" \
    python3 tools/gpu/gemm_launches.py $1 $K $2 $3 64 > $OUT/ncu-$2-$1.raw 2>&1
  grep -vE "^==PROF==|^$|^    (OPT|INF|WRN)|^          " $OUT/ncu-$2-$1.raw | grep -E "Duration|Throughput|Eligible|Issued Warp|Cycles Per Issued|stalled_|Achieved Occ|Registers Per|Executed Ipc A|Mem Busy|Max Bandwidth|Mem Pipes|dram__sectors|lts__t_sectors|inst_executed.sum|gmma|wavefronts|L1/TEX Hit|L2 Hit|Waves" | grep -vE " 0(\.0+)?$" >> $OUT/ncu.txt
done
cat $OUT/ncu.txt | cut -c1-150
