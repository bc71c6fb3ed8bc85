# s27 call 6: the rotary epilogue with its inputs loaded as the epilogue starts (RopeIn8): GPU tests, CUPTI kernel
# tables (PDL off) at batch 32 / 64 fused (A) and refused (B), then decode steps (PDL on) A B, two rounds
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c6; mkdir -p $OUT/steps  # everything under one tarball ($OUT returns at most 8 files)
machine_info > $OUT/machine.txt 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "rope" --tb=short > $OUT/tests.txt 2>&1
echo "rc=$?" >> $OUT/tests.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py -k "rms_norm_qkv or rotary" --tb=short \
  >> $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
grep -E "passed|failed|rc=" $OUT/tests.txt
OFF=rms_norm_qkv_rotary_cache:cuda_pack_gemm_rd
for b in 32 64; do for v in fused unfused; do
  env $([ $v = unfused ] && echo ONECAT_DISABLED_PROVIDERS=$OFF) ONECAT_PDL=0 timeout 100 python3 tools/ncu/target.py \
    --shape llama3-8b --weights q4_0 --batch $b --context 512 --timed 5 --profiled 0 --timeline 3 2>&1 | grep -v -i warn \
    > $OUT/timeline-b$b-$v-pdl-off.txt
  grep -E "busy|idle|_rope|gemm_rd_q4_0_r32 |rotary" $OUT/timeline-b$b-$v-pdl-off.txt | cut -c1-100
done; done
for r in 1 2; do for b in 32 64; do
  timeout 100 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 --timed 30 --profiled 0 \
    --steps-json $OUT/steps/b$b-fused-r$r.json > $OUT/steps/b$b-fused-r$r.txt 2>&1
  ONECAT_DISABLED_PROVIDERS=$OFF timeout 100 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b \
    --context 512 --timed 30 --profiled 0 --steps-json $OUT/steps/b$b-unfused-r$r.json > $OUT/steps/b$b-unfused-r$r.txt 2>&1
done; done
for f in $OUT/steps/*.txt; do echo "$(basename $f): $(grep -E 'median' $f | tail -1 | cut -c1-110)"; done
tar czf $FINAL/call6.tgz -C /tmp c6
