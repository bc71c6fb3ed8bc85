"""Paged decode attention, the register-direct kernel (cuda_decode_rd, sm_80+; its 4-warp and one-warp
block forms) against the Volta kernel (cuda_split_kv) on #5's decode rows: batch >= 4, contexts
>= 8K, FP16 / E4M3 / E5M2 KV, 32/8 heads D 128 (and smollm2's 9/3 D 64, the batch-32 / 64 engine
shapes at 512 / 1024 keys). Each row: decode_attention_row.decode_row (KV sets rotated past
the L2, CUDA events behind a queued sleep, median / min / max of 30, error against the float
reference), % of the device copy bandwidth measured before and after in the same run.

    python tools/gpu/decode_rd_ab.py [--json OUT.json] [--graphed] [--kernels rd,rd_w1] [--rows 0,5]

A kernel `rd_<form>p<N>` (e.g. rd_w4p2) forces the form and plans its partitions for N resident blocks
per SM instead of the form's own count (split_kv_plan's one wave): fewer partitions than the SMs hold
(N below it) leave slots for the next call's blocks; more (N above it) queue a second wave behind the
first that fills the slowest blocks' tail (s26, benchmarks/results/h200-2026-12-01-s26: every such plan
lost 9-45% to the route's on #5's and G3's rows). `rd_<form>m<K>` (or `rd_<form>p<N>m<K>`) plans partitions of
at least K keys instead of attention_ops.MIN_PART: fewer partials to merge where the keys are few (batch 1).
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys

import torch

from onecat.kernels import attention_ops
from onecat.kernels.bench import copy_bandwidth

sys.path.insert(0, "tools/gpu")
from decode_attention_row import CHAIN, decode_row  # noqa: E402

ROWS = [(kv, b, ctx, 32, 8, 128) for kv in ("f16", "e4m3", "e5m2") for b, ctx in ((4, 8192), (4, 16384), (4, 32768),
                                                                                 (16, 8192), (8, 16384))]
ROWS += [("f16", 4, 8192, 9, 3, 64), ("e4m3", 4, 8192, 9, 3, 64), ("f16", 64, 512, 32, 8, 128),
         ("f16", 32, 512, 32, 8, 128), ("f16", 32, 1024, 32, 8, 128), ("f16", 1, 512, 32, 8, 128),
         ("f16", 64, 1024, 32, 8, 128), ("f16", 128, 512, 32, 8, 128), ("e4m3", 64, 512, 32, 8, 128),
         ("f16", 1, 1024, 32, 8, 128), ("f16", 2, 512, 32, 8, 128), ("e4m3", 1, 512, 32, 8, 128),
         ("f16", 4, 512, 32, 8, 128), ("f16", 1, 4096, 32, 8, 128),
         ("f16", 8, 16384, 32, 4, 256), ("e4m3", 8, 16384, 32, 4, 256), ("e5m2", 8, 16384, 32, 4, 256),
         ("f16", 4, 8192, 16, 8, 256), ("e4m3", 4, 8192, 16, 8, 256), ("f16", 1, 512, 16, 8, 256)]
# rd: the route (attention_ops.decode_rd_form's pick); rd_w4 / rd_w1 / rd_deep force one form
KERNELS = {"volta": attention_ops.paged_attention, "rd": attention_ops.paged_attention_rd,
           **{f"rd_{f}": functools.partial(attention_ops.paged_attention_rd, form=f) for f in ("w4", "w1", "deep")}}


def planned(form: str, per_sm: int | None, min_part: int | None = None):
    """paged_attention_rd with `form` forced and its split planned for `per_sm` blocks per SM (None: the form's
    own) with partitions of at least `min_part` keys (None: MIN_PART)."""
    def attend(query, key_cache, *rest, **kw):
        key = (form, query.shape[-1])
        saved, saved_min = attention_ops.DECODE_RD_FORMS[key], attention_ops.MIN_PART
        if per_sm is not None:
            attention_ops.DECODE_RD_FORMS[key] = (*saved[:2], per_sm)
        if min_part is not None:
            attention_ops.MIN_PART = min_part
        try:
            return attention_ops.paged_attention_rd(query, key_cache, *rest, form=form, **kw)
        finally:
            attention_ops.DECODE_RD_FORMS[key], attention_ops.MIN_PART = saved, saved_min
    return attend


def kernel(name: str):
    if name in KERNELS:
        return KERNELS[name]
    m = re.fullmatch(r"rd_(w4|w1|deep)(?:p(\d+))?(?:m(\d+))?", name)
    if not m or not (m.group(2) or m.group(3)):
        raise SystemExit(f"unknown kernel {name!r}: one of {', '.join(KERNELS)} or rd_<w4|w1|deep>[p<N>][m<K>]")
    return planned(m.group(1), int(m.group(2)) if m.group(2) else None, int(m.group(3)) if m.group(3) else None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    ap.add_argument("--graphed", action="store_true", help="time each row as a decode graph runs it (decode_row graphed)")
    ap.add_argument("--kernels", default="volta,rd,rd_w1", help=f"comma-separated, of {','.join(KERNELS)} or rd_<form>[p<N>][m<K>]")
    ap.add_argument("--rows", default="", help="comma-separated row indices (default all)")
    args = ap.parse_args()
    kernels = {k: kernel(k) for k in args.kernels.split(",")}
    rows = [ROWS[int(i)] for i in args.rows.split(",")] if args.rows else ROWS
    copy0 = copy_bandwidth()
    out = []
    for kv, b, ctx, hq, hk, d in rows:
        for name, fn in kernels.items():
            r = decode_row(kv, b, ctx, hq, hk, d, attend=fn, graphed=args.graphed)
            r["kernel"] = name
            out.append(r)
            print(json.dumps(r), flush=True)
    copy = (copy0 + copy_bandwidth()) / 2
    for r in out:
        r["pct_copy"] = 100 * r["gbs"] / copy
        r["copy_gbs"] = copy
    if args.json:
        json.dump(dict(device=torch.cuda.get_device_name(0), copy_gbs=copy, rows=out), open(args.json, "w"), indent=1)
    how = (f"one CUDA graph of {CHAIN} calls cycling the KV sets (PDL, host-written metadata), events per replay / "
           f"{CHAIN}"
           if args.graphed else "CUDA events per launch")
    print(f"\ndecode attention, {torch.cuda.get_device_name(0)}, copy {copy:.0f} GB/s (mean of before/after); "
          f"{how}, KV rotated > 200 MB, median of 30 (min-max); measured")
    print(f"{'kv':5} {'batch':>5} {'ctx':>6} {'heads':>6} {'D':>4} | "
          + " | ".join(f"{k + ' us':>18} {'%copy':>6}" for k in kernels) + f" | {'max err':>8}")
    n = len(kernels)
    for i in range(0, len(out), n):
        rs, v = out[i:i + n], out[i]
        print(f"{v['kv']:5} {v['batch']:>5} {v['ctx']:>6} {v['heads']:>6} {v['d']:>4} | "
              + " | ".join(f"{r['us']:7.1f} ({r['us_min']:.1f}-{r['us_max']:.1f}) {r['pct_copy']:5.1f}%" for r in rs)
              + f" | {max(r['rel_err'] for r in rs):.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
