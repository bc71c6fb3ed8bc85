"""s30: which split GEMM grids fit as clusters (cuOccupancyMaxActiveClusters), and cluster vs counter timing for
llama3-8b q4_0 matrices at M 32 / 64 over several splits (time_sets, weights rotated, median of 30 x 2 rounds)."""
from __future__ import annotations

import statistics

import torch

from onecat.kernels import gemm_ops
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets


def main() -> None:
    dev = torch.device("cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    shapes = {"qkv": (6144, 4096), "o": (4096, 4096), "down": (4096, 14336)}
    print(f"{'matrix':6} {'M':>3} {'tile':>6} {'S':>2} {'CTAs':>5} {'max clusters':>12} {'fits':>5} {'counter us':>11} {'cluster us':>11} {'change':>7}")
    for m in (32,):
        for name, (n, k) in shapes.items():
            first = packed_gpu(n, k, "q4_0", gen)
            nsets = max(1, min(16, -(-ROTATE_BYTES // first.nbytes)))
            ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
            xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
            for tile in ("r32", "r32w"):
                t = gemm_ops.RD_TILES[tile]
                for s in (2, 3, 4, 6, 8):
                    grid = (-(-n // t.bn), -(-m // t.bm), s)
                    kern = gemm_ops._RD[("q4_0", tile)]
                    mac = kern.max_active_clusters(grid, (t.threads, 1, 1), s)
                    ctas = grid[0] * grid[1] * s
                    tm = {False: [], True: []}
                    for _ in range(2):
                        for cl in (False, True):
                            tm[cl] += time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, s, cluster=cl),
                                                nsets, 30)
                    a, b = statistics.median(tm[False]), statistics.median(tm[True])
                    print(f"{name:6} {m:3} {tile:>6} {s:2} {ctas:5} {mac:12} {str(mac * s >= ctas):>5} {a:11.2f} {b:11.2f} "
                          f"{100 * (b / a - 1):+6.1f}%", flush=True)
            del ws, xs


if __name__ == "__main__":
    main()
