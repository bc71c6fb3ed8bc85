"""M = 1 packed GEMV: every warp-per-rows shape (R rows per warp, U chunks in flight per lane and
row; csrc/gemv_packed.cu gemv_r_*) on the llama3-8b matrices, in one device call. Checks each
variant against a float64 reference on the first 256 rows, times it like onecat.kernels.bench
(CUDA events after a queued sleep, rotating over weight sets > 160 MB), and prints the best shape
per format last (what cuda_ops.gemv_m1_shape should pick).

    python3 tools/gpu/gemv_variants.py [--formats q4_0,q4_k,awq] [--shapes smollm2] [--json out.json]

--shapes smollm2: SmolLM2-135M's matrices instead (K = 576 / 1536: fewer chunks per row than lanes).
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from onecat.kernels import cuda_ops
from onecat.kernels.bench import GEMV_FORMATS, LLAMA3_8B_GEMV, copy_bandwidth, packed_gpu_sets, time_sets

SMOLLM2_GEMV = [(960, 576), (3072, 576), (576, 576), (576, 1536), (49152, 576)]  # qkv, gate_up, o, down, LM head


def run(w, x, shape):
    out = torch.empty(1, w.shape[0], dtype=torch.float16, device="cuda")
    cuda_ops.gemv_m1_launch(out, x, w, shape)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default=",".join(GEMV_FORMATS))
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--json", default="")
    ap.add_argument("--shapes", choices=["llama3-8b", "smollm2"], default="llama3-8b")
    args = ap.parse_args()
    shapes = LLAMA3_8B_GEMV if args.shapes == "llama3-8b" else SMOLLM2_GEMV
    gen = torch.Generator("cuda").manual_seed(0)
    copy0 = copy_bandwidth()
    rows = []
    for fmt in args.formats.split(","):
        for n, k in shapes:
            ws = packed_gpu_sets(n, k, fmt, gen, max_sets=32)
            first, nsets = ws[0], len(ws)
            xs = [torch.randn(1, k, device="cuda", generator=gen).half() for _ in range(nsets)]
            sub = ws[0].select_rows(slice(0, 256))
            want = xs[0].double().cpu() @ sub.dequantize(torch.float64).cpu().t()
            for shape in cuda_ops.GEMV_M1_SHAPES:
                r, u, ks, sfx = shape
                y = run(ws[0], xs[0], shape)
                got = y[:, :sub.shape[0]].double().cpu()
                err = float((got - want).norm() / want.norm())
                t = time_sets(lambda i: run(ws[i], xs[i], shape), nsets, args.iters)
                moved = first.nbytes + 2 * k + 2 * n
                rows.append(dict(format=fmt, n=n, k=k, r=r, u=u, variant=f"r{r}u{u}k{ks}{sfx}", median_us=statistics.median(t), min_us=min(t),
                                 max_us=max(t), bytes=moved, rel_err=err, finite=bool(torch.isfinite(y).all())))
            del ws, xs, first
            torch.cuda.empty_cache()
    copy1 = copy_bandwidth()
    copy = (copy0 + copy1) / 2
    print(f"copy bandwidth {copy0:.0f} / {copy1:.0f} GB/s (before / after); %copy uses {copy:.0f}")
    print(f"{'format':<6} {'N x K':<13} {'variant':>9} {'med us':>8} {'min us':>8} {'max us':>8} {'%copy':>6} {'rel err':>8}")
    for row in rows:
        row["frac_copy"] = row["bytes"] / row["median_us"] / 1e3 / copy
        print(f"{row['format']:<6} {str(row['n']) + 'x' + str(row['k']):<13} {row['variant']:>9} "
              f"{row['median_us']:>8.1f} {row['min_us']:>8.1f} {row['max_us']:>8.1f} {100 * row['frac_copy']:>5.0f}% "
              f"{row['rel_err']:>8.1e}{'' if row['finite'] else ' NaN!'}")
    print("best (R, U) per format by total median time over the shapes:")
    for fmt in args.formats.split(","):
        tot = {}
        for row in rows:
            if row["format"] == fmt:
                tot[row["variant"]] = tot.get(row["variant"], 0.0) + row["median_us"]
        best = min(tot, key=tot.get)
        pcts = [f"{100 * row['frac_copy']:.0f}%" for row in rows if row["format"] == fmt and row["variant"] == best]
        print(f"  {fmt}: {best} total {tot[best]:.1f} us; %copy per shape {' '.join(pcts)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_gbps": copy, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
