"""Four launches of one packed-GEMM tile on a generated q4_0 weight, M = 32 (or M): the target the Nsight Compute
scripts profile (ncu_gemm.sh, ncu_source.sh; they skip the first two launches and profile the third).

    python3 tools/gpu/gemm_launches.py N K TILE SPLITS [M]
"""

import sys

import torch

from onecat.kernels import gemm_ops
from onecat.kernels.bench import packed_gpu

n, k, tile, splits = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
m = int(sys.argv[5]) if len(sys.argv) > 5 else 32
g = torch.Generator("cuda").manual_seed(0)
w = packed_gpu(n, k, "q4_0", g)
x = torch.randn(m, k, device="cuda", generator=g).half()
for _ in range(4):
    gemm_ops.gemm_launch(x, w, None, tile, splits)
torch.cuda.synchronize()
