"""s24: four launches of a wgmma tile (GLU) on gate_up 28672 x 4096, M 64: the ncu target."""
import sys, torch
from onecat.kernels import gemm_ops
from onecat.kernels.bench import packed_gpu
tile = sys.argv[1]
g = torch.Generator("cuda").manual_seed(0)
w = packed_gpu(28672, 4096, "q4_0", g)
x = torch.randn(64, 4096, device="cuda", generator=g).half()
for _ in range(4):
    gemm_ops.gemm_launch(x, w, None, tile, 1, glu=True)
torch.cuda.synchronize()
