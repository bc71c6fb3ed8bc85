"""Decode batches' gate_up as the engine runs it (rms_norm_linear with silu_and_mul at 17..64 rows, q4_0
on sm_80+): the register-direct GEMM with the GLU epilogue (gemm_launch(glu=True)) against the GEMM then
activation.cu's silu_and_mul (the route before it). Each variant: a chain of LINKS distinct 28672 x 4096
q4_0 weights (> the L2: from HBM), x fixed, one CUDA graph (PDL on sm_90), median / min / max over the
replays, us per link; outputs compared bit for bit.

    python3 tools/gpu/glu_bench.py [--m 32,64] [--n 28672] [--k 4096] [--links 8] [--replays 30]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from onecat.kernels import gemm_ops, ops
from onecat.kernels.bench import packed_gpu, time_graph


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="32,64")
    ap.add_argument("--n", type=int, default=28672)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--links", type=int, default=8)
    ap.add_argument("--replays", type=int, default=30)
    args = ap.parse_args()
    gen = torch.Generator("cuda").manual_seed(0)
    ws = [packed_gpu(args.n, args.k, "q4_0", gen) for _ in range(args.links)]
    print(f"GPU {torch.cuda.get_device_name(0)}; gate_up {args.n} x {args.k} q4_0, {args.links} distinct weights "
          f"per graph ({sum(w.nbytes for w in ws) / 1e6:.0f} MB), x fixed, CUDA graph (PDL on sm_90), "
          f"median (min-max) of {args.replays} replays, us per link; MEASURED")
    print(f"{'M':>3} {'tile x splits':>14} {'gemm + silu_and_mul':>22} {'GLU epilogue':>22} {'saved':>7} {'bits':>5}")
    for m in (int(v) for v in args.m.split(",")):
        x = torch.randn(m, args.k, device="cuda", generator=gen).half()
        tile, splits = gemm_ops.gemm_shape(m, args.n, args.k, *gemm_ops.gemm_slots("q4_0", x.device), rd=True)
        same = torch.equal(gemm_ops.linear_packed_gemm_rd(x, ws[0], glu=True),
                           ops.silu_and_mul(gemm_ops.linear_packed_gemm_rd(x, ws[0])))
        rows = []
        for glu in (False, True):
            def run(glu=glu):
                for w in ws:
                    if glu:
                        gemm_ops.linear_packed_gemm_rd(x, w, glu=True)
                    else:
                        ops.silu_and_mul(gemm_ops.linear_packed_gemm_rd(x, w))
            t = [v / args.links for v in time_graph(run, args.replays)]
            rows.append((statistics.median(t), min(t), max(t)))
        (a, a0, a1), (b, b0, b1) = rows
        unfused, fused = f"{a:.2f} ({a0:.2f}-{a1:.2f})", f"{b:.2f} ({b0:.2f}-{b1:.2f})"
        print(f"{m:>3} {f'{tile} x{splits}':>14} {unfused:>22} {fused:>22} {a - b:>7.2f} {'equal' if same else 'DIFF':>5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
