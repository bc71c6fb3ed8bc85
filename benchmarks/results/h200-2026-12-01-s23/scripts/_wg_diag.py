"""s23 call 12: what bounds gemm_wg w32's step: W loads (w32nw: no W loads after the first steps, stale
registers) or x staging (w32nx: no producer, no barriers, stale shared x). Timing only (wrong outputs)."""
import math, statistics
import torch
from onecat.kernels import gemm_ops, ops
from onecat.kernels.driver import Kernel
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets

K_ = {t: Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{t}", "ppppppppiiiii", pdl=True) for t in ("w32", "w32nw", "w32nx")}


def launch(x, w, tile):
    k = x.shape[-1]; m, n = x.numel() // k, w.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    K_[tile]((n // 128, 1, 1), (192, 1, 1), out.data_ptr(), x.data_ptr(), w.q.data_ptr(), 0, w.meta.data_ptr(), 0,
             0, 0, m, n, k, 1, k // 128)
    return out


gen = torch.Generator("cuda").manual_seed(0)
for n, rot in ((28672, True), (8192, False), (8192, True)):
    first = packed_gpu(n, 4096, "q4_0", gen)
    nsets = max(1, min(16, math.ceil(ROTATE_BYTES / first.nbytes))) if rot else 1
    ws = [first] + [packed_gpu(n, 4096, "q4_0", gen) for _ in range(nsets - 1)]
    xs = [torch.randn(32, 4096, device="cuda", generator=gen).half() for _ in range(nsets)]
    cells = [f"route {statistics.median(time_sets(lambda i: ops.linear(xs[i], ws[i]), nsets, 30)):.1f}"]
    for t in K_:
        cells.append(f"{t} {statistics.median(time_sets(lambda i: launch(xs[i], ws[i], t), nsets, 30)):.1f}")
    print(f"{n}x4096 M 32 ({'rotated, HBM' if rot else 'one weight, L2'}; {n // 128} blocks): " + " | ".join(cells), flush=True)
    del ws, first
