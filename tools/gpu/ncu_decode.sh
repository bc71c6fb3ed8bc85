#!/usr/bin/env bash
# tools/gpu/ncu_decode.sh: Nsight Compute on the register-direct decode kernel (one launch each of the
# given KV:BATCH:CTX[:FORM] cases, 32/8 heads D 128): DRAM throughput, issue activity and the warp
# stall breakdown, as $OUT/ncu-decode-<case>.csv, then a short table of the deciding metrics.
#   OUT=$OUT bash tools/gpu/ncu_decode.sh e4m3:16:8192 f16:16:8192 e4m3:4:8192
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for c in "$@"; do
  IFS=: read -r kv b ctx var <<< "$c"
  csv=$OUT/ncu-decode-${c//:/-}.csv
  timeout 120 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k regex:attn_decode_rd \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" --csv python3 tools/gpu/decode_launches.py $kv $b $ctx $var > "$csv" 2> "$OUT/ncu-decode.err"
  echo "== $c (ncu rc=$?)"
  python3 - "$csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if not rows or "Metric Name" not in rows[0]:
    print("  no metrics"); raise SystemExit
h = rows[0]; iname, iunit, ival = h.index("Metric Name"), h.index("Metric Unit"), h.index("Metric Value")
keep = ("Duration", "DRAM Throughput", "Memory Throughput", "Issue Slots Busy", "Issued Warp Per Scheduler",
        "No Eligible", "Active Warps Per Scheduler", "Eligible Warps Per Scheduler",
        "Warp Cycles Per Issued Instruction", "Achieved Occupancy", "L2 Hit Rate", "Mem Busy", "Max Bandwidth")
for r in rows[1:]:
    name, unit, val = r[iname], r[iunit], r[ival]
    if name.startswith("smsp__average_warps_issue_stalled_"):
        try:
            v = float(val.replace(",", ""))
        except ValueError:
            continue
        if v >= 0.1:
            print(f"  stall {name[len('smsp__average_warps_issue_stalled_'):-len('_per_issue_active.ratio')]:22} {v:8.2f}")
    elif name in keep:
        print(f"  {name:38} {val} {unit}")
PY
done
