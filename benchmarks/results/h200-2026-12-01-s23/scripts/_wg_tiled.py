"""s23: is the register-direct GEMMs' ~1.7 TB/s on gate_up the DRAM access pattern? gemm_wg.cu's w32 on the
row-major q4_0 planes vs the same kernel on a tiled copy ([N/128][K-step][128 rows][64 B]: a block's step one
contiguous 8 KB), with / without the L2::128B hint; and the route, on the llama3-8b matrices, M 32 / 64."""
import math, statistics, sys, types
import torch
from onecat.kernels import gemm_ops, ops
from onecat.kernels.driver import Kernel
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets

SIG = "ppppppppiiiii"
TILES = ("w32", "w32s", "w64")
BM = {"w32": 32, "w32s": 32, "w64": 64}
K_ = {t: Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{t}", SIG, pdl=True) for t in TILES}


def tiled(w):
    n, kb = w.q.shape  # uint8 [N, K/2]
    steps = kb // 64
    q = w.q.view(n // 128, 128, steps, 64).permute(0, 2, 1, 3).contiguous()
    meta = w.meta.view(torch.uint8).view(n // 128, 128, steps, 8).permute(0, 2, 1, 3).contiguous()
    return types.SimpleNamespace(q=q, meta=meta, shape=w.shape)


def launch(x, w, tile, splits):
    k = x.shape[-1]; m, n = x.numel() // k, w.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    steps = k // 128
    per = -(-steps // max(1, min(splits, steps))); splits = -(-steps // per)
    gx, gy = -(-n // 128), -(-m // BM[tile])
    ws = cnt = None
    if splits > 1:
        ws = torch.empty((splits, m, n), dtype=torch.float32, device=x.device)
        cnt = torch.zeros(gx * gy, dtype=torch.int32, device=x.device)
    K_[tile]((gx, gy, splits), (192, 1, 1), out.data_ptr(), x.data_ptr(), w.q.data_ptr(), 0, w.meta.data_ptr(), 0,
             0 if ws is None else ws.data_ptr(), 0 if cnt is None else cnt.data_ptr(), m, n, k, 1, per)
    return out


def main():
    gen = torch.Generator("cuda").manual_seed(0)
    lines = []
    for n, k in [(28672, 4096), (4096, 14336), (6144, 4096), (4096, 4096)]:
        first = packed_gpu(n, k, "q4_0", gen)
        nsets = max(1, min(16, math.ceil(ROTATE_BYTES / first.nbytes)))
        ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
        tws = [tiled(w) for w in ws]
        for m in (32, 64):
            xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
            ref = ops.linear(xs[0], ws[0])
            route = statistics.median(time_sets(lambda i: ops.linear(xs[i], ws[i]), nsets, 20))
            cells = [f"route {route:6.1f}"]
            for tile in TILES:
                wl = tws if tile.startswith("w32t") else ws
                best = None
                for s in (1, 2, 4, 8):
                    if s > 1 and k // 128 // s < 4:
                        continue
                    y = launch(xs[0], wl[0], tile, s)
                    assert torch.allclose(y.float(), ref.float(), rtol=2e-2, atol=5e-2), (tile, s, float((y.float() - ref.float()).abs().max()))
                    t = statistics.median(time_sets(lambda i: launch(xs[i], wl[i], tile, s), nsets, 20))
                    if best is None or t < best[0]:
                        best = (t, s)
                cells.append(f"{tile} {best[0]:6.1f} (x{best[1]})")
            line = f"{n}x{k} M {m}: " + " | ".join(cells) + f"  [{first.nbytes / 1e6:.0f} MB: route {first.nbytes / route / 1e3:.0f} GB/s]"
            lines.append(line)
            print(line, flush=True)
        del ws, tws, first
        torch.cuda.empty_cache()
    # L2-resident: one 8192 x 4096 weight (18.9 MB), no rotation, vs rotated
    w = packed_gpu(8192, 4096, "q4_0", gen); wt = tiled(w)
    x = torch.randn(32, 4096, device="cuda", generator=gen).half()
    for tile in ("w32", "w32s"):
        wl = w
        t = statistics.median(time_sets(lambda i: launch(x, wl, tile, 1), 1, 20))
        print(f"8192x4096 M 32 {tile} x1 one weight (L2-resident): {t:.1f} us", flush=True)
    t = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(x, w, None, "r32w", 1), 1, 20))
    print(f"8192x4096 M 32 r32w x1 one weight (L2-resident): {t:.1f} us")
    print("\n".join(lines))


main()
