# s24 call 2: engine_check 48 requests (wgmma rows) in full; #5 rows with longer graph chains
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
L=$OUT/log.txt
machine_info > $L 2>&1
timeout 200 python3 tools/gpu/_chain.py > $OUT/chain.txt 2>&1
timeout 330 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 48 --max-tokens 8 > $OUT/engine48.txt 2>&1
echo "engine rc=$?" >> $L
cat $L; grep -v Warn $OUT/chain.txt; grep -E "clear|mismatch|==|eager|gemm" $OUT/engine48.txt | tail -20
