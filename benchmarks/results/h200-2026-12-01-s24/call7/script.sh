# s24 call 7: same-run peers (llama.cpp llama-bench / llama-batched-bench vs onecat, llama3-8b Q4_0, batch
# 1 / 32 / 64); #5's decode rows graphed as 32-call chains; engine tokens vs the CPU reference at batch 48
set -u
PEERS_LIMIT_S=260 bash tools/gpu/peers_check.sh --configs llama3-8b:Q4_0 --engines llama.cpp onecat \
  --batched llama3-8b:Q4_0=32,64 > /dev/null 2>&1
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 150 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd --rows 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,29,30,31,32,33 \
  --json $OUT/rows.json > $OUT/rows.txt 2>&1
echo "rows rc=$?" >> $L
timeout 200 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 48 --max-tokens 8 > $OUT/engine48.txt 2>&1
echo "engine rc=$?" >> $L
cat $L; sed -n '/^| shape/,/^$/p' $OUT/peers/peers.md; sed -n '/^decode attention/,$p' $OUT/rows.txt
grep -E "clear|eager:|graphs:" $OUT/engine48.txt
