#!/usr/bin/env bash
# The decode experiments session 4 left open, in one call (~4-5 min): each prints CUDA-event step
# medians or the bench's own rate, so the next change is decided by a measurement.
#  1. fused projections on llama3-8b (generated q4_0 / q4_k): epilogue GEMV as admitted, forced for
#     every format, and off (ONECAT_DISABLED_PROVIDERS): why the Q4_K_M route measured slower;
#  2. asynchronous scheduling: tools/gpu/engine_steps.py, synchronous vs asynchronous, on the
#     smollm2 Q4_1 file at batch 1 and the 8B Q4_0 file at batch 64 (the bench's workload, step by
#     step: where batch 64's 28 ms per step goes while the graphed step is 11.5 ms);
#  3. Nsight Compute sections of the 8B down-projection GEMV (~50% of copy): throughput, memory,
#     occupancy and warp stall reasons, to choose between more parallelism and fewer stalls.
#   bash tools/gpu/decode_ab.sh       # repo root; carry .whl
set -u; cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-decode-ab}; mkdir -p "$OUT"; L=$OUT/ab.log
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
T0=$(date +%s); el() { echo "== $1 ($(( $(date +%s)-T0 )) s)" >> $L; }
machine_info >> $L 2>&1 || exit 2
el "fused projections A/B: llama3-8b generated weights, batch 1, context 512, graphs"
for w in q4_0 q4_k; do for v in admitted forced off; do
  echo "-- $w, epilogue GEMV $v" >> $L
  ONECAT_DISABLED_PROVIDERS=$([ $v = off ] && echo cuda_gemv_epilogue) timeout 60 python3 -c "
import runpy, sys
from onecat.kernels import linear_fused_ops as F
if '$v' == 'forced': F.EPILOGUE_FORMATS = tuple(F.EPILOGUE_SHAPES)
sys.argv = ['target.py', '--shape', 'llama3-8b', '--weights', '$w', '--batch', '1', '--context', '512', '--timed', '20', '--profiled', '0']
runpy.run_path('tools/ncu/target.py', run_name='__main__')" 2>&1 | grep "decode step" >> $L
done; done
el "GGUF files"
timeout 60 python3 -m onecat.bench.cli peers --out $OUT/peers --synth-only --configs smollm2-135m:Q4_1 llama3-8b:Q4_0 > /dev/null 2>&1
G=/tmp/onecat-peers-gguf
for a in "" --async-scheduling; do
  el "engine steps smollm2 Q4_1 batch 1 ${a:-sync}"
  timeout 60 python3 tools/gpu/engine_steps.py --model $G/smollm2-135m.Q4_1.gguf --batch 1 $a >> $L 2>&1
  el "engine steps llama3-8b Q4_0 batch 64 ${a:-sync}"
  timeout 100 python3 tools/gpu/engine_steps.py --model $G/llama3-8b.Q4_0.gguf --batch 64 $a >> $L 2>&1
done
el "ncu: the llama3-8b down GEMV (4096 x 14336, q4_0, M = 1; ~50% of copy): what limits it"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 120 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k regex:gemv_r_ \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --section LaunchStats python3 -c "
import torch
from onecat.kernels import ops
from onecat.kernels.bench import packed_gpu
g = torch.Generator('cuda').manual_seed(0)
w = packed_gpu(4096, 14336, 'q4_0', g)
x = torch.randn(1, 14336, device='cuda', generator=g).half()
for _ in range(4): ops.linear(x, w)
torch.cuda.synchronize()" 2>&1 | grep -vE "^==PROF==|^$" | head -120 >> $L
el done
cat $L
