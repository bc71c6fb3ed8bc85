#!/usr/bin/env bash
# s28 call 6: FP8 (E4M3 / E5M2) caches written by the qkv GEMM's rotary epilogue, and the engine allocating the
# cache dtype it is given: GPU tests, engine_check with an E4M3 cache, CUPTI kernel tables (PDL off) at batch 32
# fused (A) and refused (B) with an E4M3 cache, then decode steps (PDL on) A B
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c6; mkdir -p $OUT/steps
machine_info > $OUT/machine.txt 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py tests/kernels/test_gemv_packed.py \
  -k "rope" --tb=short > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py -k "rms_norm_qkv or rotary or cache" \
  --tb=short >> $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
grep -E "passed|failed|rc=" $OUT/tests.txt
timeout 200 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 32 --max-tokens 16 \
  --kv float8_e4m3fn > $OUT/engine-check-e4m3.txt 2>&1; echo "rc=$?" >> $OUT/engine-check-e4m3.txt
grep -E "clear positions|eager|rc=" $OUT/engine-check-e4m3.txt
OFF=rms_norm_qkv_rotary_cache:cuda_pack_gemm_rd
for v in fused unfused; do
  env $([ $v = unfused ] && echo ONECAT_DISABLED_PROVIDERS=$OFF) ONECAT_PDL=0 timeout 100 python3 tools/ncu/target.py \
    --shape llama3-8b --weights q4_0 --batch 32 --context 512 --timed 5 --profiled 0 --timeline 3 --kv float8_e4m3fn \
    2>&1 | grep -v -i warn > $OUT/timeline-b32-e4m3-$v-pdl-off.txt
  grep -E "busy|_rope|gemm_rd_q4_0_r32 |rotary|cache" $OUT/timeline-b32-e4m3-$v-pdl-off.txt | cut -c1-100
done
OFF1=rms_norm_qkv_rotary_cache:cuda_gemv_norm
for r in 1; do for v in fused unfused; do
  env $([ $v = unfused ] && echo ONECAT_DISABLED_PROVIDERS=$OFF) timeout 100 python3 tools/ncu/target.py --shape llama3-8b \
    --weights q4_0 --batch 32 --context 512 --timed 30 --profiled 0 --kv float8_e4m3fn \
    --steps-json $OUT/steps/b32-e4m3-$v-r$r.json > $OUT/steps/b32-e4m3-$v-r$r.txt 2>&1
  env $([ $v = unfused ] && echo ONECAT_DISABLED_PROVIDERS=$OFF1) timeout 100 python3 tools/ncu/target.py --shape llama3-8b \
    --weights q4_0 --batch 1 --context 512 --timed 30 --profiled 0 --kv float8_e4m3fn \
    --steps-json $OUT/steps/b1-e4m3-$v-r$r.json > $OUT/steps/b1-e4m3-$v-r$r.txt 2>&1
done; done
for f in $OUT/steps/*.txt; do echo "$(basename $f): $(grep -E 'median' $f | tail -1 | cut -c1-120)"; done
tar czf $FINAL/call6.tgz -C /tmp c6
