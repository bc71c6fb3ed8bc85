"""s23 call 13: gemm_wg 64-row tiles at one block per SM (w64a: one x producer warp, w64b: two, w64c: two and W
three steps ahead) against the route (r32 / r32w two high) on the llama3-8b q4_0 matrices, M 64 and 48."""
import math, statistics
import torch
from onecat.kernels import ops
from onecat.kernels.driver import Kernel
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets

THR = {"w64a": 160, "w64b": 192, "w64c": 192}
K_ = {t: Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{t}", "ppppppppiiiii", pdl=True) for t in THR}


def launch(x, w, tile, splits):
    k = x.shape[-1]; m, n = x.numel() // k, w.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    steps = k // 128
    per = -(-steps // max(1, min(splits, steps))); splits = -(-steps // per)
    gx, gy = -(-n // 128), -(-m // 64)
    ws = cnt = None
    if splits > 1:
        ws = torch.empty((splits, m, n), dtype=torch.float32, device=x.device)
        cnt = torch.zeros(gx * gy, dtype=torch.int32, device=x.device)
    K_[tile]((gx, gy, splits), (THR[tile], 1, 1), out.data_ptr(), x.data_ptr(), w.q.data_ptr(), 0, w.meta.data_ptr(), 0,
             0 if ws is None else ws.data_ptr(), 0 if cnt is None else cnt.data_ptr(), m, n, k, 1, per)
    return out


gen = torch.Generator("cuda").manual_seed(0)
for n, k in [(28672, 4096), (4096, 14336), (6144, 4096), (4096, 4096)]:
    first = packed_gpu(n, k, "q4_0", gen)
    nsets = max(1, min(16, math.ceil(ROTATE_BYTES / first.nbytes)))
    ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
    for m in (64, 48):
        xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
        ref = ops.linear(xs[0], ws[0])
        cells = [f"route {statistics.median(time_sets(lambda i: ops.linear(xs[i], ws[i]), nsets, 20)):6.1f}"]
        for t in THR:
            best = None
            for s in (1, 2, 4, 8):
                if s > 1 and k // 128 // s < 4:
                    continue
                y = launch(xs[0], ws[0], t, s)
                err = float((y.float() - ref.float()).abs().max())
                assert err < 0.1, (t, s, err)
                us = statistics.median(time_sets(lambda i: launch(xs[i], ws[i], t, s), nsets, 20))
                if best is None or us < best[0]:
                    best = (us, s)
            cells.append(f"{t} {best[0]:6.1f} (x{best[1]})")
        print(f"{n}x{k} M {m}: " + " | ".join(cells), flush=True)
    del ws, first
    torch.cuda.empty_cache()
