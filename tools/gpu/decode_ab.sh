#!/usr/bin/env bash
# The decode experiments left open, in one call (~3-4 min), each printing what decides the next change.
# Session 5's first run of the earlier version (fused projections A/B, engine steps sync vs async,
# ncu of the M = 1 down GEMV) is benchmarks/results/h200-2026-11-29-s5/decode-ab.log.
#  1. asynchronous scheduling with CUDA graphs changes no token: its GPU test on a SmolLM2-shaped GGUF
#     (`onecat-bench peers --synth-only` writes it; the embedded model's wheel does not travel);
#  2. Nsight Compute on the two kernels that bound batch-64 decode and #5's long-context decode:
#     the packed GEMM at M = 64 (gemm_p_q4_0_m64 on llama3-8b's 28672 x 4096 gate_up: ~75% of the
#     batch-64 step at ~600 GB/s) and split-KV decode at batch 4 x 8K, 32/8 heads, D 128, FP16 and
#     E4M3 KV (~60% / ~33% of copy, the FP8 one no faster than FP16 for half the bytes): throughput,
#     pipes, occupancy and every warp-stall reason per issued instruction.
#   bash tools/gpu/decode_ab.sh       # repo root; carry .whl
set -u; cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-decode-ab}; mkdir -p "$OUT"; L=$OUT/ab.log
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
T0=$(date +%s); el() { echo "== $1 ($(( $(date +%s)-T0 )) s)" >> $L; }
machine_info >> $L 2>&1 || exit 2
el "GGUF files"
timeout 60 python3 -m onecat.bench.cli peers --out $OUT/peers --synth-only --configs smollm2-135m:Q4_1 > /dev/null 2>&1
el "test: CUDA graphs with asynchronous scheduling (synthetic SmolLM2 Q4_1)"
ONECAT_TEST_GGUF=/tmp/onecat-peers-gguf/smollm2-135m.Q4_1.gguf timeout 120 python3 -m pytest -q -p no:cacheprovider \
  -m gpu tests/serve/test_async_scheduling.py >> $L 2>&1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
ncu_one() {  # ncu_one KERNEL_REGEX PYTHON: the 3rd launch of the kernel, sections + stall reasons
  timeout 150 $NCU --clock-control none --launch-skip 2 --launch-count 1 -k "regex:$1" \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section Occupancy --section SchedulerStats --section WarpStateStats --section LaunchStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    python3 -c "$2" 2>&1 | grep -vE "^==PROF==|^$|^    (OPT|INF|WRN)|^          " | head -150 >> $L
}
el "ncu: gemm_p_q4_0_m64, 28672 x 4096, M = 64"
ncu_one gemm_p_ "
import torch
from onecat.kernels import ops
from onecat.kernels.bench import packed_gpu
g = torch.Generator('cuda').manual_seed(0)
w = packed_gpu(28672, 4096, 'q4_0', g)
x = torch.randn(64, 4096, device='cuda', generator=g).half()
for _ in range(4): ops.linear(x, w)
torch.cuda.synchronize()"
for kv in f16 e4m3; do
  el "ncu: split-KV decode, batch 4 x 8192, heads 32/8, D 128, $kv KV"
  ncu_one attn_decode_ "
import math, torch
from onecat.kernels import ops
from onecat.kernels.inputs import paged_metadata
b, ctx, hq, hk, d, bs = 4, 8192, 32, 8, 128, 16
nb = b * ctx // bs + 4
md = paged_metadata([1] * b, [ctx] * b, bs, nb, torch.Generator().manual_seed(0), 'cuda')
q = torch.randn(b, hq, d, device='cuda').half()
dt = torch.float16 if '$kv' == 'f16' else torch.float8_e4m3fn
kc = torch.randn(nb, bs, hk, d, device='cuda').to(dt)
vc = torch.randn(nb, bs, hk, d, device='cuda').to(dt)
for _ in range(4): ops.paged_attention(q, kc, vc, md, 1 / math.sqrt(d))
torch.cuda.synchronize()"
done
el done
cat $L
