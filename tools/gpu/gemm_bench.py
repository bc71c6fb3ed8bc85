"""Packed GEMM (M > 16, provider cuda_pack_gemm) against cuBLAS on the llama3-8b matrices, in one
device call: formats x (N, K) x M. Each row times the admitted route (ops.linear: the tile and K
split gemm_ops.gemm_shape picks) and every other tile x split (best one printed beside it), checks
the admitted output (poisoned) against a float64 reference on the first 256 rows, and times
torch.matmul on an fp16 weight of the same shape (cuBLAS, what a dequantized weight would cost).
Timing as onecat.kernels.bench: CUDA events behind a queued sleep, rotating over weight sets
> 160 MB so weights come from HBM. Table last.

    python3 tools/gpu/gemm_bench.py [--formats q4_0,q4_k] [--m 17,32] [--no-variants] [--rd-only] [--splits 1,2,4]
        [--tiled] [--tiles w64,r32w] [--shapes 28672x4096] [--glu] [--no-cublas] [--json out.json]

--tiles: time exactly these tiles (any of gemm_ops' GEMM / register-direct / wgmma tiles, experimental ones
included) x --splits instead of the default variant list; every such output is checked against the
reference and its error printed. --glu (with --tiles): the gate_up shape (N 28672) through the tiles' GLU
entries (silu(gate) * up, as the engine runs decode batches), checked against the reference's silu_and_mul.

--tiled (q4_0): also every decode tile x split on the GEMM-tiled layout (gemm_ops.tile_q4_0: each
64-row tile's K-step contiguous), output checked bit-equal to the row-major kernel's; column "tiled".
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import torch

from onecat.kernels import cuda_ops, gemm_ops, ops
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu_sets, time_sets

SHAPES = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]  # qkv, o, gate+up, down
SPLITS = (1, 2, 4, 8, 16)  # 16: beyond the route's cap of 8 (gemm_shape), to see whether more blocks per SM pay


def variants(fmt: str, m: int, k: int, rd: bool, rd_only: bool = False, splits=SPLITS):
    tiles = [] if rd and rd_only else list(gemm_ops.GEMM_TILES) if m <= 128 else ["m64", "m128"]
    if rd and m <= 64:  # the register-direct tiles (sm_80+), 32-row ones stacked two high at M > 32
        tiles += [t for t in gemm_ops.rd_tiles(fmt) if k % gemm_ops.RD_TILES[t].bk == 0]
    return [(t, s) for t in tiles for s in splits]


def variant_error(x, w, tile: str, splits: int, glu: bool, sub, want) -> float:
    """Relative error of one tile x split (its GLU entry: against the reference's silu_and_mul) on the first
    rows of the output (the plain GEMM) / of each half (the GLU: gate rows 0.., up rows N / 2..)."""
    with cuda_ops.poison_outputs():
        y = gemm_ops.gemm_launch(x, w, None, tile, splits, glu=glu)
    if not glu:
        ref = want
        got = y[:, :sub.shape[0]].double()
    else:  # want covers rows 0..255 of W = gate rows only: the reference GLU needs the same up rows
        n2 = w.shape[0] // 2
        up = w.select_rows(slice(n2, n2 + sub.shape[0])).dequantize(torch.float64)
        ref = ops.silu_and_mul(torch.cat([want.half(), (x.double() @ up.t()).half()], dim=1)).double()
        got = y[:, :sub.shape[0]].double()
    return float((got - ref).norm() / ref.norm())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="q4_0,q4_k,q6_k,awq")
    ap.add_argument("--m", default="17,32,64,128,512")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--no-variants", action="store_true", help="time only the admitted tile x split")
    ap.add_argument("--budget", type=float, default=75.0, help="seconds after which variants are skipped")
    ap.add_argument("--rd-only", action="store_true", help="variants: only the register-direct tiles (where they fit)")
    ap.add_argument("--tiled", action="store_true", help="q4_0: time the GEMM-tiled layout's kernels too")
    ap.add_argument("--splits", default=",".join(map(str, SPLITS)), help="K splits timed per tile")
    ap.add_argument("--tiles", default="", help="time exactly these tiles x --splits (checked, errors printed)")
    ap.add_argument("--shapes", default="", help="N x K list, e.g. 28672x4096,4096x14336 (default: all four)")
    ap.add_argument("--glu", action="store_true", help="gate_up (N 28672) through the GLU entries")
    ap.add_argument("--no-cublas", action="store_true", help="skip the cuBLAS fp16 baseline")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    t_start = time.time()
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    device = f"{props.name} (sm_{props.major}{props.minor}, {sms} SMs), torch {torch.__version__}"
    gen = torch.Generator("cuda").manual_seed(0)
    ms = [int(v) for v in args.m.split(",")]
    shapes = [tuple(int(v) for v in sh.split("x")) for sh in args.shapes.split(",")] if args.shapes else SHAPES
    splits = tuple(int(v) for v in args.splits.split(","))
    tiles = [t for t in args.tiles.split(",") if t]
    for t in tiles:
        if not (t in gemm_ops.RD_TILES or t in gemm_ops.WG_TILES or t in gemm_ops.GEMM_TILES):
            raise SystemExit(f"--tiles: unknown tile {t!r}")
    rows = []
    cublas: dict[tuple[int, int, int], float] = {}
    for n, k in ([] if args.no_cublas else shapes):  # cuBLAS fp16 baseline, once per shape and M
        w16 = [torch.randn(n, k, device="cuda", generator=gen).half() * k ** -0.5
               for _ in range(max(1, min(8, math.ceil(ROTATE_BYTES / (2 * n * k)))))]
        for m in ms:
            x = torch.randn(m, k, device="cuda", generator=gen).half()
            cublas[(n, k, m)] = statistics.median(time_sets(lambda i: x @ w16[i].t(), len(w16), args.iters))
        del w16
    for fmt in args.formats.split(","):
        for n, k in shapes:
            glu = args.glu and bool(tiles) and n == 28672  # (the default variants include tiles with no GLU entry)
            ws = packed_gpu_sets(n, k, fmt, gen)
            first, nsets = ws[0], len(ws)
            tws = [gemm_ops.tile_q4_0(w) for w in ws] if args.tiled and fmt == "q4_0" else None
            sub = first.select_rows(slice(0, 256))
            wsub = sub.dequantize(torch.float64)
            for m in ms:
                xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
                sel = ops.registry.select(ops.problem("linear", xs[0], ws[0])).provider.name
                with cuda_ops.poison_outputs():
                    y = ops.linear(xs[0], ws[0])
                want = xs[0].double() @ wsub.t()
                err = float((y[:, :sub.shape[0]].double() - want).norm() / want.norm())
                finite = bool(torch.isfinite(y).all())
                med = statistics.median(time_sets(lambda i: ops.linear(xs[i], ws[i]), nsets, args.iters))
                shape = gemm_ops.gemm_shape(m, n, k, *gemm_ops.gemm_slots(fmt, xs[0].device),
                                            rd=sel == "cuda_pack_gemm_rd")  # the route's tiles (not the GEMV's)
                best = (f"{shape[0]}x{shape[1]}", med)
                timed = {}
                errs = {}
                if not args.no_variants and time.time() - t_start < args.budget:
                    chosen = [(t, s) for t in tiles for s in splits] if tiles else variants(
                        fmt, m, k, gemm_ops.rd_fits(fmt, k, xs[0].device), args.rd_only, splits)
                    for tile, s in chosen:
                        if tiles or tile in gemm_ops.RD_TILES:  # not the route's kernel: check it here too
                            errs[f"{tile}x{s}"] = e = variant_error(xs[0], ws[0], tile, s, glu, sub, want)
                            if not e <= 1e-2:
                                raise SystemExit(f"{tile}x{s}{' glu' if glu else ''} on {n}x{k} M={m}: rel err {e:.3g}")
                        f = lambda i, tile=tile, s=s: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, s, glu=glu)  # noqa: E731
                        t = statistics.median(time_sets(f, nsets, args.iters))
                        timed[f"{tile}x{s}"] = t
                        if t < best[1] and not glu:
                            best = (f"{tile}x{s}", t)
                if tiles:
                    print(f"{fmt} {n}x{k} M {m}{' (GLU entries)' if glu else ''}: route {shape[0]}x{shape[1]} "
                          f"{med:.1f} us (plain); " + ", ".join(f"{v} {t:.1f} us (err {errs[v]:.1e})"
                                                               for v, t in timed.items()), flush=True)
                tbest = ("-", math.nan)
                if tws is not None:
                    for tile in gemm_ops.GEMM_TL_TILES:
                        for s in SPLITS:
                            want = gemm_ops.gemm_launch(xs[0], ws[0], None, tile, s)
                            got = gemm_ops.gemm_launch(xs[0], tws[0], None, tile, s, tiled=True)
                            if not torch.equal(got, want):
                                raise SystemExit(f"tiled {tile}x{s} differs from row-major on {n}x{k} M={m}")
                            f = lambda i, tile=tile, s=s: gemm_ops.gemm_launch(xs[i], tws[i], None, tile, s, True)  # noqa: E731
                            t = statistics.median(time_sets(f, nsets, args.iters))
                            timed[f"tl_{tile}x{s}"] = t
                            if not t >= tbest[1]:
                                tbest = (f"{tile}x{s}", t)
                cb = cublas.get((n, k, m), math.nan)
                flops = 2 * m * n * k
                rows.append(dict(format=fmt, n=n, k=k, m=m, provider=sel, shape=f"{shape[0]}x{shape[1]}", us=med,
                                 weight_bytes=first.nbytes, gbps=first.nbytes / med / 1e3, tflops=flops / med / 1e6,
                                 cublas_us=cb, cublas_tflops=flops / cb / 1e6, vs_cublas=cb / med, best=best[0],
                                 best_us=best[1], tiled=tbest[0], tiled_us=tbest[1], variants=timed, variant_errors=errs,
                                 glu=glu, rel_err=err, finite=finite))
                print({k_: v for k_, v in rows[-1].items() if k_ not in ("variants", "variant_errors")}, flush=True)
                del xs
            del ws, tws, first, sub, wsub
            torch.cuda.empty_cache()
    resident = {f: gemm_ops.gemm_slots(f, torch.device("cuda"))[1] for f in args.formats.split(",")}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "resident_blocks_per_sm": resident, "rows": rows}, f, indent=1)
    print()
    print(f"device: {device}; {time.time() - t_start:.0f} s; resident blocks per SM {resident}")
    print("us: median device time per call (CUDA events behind a queued sleep, weights rotated > 160 MB); "
          "GB/s: packed weight bytes / us; TFLOP/s: 2MNK / us; cuBLAS: torch fp16 matmul on an [N, K] fp16 weight; "
          "x cuBLAS = cuBLAS us / ours (> 1: faster); route = tile x K-splits gemm_ops.gemm_shape picks; "
          "best = fastest tile x splits timed; tiled = fastest on the GEMM-tiled q4_0 layout (--tiled)")
    head = (f"{'fmt':<5} {'N x K':<11} {'M':>4} {'provider':<15} {'route':<8} {'us':>8} {'GB/s':>6} {'TFLOP/s':>7} "
            f"{'cuBLAS us':>9} {'TFLOP/s':>7} {'x cuBLAS':>8} {'best':<8} {'best us':>8} {'tiled':<8} {'tl us':>7} "
            f"{'rel err':>8}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['format']:<5} {str(r['n']) + 'x' + str(r['k']):<11} {r['m']:>4} {r['provider']:<15} {r['shape']:<8} "
              f"{r['us']:>8.1f} {r['gbps']:>6.0f} {r['tflops']:>7.1f} {r['cublas_us']:>9.1f} "
              f"{r['cublas_tflops']:>7.1f} "
              f"{r['vs_cublas']:>8.2f} {r['best']:<8} {r['best_us']:>8.1f} {r['tiled']:<8} {r['tiled_us']:>7.1f} "
              f"{r['rel_err']:>8.1e}"
              f"{'' if r['finite'] else ' NaN!'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
