# s27 call 1: the qkv GEMM with the rotary + cache-write epilogue (gemm_rd.cu _rope entries; linear_fused_ops
# cuda_pack_gemm_rd for rms_norm_qkv_rotary_cache): GPU tests, the engine against its CPU reference, then
# llama3-8b q4_0 decode steps at batch 32 / 64 x 512 with the fused route (A) and with it refused (B), A B A B
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "rope or glu or route" --tb=short \
  > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py -k "rms_norm_qkv or rotary or available" \
  --tb=short >> $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
tail -4 $OUT/tests.txt
timeout 150 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 32 --max-tokens 16 \
  > $OUT/engine-q4_0-32.txt 2>&1; echo "rc=$?" >> $OUT/engine-q4_0-32.txt
grep -E "mismatch:|clear positions|==|rc=|rms_norm_qkv" $OUT/engine-q4_0-32.txt | head -12
OFF=rms_norm_qkv_rotary_cache:cuda_pack_gemm_rd
for r in 1 2; do for b in 32 64; do
  timeout 100 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 --timed 30 --profiled 0 \
    > $OUT/steps-b$b-fused-r$r.txt 2>&1
  ONECAT_DISABLED_PROVIDERS=$OFF timeout 100 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b \
    --context 512 --timed 30 --profiled 0 > $OUT/steps-b$b-unfused-r$r.txt 2>&1
done; done
for f in $OUT/steps-*.txt; do echo "$(basename $f): $(grep -iE 'median|step' $f | tail -1)"; done
