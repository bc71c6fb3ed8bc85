#!/usr/bin/env bash
# s28 call 4: the register-direct q4_0 tiles' A/B forms (tiled layout, cp.async ring) against the route's kernel
set -uo pipefail
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
mkdir -p $OUT/r
machine_info > $OUT/r/machine.txt 2>&1
python3 tools/gpu/rd_tiled_bench.py --splits 1,2,4 --json $OUT/r/rd-forms.json 2>&1 | tee $OUT/r/rd-forms.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
