#!/usr/bin/env bash
# s32 call 3 (and 4, with the normed shapes behind): the residual add + RMSNorm joined at one row (linear_norm_ops cuda_gemv_norm: _norm GEMV, then _rs_glu /
# _rs_rope): GPU tests, engine_check at batch 1 (q4_0, q4_k), then batch-1 steps joined (A) vs the s31 route (B,
# the GEMVs with the norm prologue), in one process each (target.py --ab-disable)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/${CALL:-call3}; mkdir -p $OUT
B="linear_rms_norm_linear:cuda_gemv_norm,linear_rms_norm_qkv_rotary_cache:cuda_gemv_norm"
machine_info > $OUT/machine.txt 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_linear_norm.py \
  tests/kernels/test_gpu_kernels.py -k "gemv or linear_rms" > $OUT/t-gemv-join.txt 2>&1
echo "rc=$?" >> $OUT/t-gemv-join.txt; tail -4 $OUT/t-gemv-join.txt; echo "at ${SECONDS}s"
for w in q4_0 q4_k; do
  timeout 100 python3 tools/gpu/engine_check.py --shape llama3-8b --weights $w --layers 2 --prompts 1 --max-tokens 24 \
    > $OUT/engine-check-b1-$w.txt 2>&1; echo "rc=$?" >> $OUT/engine-check-b1-$w.txt
  echo "$w: $(grep -E "mismatched|== eager|rc=" $OUT/engine-check-b1-$w.txt | cut -c60-200 | tr '\n' ' ')"; echo "at ${SECONDS}s"
done
for w in q4_0 q4_k q4_0; do
  [ $SECONDS -gt 470 ] && break
  n=$(ls $OUT | grep -c "^ab-b1-$w-.*txt"); n=$((n + 1))
  timeout 120 python3 tools/ncu/target.py --shape llama3-8b --weights $w --batch 1 --context 512 --timed 30 \
    --rounds 6 --profiled 0 --ab-disable $B --steps-json $OUT/ab-b1-$w-$n.json > $OUT/ab-b1-$w-$n.txt 2>&1
  echo "== b1 $w run $n rc=$? (${SECONDS}s)"; grep -E "^round|A median|differ" $OUT/ab-b1-$w-$n.txt | cut -c1-200
done
tar czf $FINAL/${CALL:-call3}.tgz -C /tmp ${CALL:-call3}
