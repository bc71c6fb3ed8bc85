#!/usr/bin/env bash
# s28 call 3: the register-direct q4_0 tiles on tile_q4_0's layout: GPU tests, then row-major vs tiled timing
set -uo pipefail
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
mkdir -p $OUT/r
machine_info > $OUT/r/machine.txt 2>&1
python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py 2>&1 | tail -15 | tee $OUT/r/tests.txt
python3 tools/gpu/rd_tiled_bench.py --json $OUT/r/rd-tiled.json 2>&1 | tee $OUT/r/rd-tiled.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
