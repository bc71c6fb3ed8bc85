#!/usr/bin/env bash
# s32 call 2: joined (A, the route) vs unfused (B) in one process each (target.py --ab-disable: both graph sets
# captured, rounds alternated on the same weights and cache): llama3-8b q4_0 batch 32 and 64, context 512
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/call2; mkdir -p $OUT
UNFUSED="linear_rms_norm_linear:cuda_pack_gemm_rd,linear_rms_norm_qkv_rotary_cache:cuda_pack_gemm_rd"
machine_info > $OUT/machine.txt 2>&1
for b in 32 64 32 64; do
  [ $SECONDS -gt 450 ] && break
  n=$(ls $OUT | grep -c "^ab-b$b-"); n=$((n / 2 + 1))
  timeout 150 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 --timed 20 \
    --rounds 6 --profiled 0 --ab-disable $UNFUSED --steps-json $OUT/ab-b$b-$n.json > $OUT/ab-b$b-$n.txt 2>&1
  echo "== b$b run $n rc=$? (${SECONDS}s)"; grep -E "^round|A median|differ" $OUT/ab-b$b-$n.txt | cut -c1-200
done
tar czf $FINAL/call2.tgz -C /tmp call2
