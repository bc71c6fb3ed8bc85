# s27 call 5: after rope_pair (one rounding for every rotary kernel): the engine against its CPU reference
# (llama3-8b shape, 2 layers, 32 and 40 requests), then llama3-8b q4_0 decode steps at batch 32 / 64 x 512,
# the fused qkv + rotary + cache route (A) against it refused (B), three rounds A B; CUPTI kernel tables at
# batch 32 (PDL off) of both
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c5; mkdir -p $OUT  # everything under one tarball ($OUT returns at most 8 files)
machine_info > $OUT/machine.txt 2>&1
for n in 32 40; do
  timeout 150 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts $n --max-tokens 16 \
    > $OUT/engine-q4_0-$n.txt 2>&1; echo "rc=$?" >> $OUT/engine-q4_0-$n.txt
  grep -E "mismatch|==|rc=" $OUT/engine-q4_0-$n.txt | head -4
done
OFF=rms_norm_qkv_rotary_cache:cuda_pack_gemm_rd
mkdir -p $OUT/steps
for r in 1 2 3; do for b in 32 64; do
  timeout 100 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 --timed 30 --profiled 0 \
    --steps-json $OUT/steps/b$b-fused-r$r.json > $OUT/steps/b$b-fused-r$r.txt 2>&1
  ONECAT_DISABLED_PROVIDERS=$OFF timeout 100 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b \
    --context 512 --timed 30 --profiled 0 --steps-json $OUT/steps/b$b-unfused-r$r.json > $OUT/steps/b$b-unfused-r$r.txt 2>&1
done; done
for v in fused unfused; do
  env $([ $v = unfused ] && echo ONECAT_DISABLED_PROVIDERS=$OFF) ONECAT_PDL=0 timeout 100 python3 tools/ncu/target.py \
    --shape llama3-8b --weights q4_0 --batch 32 --context 512 --timed 5 --profiled 0 --timeline 3 2>&1 | grep -v -i warn \
    > $OUT/timeline-b32-$v-pdl-off.txt
done
head -14 $OUT/timeline-b32-fused-pdl-off.txt; head -14 $OUT/timeline-b32-unfused-pdl-off.txt
for f in $OUT/steps/*.txt; do echo "$(basename $f): $(grep -E 'median' $f | tail -1 | cut -c1-110)"; done
tar czf $FINAL/call5.tgz -C /tmp c5
