"""What x's L2 traffic costs the wgmma GEMM tiles at decode batches (#7 G3), in one device call.

Every w64 / w64b2 block stages its 64 rows of x whole (64 x K_split x 2 bytes) from L2: at M 64 gate_up's 224
blocks read 117 MB of x beside 66 MB of W. The _xl1 entries (csrc/gemm_wg.cu XL1: every step stages the split's
first step's x, so after it x comes from L1) keep everything else: the time they save bounds what sharing x
between blocks (cluster multicast, wider tiles) could gain. Their outputs are wrong by design.

Per case, the route's kernel and its _xl1 entry alternate (rounds), each timed as gemm_bench times (CUDA events
behind a queued sleep, weight sets rotated past 160 MB so W comes from HBM); medians in us, table last.

    python3 tools/gpu/gemm_xl1.py [--m 64,48] [--iters 30] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from onecat.kernels import gemm_ops
from onecat.kernels.bench import packed_gpu_sets, time_sets

# llama3-8b's matrices on the tiles and splits the route gives them at M 64 (H100 / H200, s43-s46)
CASES = [("gate_up", 28672, 4096, "w64b2", 1), ("down", 4096, 14336, "w64", 4),
         ("qkv", 6144, 4096, "w64", 2), ("o", 4096, 4096, "w64", 4)]


def timed(tile: str, kern, xs, ws, splits: int, iters: int) -> float:
    plain = gemm_ops._WG[tile]
    gemm_ops._WG[tile] = kern
    try:
        return statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, splits),
                                           len(ws), iters))
    finally:
        gemm_ops._WG[tile] = plain


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="64")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    rows = []
    for name, n, k, tile, splits in CASES:
        ws = packed_gpu_sets(n, k, "q4_0", gen)
        first, nsets = ws[0], len(ws)
        for m in (int(v) for v in args.m.split(",")):
            xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
            route, xl1 = [], []
            for _ in range(args.rounds):
                route.append(timed(tile, gemm_ops._WG[tile], xs, ws, splits, args.iters))
                xl1.append(timed(tile, gemm_ops.WG_XL1[tile], xs, ws, splits, args.iters))
            blocks = -(-n // 128) * splits
            x_mb = blocks * 64 * (k // splits) * 2 / 1e6  # every block stages 64 rows (rows past M re-read M - 1)
            r, x = statistics.median(route), statistics.median(xl1)
            rows.append((name, f"{n}x{k}", m, f"{tile}x{splits}", r, x, r - x, x_mb, first.nbytes / 1e6))
            print(f"{name} M {m}: route {route} us, xl1 {xl1} us", flush=True)
    print(f"\ndevice: {props.name} ({props.multi_processor_count} SMs); rounds {args.rounds} x {args.iters} calls, "
          "route and xl1 alternated; us = median of the rounds' medians")
    head = f"{'matrix':8} {'N x K':12} {'M':>3} {'tile':8} {'route us':>9} {'xl1 us':>8} {'saved':>7} {'x MB':>7} {'W MB':>6}"
    print(head + "\n" + "-" * len(head))
    for name, nk, m, tile, r, x, d, xmb, wmb in rows:
        print(f"{name:8} {nk:12} {m:>3} {tile:8} {r:9.1f} {x:8.1f} {d:7.1f} {xmb:7.1f} {wmb:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
