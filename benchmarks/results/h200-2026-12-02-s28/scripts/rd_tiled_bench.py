"""The register-direct q4_0 GEMM's A/B forms against the route's kernel, on llama3-8b's matrices at decode batches:
tl = the same tile on tile_q4_0's layout (gemm_rd_q4_0_<tile>_tl: each 64 rows' K-step 4 KB contiguous), caS =
W, scales and x through S cp.async stages (gemm_launch(ca=S)), caStl both;
the route's tile and split (gemm_ops.gemm_shape with rd=True; 32-row tiles two high past 32 rows) and the
other splits given, gate_up through the GLU entries, down / qkv / o plain. Every tiled output is checked
bit-equal to the row-major one before it is timed. Timing as tools/gpu/gemm_bench.py (onecat.kernels.bench
time_sets: CUDA events behind a queued sleep, weight sets rotated past ROTATE_BYTES so W comes from HBM,
median of --iters); where the route takes the wgmma tile (w64: q4_0 past 32 rows on capability 9.0) its time
is printed beside, row-major only.

    python tools/gpu/rd_tiled_bench.py [--m 32,64] [--splits 1,2,4,8] [--iters 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics

import torch

from onecat.kernels import cuda_ops, gemm_ops
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets

FORMS_CA = (13, 14, 3)
SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="32,64")
    ap.add_argument("--splits", default="1,2,4,8")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    dev = torch.device("cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    sms, res = gemm_ops.gemm_slots("q4_0", dev)
    rows = []
    for name, (n, k) in SHAPES.items():
        glu = name == "gate_up"
        first = packed_gpu(n, k, "q4_0", gen)
        nsets = max(1, min(16, math.ceil(ROTATE_BYTES / first.nbytes)))
        ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
        tws = [gemm_ops.tile_q4_0(w) for w in ws]
        for m in map(int, args.m.split(",")):
            xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
            route = gemm_ops.gemm_shape(m, n, k, sms, res, rd=True)
            rd_tile, rd_split = gemm_ops.gemm_shape(m, n, k, sms, {t: v for t, v in res.items() if t != "w64"}, rd=True)
            wg_us = math.nan
            if route[0] == "w64":
                wg_us = statistics.median(time_sets(
                    lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, "w64", route[1], glu=glu), nsets, args.iters))
            splits = sorted({rd_split, *map(int, args.splits.split(","))})
            forms = [("row", {}), ("tl", {"tiled": True})]
            if rd_tile in gemm_ops.RD_CA_TILES:
                forms += [(f"{'cw' if c > 10 else 'ca'}{c % 10}{'tl' if t else ''}", {"ca": c, "tiled": t})
                          for c in FORMS_CA for t in (False, True)]
            for s in splits:
                want = gemm_ops.gemm_launch(xs[0], ws[0], None, rd_tile, s, glu=glu)
                times = {}
                for form, kw in forms:
                    wts = tws if kw.get("tiled") else ws
                    with cuda_ops.poison_outputs():
                        got = gemm_ops.gemm_launch(xs[0], wts[0], None, rd_tile, s, glu=glu, **kw)
                    if not torch.equal(got, want):
                        bad = (got != want).sum().item()
                        raise SystemExit(f"{name} M {m} {rd_tile}x{s} {form}: {bad} outputs differ from the route's kernel")
                    times[form] = statistics.median(time_sets(
                        lambda i, s=s, kw=kw, wts=wts: gemm_ops.gemm_launch(xs[i], wts[i], None, rd_tile, s, glu=glu, **kw),
                        nsets, args.iters))
                rows.append(dict(matrix=name, n=n, k=k, m=m, glu=glu, tile=rd_tile, splits=s, route_split=s == rd_split,
                                 route=f"{route[0]}x{route[1]}", w64_us=wg_us, us=times, weight_bytes=first.nbytes))
                print(f"{name:8} M {m:3} {rd_tile}x{s}{'*' if s == rd_split else ' '} " + "  ".join(
                    f"{f} {t:6.1f}" for f, t in times.items()) + f"  us (row {first.nbytes / times['row'] / 1e3:.0f} GB/s, "
                      f"best {min(times, key=times.get)} {first.nbytes / min(times.values()) / 1e3:.0f} GB/s)" +
                      (f"  [route {route[0]}x{route[1]}: {wg_us:.1f} us]" if route[0] == "w64" else ""), flush=True)
            del xs
        del ws, tws, first
        torch.cuda.empty_cache()
    print("(* = the split gemm_shape picks for the register-direct tile; every form's output bit-equal to the route's kernel)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
