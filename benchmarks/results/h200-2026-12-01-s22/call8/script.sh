#!/usr/bin/env bash
# s22 call 8 (diagnostic): the batch-4 decode rows with no merge at all (tools/gpu/_bound2.py)
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1
timeout 150 python3 tools/gpu/_bound2.py rd,partials_only $OUT/b-1.json > $OUT/b-1.txt 2>&1; tail -7 $OUT/b-1.txt
timeout 150 python3 tools/gpu/_bound2.py partials_only,rd $OUT/b-2.json > $OUT/b-2.txt 2>&1; tail -7 $OUT/b-2.txt
