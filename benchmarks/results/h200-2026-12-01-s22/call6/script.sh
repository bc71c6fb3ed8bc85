#!/usr/bin/env bash
# s22 call 6 (diagnostic): where the decode kernel lets the next call launch (pdl_launch_dependents at the
# start: rd; after the loops: late1; after the partials: late2), and without the fused merge (nomerge)
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1
timeout 200 python3 tools/gpu/_bound_ab.py rd,late1,late2,nomerge $OUT/late-1.json > $OUT/late-1.txt 2>&1; tail -13 $OUT/late-1.txt
timeout 200 python3 tools/gpu/_bound_ab.py nomerge,late2,late1,rd $OUT/late-2.json > $OUT/late-2.txt 2>&1; tail -13 $OUT/late-2.txt
