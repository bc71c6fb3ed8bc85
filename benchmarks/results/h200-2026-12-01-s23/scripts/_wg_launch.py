"""Four launches of gemm_wg w32s on a 28672 x 4096 q4_0 weight, M 32 (ncu target)."""
import sys
import torch
from onecat.kernels.bench import packed_gpu
from onecat.kernels.driver import Kernel

tile = sys.argv[1] if len(sys.argv) > 1 else "w32s"
n, k, m = int(sys.argv[2]) if len(sys.argv) > 2 else 28672, 4096, 32
k_ = Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{tile}", "ppppppppiiiii", pdl=True)
g = torch.Generator("cuda").manual_seed(0)
w = packed_gpu(n, k, "q4_0", g)
x = torch.randn(m, k, device="cuda", generator=g).half()
out = torch.empty(m, n, dtype=torch.half, device="cuda")
for _ in range(4):
    k_((n // 128, 1, 1), (192, 1, 1), out.data_ptr(), x.data_ptr(), w.q.data_ptr(), 0, w.meta.data_ptr(), 0, 0, 0,
       m, n, k, 1, k // 128)
torch.cuda.synchronize()
