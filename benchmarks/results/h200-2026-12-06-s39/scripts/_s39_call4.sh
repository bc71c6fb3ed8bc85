#!/usr/bin/env bash
# s39 call 4: w64x2p4 (two consumer warpgroups, four x stages in 66 KB of dynamic shared memory, four producer warps)
# against w64 and w64x2: the wgmma tile tests, gate_up (GLU) / down at M 64 / 48, ncu of gate_up M 64
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call4; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"
timeout 130 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles w64,w64x2,w64x2p4 --splits 1 --shapes 28672x4096 \
  --glu --no-cublas --budget 300 > $OUT/gateup-glu.txt 2>&1; echo "gate_up rc=$? at ${SECONDS}s"
timeout 130 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles w64,w64x2,w64x2p4 --splits 4 --shapes 4096x14336 \
  --no-cublas --budget 300 > $OUT/down.txt 2>&1; echo "down rc=$? at ${SECONDS}s"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 120 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k "regex:gemm_" --section SpeedOfLight \
  --section SchedulerStats --section WarpStateStats \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum" \
  python3 tools/gpu/gemm_launches.py 28672 4096 w64x2p4 1 64 > $OUT/ncu-w64x2p4-28672.raw 2>&1
grep -E "Duration|Eligible|Cycles Per Issued|stalled_(barrier|long_scoreboard|wait|gmma|dispatch)|inst_executed" \
  $OUT/ncu-w64x2p4-28672.raw | cut -c1-120
tail -n 4 $OUT/tests.txt
grep "route" $OUT/gateup-glu.txt $OUT/down.txt | cut -d: -f2- | sed 's/(err [0-9.e-]*)//g'
