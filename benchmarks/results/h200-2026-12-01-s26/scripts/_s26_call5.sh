# s26 call 5: llama3-8b q4_0 decode step kernel tables at batch 32 / 64 with the wgmma tile routed (PDL off:
# additive per-kernel times), and the step times with PDL on
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
for b in 32 64; do
  timeout 120 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 --timed 30 --profiled 0 > $OUT/steps-b$b.txt 2>&1
  tail -2 $OUT/steps-b$b.txt
  ONECAT_PDL=0 timeout 120 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch $b --context 512 --timed 5 --profiled 0 --timeline 3 2>&1 | grep -v -i warn > $OUT/timeline-b$b-pdl-off.txt
  head -24 $OUT/timeline-b$b-pdl-off.txt
done
