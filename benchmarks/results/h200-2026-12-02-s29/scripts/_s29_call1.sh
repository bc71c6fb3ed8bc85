#!/usr/bin/env bash
# s29 call 1: the FP8 pack shared (attention_fp8.cuh half8_to_fp8 / float_to_fp8(kv, x)): FP8 cache and rope
# tests; engine_check with E5M2 and E4M3 caches; then (time left) batch-32 steps FP16 vs E4M3, two rounds
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=/tmp/c1; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
timeout 330 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py tests/kernels/test_gemm_rd.py \
  tests/kernels/test_gemv_packed.py -k "reshape_and_cache or rope" > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
tail -3 $OUT/tests.txt; echo "tests done at ${SECONDS}s"
for kv in float8_e5m2 float8_e4m3fn; do
  timeout 120 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 32 --max-tokens 16 \
    --kv $kv > $OUT/engine-check-$kv.txt 2>&1; echo "rc=$?" >> $OUT/engine-check-$kv.txt
  echo "== $kv"; grep -E "clear positions|eager|rc=" $OUT/engine-check-$kv.txt | cut -c1-160
done
echo "engine_check done at ${SECONDS}s"
for r in 1 2; do for kv in float16 float8_e4m3fn; do
  [ $SECONDS -gt 520 ] && break 2
  timeout 60 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 32 --context 512 --timed 30 \
    --profiled 0 --kv $kv --steps-json $OUT/b32-$kv-r$r.json > $OUT/b32-$kv-r$r.txt 2>&1
  echo "r$r $kv: $(grep median $OUT/b32-$kv-r$r.txt | cut -c1-120)"
done; done
tar czf $FINAL/call1.tgz -C /tmp c1
