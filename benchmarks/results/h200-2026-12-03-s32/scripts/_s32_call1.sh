#!/usr/bin/env bash
# s32 call 1: the residual add + RMSNorm split over the projections' epilogues (linear_norm_ops): the joined ops'
# GPU tests and the GEMM entries', engine_check (llama3-8b shape, 2 layers, q4_0, 32 requests: greedy tokens
# against the reference route, graphs against eager), then batch-32 steps, joined vs unfused, alternated
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call1; mkdir -p $OUT
UNFUSED="linear_rms_norm_linear:cuda_pack_gemm_rd,linear_rms_norm_qkv_rotary_cache:cuda_pack_gemm_rd"
machine_info > $OUT/machine.txt 2>&1
timeout 320 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_linear_norm.py tests/kernels/test_gemm_rd.py \
  -k "not traced" > $OUT/t-linear-norm-gemm-rd.txt 2>&1
echo "rc=$?" >> $OUT/t-linear-norm-gemm-rd.txt; tail -3 $OUT/t-linear-norm-gemm-rd.txt; echo "at ${SECONDS}s"
timeout 120 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 32 --max-tokens 16 \
  > $OUT/engine-check.txt 2>&1; echo "rc=$?" >> $OUT/engine-check.txt
grep -E "clear positions|eager|rc=" $OUT/engine-check.txt | cut -c1-160; echo "at ${SECONDS}s"
for r in 1 2 3; do for v in joined unfused; do
  [ $SECONDS -gt 530 ] && break 2
  d=""; [ $v = unfused ] && d=$UNFUSED
  ONECAT_DISABLED_PROVIDERS=$d timeout 60 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 32 \
    --context 512 --timed 30 --profiled 0 --steps-json $OUT/b32-$v-r$r.json > $OUT/b32-$v-r$r.txt 2>&1
  echo "r$r $v: $(grep median $OUT/b32-$v-r$r.txt | cut -c1-120)"
done; done
