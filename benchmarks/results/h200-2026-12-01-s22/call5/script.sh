#!/usr/bin/env bash
# s22 call 5 (diagnostic): the short FP8 launch without its latency chains (tools/gpu/_bound_ab.py)
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1
timeout 200 python3 tools/gpu/_bound_ab.py rd,nomerge,qpre,qpre_nomerge $OUT/bound-1.json > $OUT/bound-1.txt 2>&1; tail -13 $OUT/bound-1.txt
timeout 200 python3 tools/gpu/_bound_ab.py qpre_nomerge,qpre,nomerge,rd $OUT/bound-2.json > $OUT/bound-2.txt 2>&1; tail -13 $OUT/bound-2.txt
