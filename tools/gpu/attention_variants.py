"""Paged decode attention: the route's kernels against an experimental variant, same shapes, same
run (copy bandwidth measured before and after). The timing and the check against the float reference
are the #5 table's (decode_attention_row.decode_row, as attention_check.sh runs it), with the variant
as the function timed.

    python3 tools/gpu/attention_variants.py [--variants "",w2] [--json out.json]

Variants: "" = the route's kernels (attention_ops.paged_attention), "w2" = head dim 128 in paired
warps splitting the output columns (3 blocks per SM instead of 2; attention_decode.cu).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch

from decode_attention_row import decode_row
from onecat.kernels import attention_ops
from onecat.kernels.bench import copy_bandwidth

SHAPES = [("f16", 4, 8192, 32, 8, 128), ("f16", 4, 16384, 32, 8, 128), ("f16", 16, 8192, 32, 8, 128),
          ("e4m3", 4, 8192, 32, 8, 128), ("e4m3", 4, 16384, 32, 8, 128), ("e5m2", 16, 8192, 32, 8, 128)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default=",w2")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    copy0 = copy_bandwidth()
    rows = []
    for shape in SHAPES:
        for v in args.variants.split(","):
            r = decode_row(*shape, attend=functools.partial(attention_ops.paged_attention, variant=v))
            r["variant"] = v or "route"
            rows.append(r)
    copy = (copy0 + copy_bandwidth()) / 2
    print(f"GPU {torch.cuda.get_device_name(0)}; copy {copy:.0f} GB/s (mean of before / after); MEASURED, "
          "CUDA events behind a queued sleep, KV sets rotated > 200 MB, median of 30")
    print(f"{'kv':<5} {'B':>3} {'ctx':>6} {'heads':>6} {'D':>4} {'variant':>7} {'us':>8} {'min':>8} {'max':>8} "
          f"{'GB/s':>6} {'%copy':>6} {'rel err':>8}")
    for r in rows:
        r["frac_copy"] = r["gbs"] / copy
        print(f"{r['kv']:<5} {r['batch']:>3} {r['ctx']:>6} {r['heads']:>6} {r['d']:>4} {r['variant']:>7} "
              f"{r['us']:>8.1f} {r['us_min']:>8.1f} {r['us_max']:>8.1f} {r['gbs']:>6.0f} "
              f"{100 * r['frac_copy']:>5.1f}% {r['rel_err']:>8.1e}")
    if args.json:
        Path(args.json).write_text(json.dumps({"copy_gbps": copy, "rows": rows}, indent=1))
    bad = [r for r in rows if not r["rel_err"] < 2e-3]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
