# s24 call 1: engine tokens vs the CPU reference at batch 48 (the wgmma tile's rows), llama3-8b q4_0
# batch-1 step timeline (where G2's step goes)
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
( timeout 150 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 1 --context 512 --timed 20 \
    --timeline 2 --profiled 0 2>&1 | grep -v Warn > $OUT/timeline-b1.txt ) 
echo "== engine_check 48" >> $L
timeout 330 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 48 --max-tokens 8 2>&1 | tail -6 >> $L
echo "rc=$?" >> $L
cat $L; tail -60 $OUT/timeline-b1.txt
