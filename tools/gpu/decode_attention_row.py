"""One paged-decode attention measurement, the row of the #5 table: `batch` requests of `ctx` keys,
KV sets rotated past the L2 (> 200 MB), CUDA events behind a queued sleep (median / min / max of
`iters`), the output of set 0 against the float reference (FP8 caches dequantized the same way),
KV bytes per second, and the V100 read-bound projection (879 GB/s, ../shared/v100.md). Imported by
path from attention_check.sh and variants_ab.sh (under older trees' packages too: only ops, reference,
paged_metadata and time_sets, which every tree has).
`attend`: the function timed (default ops.paged_attention, the registry's route). `graphed`: the calls as
a decode graph runs them instead of one launch per event pair: one CUDA graph of CHAIN calls (a
llama3-8b decode step's attention calls) cycling through the KV sets, back to back (programmatic
dependent launch on sm_90), the metadata marked host-written as the engine's graphs pass it (the
lengths and page ids read before waiting on the kernel ahead), CUDA events around each replay, time
per call = replay / calls; launch gaps and prologues off the clock where the engine has them off too.
Until s24 the graph held one call per set (1-8; 2-3 for #5's batch-4 rows), which charged the graph's
start (its first call follows no kernel) to those few calls: E4M3 4 x 8K 23.4 -> 22.6 us, 4 x 16K 40.5
-> 38.5, FP16 4 x 8K 38.5 -> 36.4 with 24 calls (benchmarks/results/h200-2026-12-01-s24, call 2).
`chain=0` keeps that older form."""

from __future__ import annotations

import dataclasses
import math
import statistics

import torch

from onecat.kernels import ops
from onecat.kernels import reference as ref
from onecat.kernels.bench import time_graph, time_sets
from onecat.kernels.inputs import paged_metadata

ROTATE = 200 << 20  # KV bytes per rotation: > 3x the H200's 60 MB L2
CHAIN = 32  # calls per graph in the graphed timing: one per layer of a llama3-8b decode step
V100_READ_GBPS = 879.0  # v100.md
KV = {"f16": torch.float16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def rotation_sets(nbytes: int) -> int:
    """How many sets of `nbytes` a row rotates through so that each call reads from HBM, not the L2
    (ROTATE bytes in all, 1..8 sets); read_stream_row.py's ceiling rotates alike."""
    return max(1, min(8, math.ceil(ROTATE / nbytes)))


def decode_row(kv, batch, ctx, hq, hk, d, bs=16, iters=30, attend=None, graphed=False, chain=CHAIN):
    attend = attend or ops.paged_attention
    dev, dt = "cuda", KV[kv]
    nb = batch * (-(-ctx // bs)) + 4
    kv_bytes = 2 * nb * bs * hk * d * torch.empty((), dtype=dt).element_size()
    nsets = rotation_sets(kv_bytes)
    sets = []
    for i in range(nsets):
        md = paged_metadata([1] * batch, [ctx] * batch, bs, nb, torch.Generator().manual_seed(10 + i), dev)
        md = dataclasses.replace(md, host_written=True) if graphed else md
        q = torch.randn(batch, hq, d, device=dev).half()
        x = torch.randn(nb, bs, hk, d, device=dev)
        kc = x.half() if kv == "f16" else ref.fp8_quantize(x, 0.02, dt)
        x.normal_()
        vc = x.half() if kv == "f16" else ref.fp8_quantize(x, 0.02, dt)
        del x
        sets.append((q, kc, vc, md, d ** -0.5, None, None) + (() if kv == "f16" else (0.02, 0.02)))
    sel = ops.registry.select(ops.problem("paged_attention", *sets[0])).provider.name
    ncalls = max(chain, nsets)  # calls per graph (graphed)
    if graphed:
        calls = [sets[i % nsets] for i in range(ncalls)]
        t = time_graph(lambda: [attend(*x) for x in calls], replays=iters, n_calls=ncalls)
    else:
        t = time_sets(lambda i: attend(*sets[i]), nsets, iters)
    got = attend(*sets[0])
    s0 = sets[0]
    want = ref.paged_attention(s0[0].float(), ref.kv_dequantize(s0[1], 0.02) if kv != "f16" else s0[1].float(),
                               ref.kv_dequantize(s0[2], 0.02) if kv != "f16" else s0[2].float(), s0[3], s0[4])
    err = float((got.double() - want.double()).norm() / want.double().norm())
    nbytes = 2 * batch * ctx * hk * d * s0[1].element_size()  # K and V bytes the kernel must read
    med = statistics.median(t) * 1e-6
    bw = nbytes / med
    r = dict(kind="decode", timing=f"graph of {ncalls} calls" if graphed else "launch", kv=kv, batch=batch, ctx=ctx, heads=f"{hq}/{hk}", d=d, block_size=bs, provider=sel,
             us=med * 1e6, us_min=min(t), us_max=max(t), bytes=nbytes, gbs=bw / 1e9, rel_err=err,
             v100_projected_us=nbytes / (V100_READ_GBPS * 1e9) * 1e6)
    del sets, got, want
    torch.cuda.empty_cache()
    return r
