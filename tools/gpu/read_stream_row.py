"""The ceiling of #5's decode rows for a launch of the decode kernel's shape (tools/gpu/read_stream.cu:
blocks of 128 threads, 3 per SM, each streaming one contiguous chunk; 4 or 8 16-byte loads per thread
in flight; every load before the PDL wait) on the rows' byte counts, timed as decode_attention_row
times a row: buffers rotated past the L2 (> 200 MB), per launch (CUDA events per call behind a queued
sleep) and graphed (one CUDA graph of one launch per buffer, PDL between them, events per replay /
launches); % of the 1 GiB device copy measured in the same process. What a decode kernel adds to a
bare read (the query after the wait, the page table, the split-KV merge) has to fit in the gap
between this and the row's target.

    python3 tools/gpu/read_stream_row.py [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

from onecat.kernels.bench import copy_bandwidth, time_graph, time_sets
from onecat.kernels.driver import Kernel

sys.path.insert(0, "tools/gpu")
from decode_attention_row import rotation_sets  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "read_stream.cu")
KERNELS = {u: Kernel(SRC, f"read_stream_u{u}", "pqp", pdl=True) for u in (4, 8)}
# (label, bytes): #5's rows' K + V bytes (32/8 heads, D 128)
SIZES = [("e4m3 4 x 8K", 4 * 8192 * 8 * 128 * 2), ("e4m3 4 x 16K / f16 4 x 8K", 4 * 16384 * 8 * 128 * 2),
         ("f16 4 x 16K / e4m3 4 x 32K", 4 * 32768 * 8 * 128 * 2)]


def row(label: str, nbytes: int, unroll: int, graphed: bool, copy: float) -> dict:
    nsets = rotation_sets(nbytes)
    bufs = [torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_() for _ in range(nsets)]
    out = torch.zeros(1 << 16, dtype=torch.int32, device="cuda")
    blocks = 3 * torch.cuda.get_device_properties(0).multi_processor_count
    k = KERNELS[unroll]

    def launch(i: int) -> None:
        k((blocks, 1, 1), (128, 1, 1), bufs[i].data_ptr(), nbytes // 16, out.data_ptr())

    if graphed:
        t = time_graph(lambda: [launch(i) for i in range(nsets)], replays=30, n_calls=nsets)
    else:
        t = time_sets(launch, nsets, 30)
    med = statistics.median(t)
    return dict(label=label, bytes=nbytes, unroll=unroll, timing="graph" if graphed else "launch", blocks=blocks,
                us=med, us_min=min(t), us_max=max(t), gbs=nbytes / med / 1e3, pct_copy=100 * nbytes / med / 1e3 / copy)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    copy0 = copy_bandwidth()
    rows = [row(label, n, u, g, copy0) for label, n in SIZES for u in (4, 8) for g in (False, True)]
    copy = (copy0 + copy_bandwidth()) / 2
    for r in rows:
        r["pct_copy"] = 100 * r["gbs"] / copy
        r["copy_gbs"] = copy
    print(f"bare streaming read in the decode launch's shape, {torch.cuda.get_device_name(0)}, copy {copy:.0f} GB/s; "
          "median of 30 (min-max); measured")
    print(f"{'bytes of':28} {'MB':>6} {'loads':>5} {'timing':>6} | {'us':>18} {'%copy':>6}")
    for r in rows:
        print(f"{r['label']:28} {r['bytes'] / 1e6:6.1f} {r['unroll']:5d} {r['timing']:>6} | "
              f"{r['us']:7.2f} ({r['us_min']:.2f}-{r['us_max']:.2f}) {r['pct_copy']:5.1f}%")
    if args.json:
        json.dump(dict(device=torch.cuda.get_device_name(0), copy_gbs=copy, rows=rows), open(args.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
