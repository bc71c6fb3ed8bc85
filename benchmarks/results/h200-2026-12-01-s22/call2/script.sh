#!/usr/bin/env bash
# s22 call 2: FP8 decode with Q in shared memory: x = D 128 three load sets at 3 blocks per SM / D 256 two
# sets at 2; y = the route's sets with Q in shared memory; against rd (the route)
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1
for r in 1 2; do
  ks=$([ $r = 1 ] && echo rd,rd_x,rd_y || echo rd_y,rd_x,rd)
  timeout 280 python3 tools/gpu/decode_rd_ab.py --graphed --kernels $ks --rows 5,6,10,11,8,30,31,33 --json $OUT/ab-$r.json > $OUT/ab-$r.txt 2>&1
  tail -10 $OUT/ab-$r.txt
done
