#!/usr/bin/env bash
# s22 call 3: attention GPU tests whole (D 256 FP16 now on the register-direct kernel); llama3-8b q4_0
# decode steps at batch 32 / 64 (PDL on), and the kernel timelines with PDL off (additive per-kernel times)
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py tests/kernels/test_attention_fp8.py > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
tail -2 $OUT/tests.txt
for b in 32 64; do
  timeout 120 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 --timed 40 --profiled 0 > $OUT/steps-b$b.txt 2>&1
  tail -3 $OUT/steps-b$b.txt
  ONECAT_PDL=0 timeout 120 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 --timed 5 --profiled 0 --timeline 3 > $OUT/timeline-b$b-pdl-off.txt 2>&1
  head -40 $OUT/timeline-b$b-pdl-off.txt | tail -32
done
