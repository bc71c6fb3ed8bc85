"""M = 1 packed GEMVs the way decode runs them: a chain of dependent GEMVs (each one's x is the
previous one's y) captured in one CUDA graph and replayed, so launches are not on the clock and,
on sm_90, each GEMV starts under programmatic dependent launch while the one before it finishes
(its weights load before it waits). Weights differ per link and the chain holds > 160 MB, so they
come from HBM (the H200's L2 is 60 MB). Reports the chain's weight bytes per second against the
copy bandwidth of the same run: the efficiency a decode step's projections can have, which an
isolated kernel timed alone (onecat.kernels.bench --gemv) understates by its ramp.

    python3 tools/gpu/gemv_chain.py [--formats q4_0,q4_k,awq] [--chains decode,square,4096x14336,glu:28672x4096]
                                    [--variants auto,r4u1k2n,...] [--pdl 1,0] [--json out.json]

Chains (llama3-8b matrices, N x K): square = 32 x 4096x4096; updown = 10 x (14336x4096 then
4096x14336); layer = 8 x (6144x4096 qkv, 4096x4096 o, 28672x4096 gate_up, 4096x14336 down), the
next x being the first K outputs of the previous y; decode = layer with qkv and gate_up through the
normed-input kernels (gate_up with the GLU), the order the decode step runs them; NxK = one matrix shape repeated past 300 MB
(x a fixed vector: each link still waits on the one before it); rn:NxK / glu:NxK the same through
the normed-input kernels (linear_fused_ops: RMSNorm with the residual in front, the GLU behind), as
the decode layer's qkv and gate_up ran before s48 (linear_fused_ops.NORM_WEIGHT_FIRST off); rngp:NxK / glugp:NxK
through the norm-weight-first entries the route takes where linear_fused_ops.GP_SHAPES holds the shape. `auto` is the shape
cuda_ops.gemv_m1_shape picks per matrix; a named variant forces that kernel shape on every link (normed chains:
where instantiated).
(Also timed here and removed: a one-launch persistent chain with grid barriers (s10, kernel at c6f95c8; s42's form
with 1 x 1024 / 2 x 512 threads an SM and each warp's prefetch stream kept across the barriers lost too, 49-58% of
copy on the layer chain against the route's 77.5% on an H100, 5.2 us a link against 1.97 on smollm2's small links:
benchmarks/results/h100-2026-12-06-s42),
and the weights pulled into L2 a few links ahead by a parallel graph branch (s11: 42-49% of copy on
the layer chain against 66% without; kernel at efbfb48): benchmarks/results/h200-2026-11-30-s10, -s11.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch

from onecat.kernels import cuda_ops, driver, linear_fused_ops
from onecat.kernels.bench import copy_bandwidth, packed_gpu, time_graph

LAYER = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]  # qkv, o, gate_up, down
CHAINS = {  # name -> [(kind, N, K)]: plain GEMVs, or the normed-input kernels (rn, glu)
    "square": [("plain", 4096, 4096)] * 32,
    "updown": [("plain", 14336, 4096), ("plain", 4096, 14336)] * 10,
    "layer": [("plain", n, k) for n, k in LAYER] * 8,
    # the decode layer's projections in order, as its route runs them (qkv and gate_up with the norm
    # in front, gate_up with the GLU; no attention, no rotary epilogue): a shape that wins in a chain
    # of its own can lose behind a different kernel (s9: q4_0's 16-warp qkv behind the down projection)
    "decode": [(kind, n, k) for kind, (n, k) in zip(("rn", "plain", "glu", "plain"), LAYER)] * 8,
}
NORMED = ("rn", "glu", "rngp", "glugp")  # link kinds through the normed-input kernels


def variant_shape(name: str) -> tuple[int, int, int, str] | None:
    """'r4u1k2n' -> (4, 1, 2, 'n'); 'auto' -> None (the provider's choice per matrix)."""
    if name == "auto":
        return None
    for shape in cuda_ops.GEMV_M1_SHAPES + tuple(s for v in linear_fused_ops.NORM_SHAPES.values() for s in v):
        if name == "r{}u{}k{}{}".format(*shape):
            return shape
    raise SystemExit(f"unknown variant {name!r}: auto or one of "
                     + ", ".join("r{}u{}k{}{}".format(*s) for s in cuda_ops.GEMV_M1_SHAPES))


def chain_links(name: str) -> list[tuple[str, int, int]]:
    """The links (kind: plain / rn / glu, N, K) of a --chains entry."""
    if name in CHAINS:
        return CHAINS[name]
    kind, _, nk = name.rpartition(":")
    if (kind or "plain") not in ("plain", *NORMED):
        raise SystemExit(f"unknown chain kind {kind!r} in {name!r}: plain or one of {', '.join(NORMED)}")
    n, k = (int(v) for v in nk.split("x"))
    per = n * k // 2  # ~bytes of a 4-bit matrix
    return [(kind or "plain", n, k)] * max(8, -(-300_000_000 // per))


def launch(w, x, out, shape) -> None:
    cuda_ops.gemv_m1_launch(out, x, w, shape or cuda_ops.gemv_m1_shape(w.kind, *w.shape))


def chain_once(ws, kinds, x0, outs, shape, chained=True, norm=None) -> None:
    """One pass over the links: a plain link's x is the previous output's first K values (x0 where
    not `chained`); a normed link takes x0 and the residual (its K is the model width)."""
    x = x0
    for w, kind, out in zip(ws, kinds, outs):
        if kind == "plain":
            launch(w, x[:, :w.shape[1]], out, shape)
        else:  # the normed-input kernel the decode layer runs (shape forced through gemv_m1_shape); ..gp: its
            # norm-weight-first entry (linear_fused_ops.NORM_WEIGHT_FIRST) where GP_SHAPES has the shape
            first, linear_fused_ops.NORM_WEIGHT_FIRST = linear_fused_ops.NORM_WEIGHT_FIRST, kind.endswith("gp")
            try:
                out, _ = linear_fused_ops.rms_norm_linear_cuda(x0, norm[0], 1e-5, w, residual=norm[1],
                                                               act="silu_and_mul" if kind.startswith("glu") else None)
            finally:
                linear_fused_ops.NORM_WEIGHT_FIRST = first
        x = out if chained else x0


def rel_err(w, x, shape) -> float:
    """The first link's first 256 outputs against a float64 reference."""
    out = torch.empty(1, w.shape[0], dtype=torch.float16, device="cuda")
    launch(w, x, out, shape)
    sub = w.select_rows(slice(0, 256))
    want = x.double().cpu() @ sub.dequantize(torch.float64).cpu().t()
    return float((out[:, :256].double().cpu() - want).norm() / want.norm())


def time_chain(run, pdl: bool, replays: int) -> list[float]:
    """bench.time_graph of one pass over the chain, with programmatic dependent launch on or off."""
    os.environ["ONECAT_PDL"] = "1" if pdl else "0"
    driver.pdl_enabled.cache_clear()  # read once per process otherwise
    try:
        return time_graph(run, replays)
    finally:
        os.environ.pop("ONECAT_PDL", None)
        driver.pdl_enabled.cache_clear()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="q4_0,q4_k,awq")
    ap.add_argument("--chains", default="square,updown,layer")
    ap.add_argument("--variants", default="auto")
    ap.add_argument("--pdl", default="1,0")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    gen = torch.Generator("cuda").manual_seed(0)
    copy0 = copy_bandwidth()
    rows = []
    for fmt in args.formats.split(","):
        for cname in args.chains.split(","):
            links = chain_links(cname)
            kinds = [kind for kind, _, _ in links]
            ws = [packed_gpu(n, k, fmt, gen) for _, n, k in links]
            outs = [torch.empty(1, n, dtype=torch.float16, device="cuda") for _, n, _ in links]
            k0 = links[0][2]
            x0 = torch.randn(1, k0, device="cuda", generator=gen).half()
            norm = (torch.rand(k0, device="cuda", generator=gen).half() + 0.5,
                    torch.randn(1, k0, device="cuda", generator=gen).half())
            moved = sum(w.nbytes + 2 * w.shape[0] + 2 * w.shape[1] for w in ws)
            for vname in args.variants.split(","):
                shape = variant_shape(vname)
                if shape is not None and len(set(kinds)) > 1:
                    print(f"skip {fmt} {cname} {vname}: a mixed chain runs each link's own choice (auto)")
                    continue
                if "plain" in kinds and shape is not None and shape not in cuda_ops.GEMV_M1_SHAPES:
                    print(f"skip {fmt} {cname} {vname}: no plain instance")
                    continue
                if set(NORMED) & set(kinds):
                    if shape is not None and shape not in linear_fused_ops.NORM_SHAPES[fmt]:
                        print(f"skip {fmt} {cname} {vname}: no normed-input instance")
                        continue
                    linear_fused_ops.gemv_m1_shape = (lambda f, n, k, normed=False, s=shape: s) if shape else cuda_ops.gemv_m1_shape
                err = rel_err(ws[0], x0, shape) if kinds[0] == "plain" else float("nan")
                for pdl in [p == "1" for p in args.pdl.split(",")]:
                    t = time_chain(lambda: chain_once(ws, kinds, x0, outs, shape, cname in CHAINS, norm), pdl,
                                   args.replays)
                    rows.append(dict(format=fmt, chain=cname, links=len(links), variant=vname, pdl=pdl,
                                     bytes=moved, median_us=statistics.median(t), min_us=min(t), max_us=max(t),
                                     rel_err=err))
            linear_fused_ops.gemv_m1_shape = cuda_ops.gemv_m1_shape
            del ws, outs
            torch.cuda.empty_cache()
    copy1 = copy_bandwidth()
    copy = (copy0 + copy1) / 2
    print(f"GPU {torch.cuda.get_device_name(0)}; copy bandwidth {copy0:.0f} / {copy1:.0f} GB/s (before / after), "
          f"%copy uses {copy:.0f}")
    print("chain of dependent M = 1 GEMVs in one CUDA graph, weights distinct per link (from HBM); "
          f"median/min/max over {args.replays} replays; us/link = median / links; MEASURED")
    print(f"{'format':<6} {'chain':<15} {'links':>5} {'variant':>10} {'pdl':>3} {'MB':>7} {'med us':>8} {'min us':>8} "
          f"{'max us':>8} {'us/link':>7} {'GB/s':>6} {'%copy':>6} {'rel err':>8}")
    for row in rows:
        row["gbps"] = row["bytes"] / row["median_us"] / 1e3
        row["frac_copy"] = row["gbps"] / copy
        pdl = int(row["pdl"])
        print(f"{row['format']:<6} {row['chain']:<15} {row['links']:>5} {row['variant']:>10} {pdl:>3} "
              f"{row['bytes'] / 1e6:>7.1f} {row['median_us']:>8.1f} {row['min_us']:>8.1f} {row['max_us']:>8.1f} "
              f"{row['median_us'] / row['links']:>7.2f} {row['gbps']:>6.0f} {100 * row['frac_copy']:>5.1f}% "
              f"{row['rel_err']:>8.1e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_gbps": copy, "gpu": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
