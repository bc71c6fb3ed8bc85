"""On the GPU, one process: greedy argmax (torch.argmax vs ops.argmax) and decode attention at short
contexts, each as a decode step sees it (session 7 timed an 8-warp "wide" attention shape here
beside the split one and dropped it: benchmarks/results/h200-2026-11-30-s7/short-decode-call1.log).

Timing as a decode step sees it: a CUDA graph of LAYERS calls (one KV cache per layer, as a model's
layers), replayed; time per call = replay time / LAYERS (includes the kernel boundaries inside a
graph, not the host). Median / min / max over replays. Errors against the FP32 reference.

  python tools/gpu/short_decode_ab.py [--json OUT]
  python tools/gpu/short_decode_ab.py --min-parts 64,128,256 --attention-only   # split-KV partition floor
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from onecat.kernels import attention_ops, ops
from onecat.kernels import reference as ref
from onecat.kernels.bench import time_graph
from onecat.kernels.inputs import paged_metadata

LAYERS, REPLAYS = 30, 30
default_min_part = attention_ops.MIN_PART


def graph_time(fn, n_calls: int) -> list[float]:
    """us per call: fn() makes n_calls calls; captured once in a graph, replayed REPLAYS times."""
    return time_graph(fn, REPLAYS, n_calls)


def attention_rows(min_parts: list[int], heads) -> list[dict]:
    rows = []
    for hq, hk, d in heads:
        for batch in (1, 4):
            for ctx in (512, 1024, 2048):
                bs = 16
                nb = batch * ctx // bs + 2
                gen = torch.Generator("cuda").manual_seed(ctx + batch + d)
                md = paged_metadata([1] * batch, [ctx] * batch, bs, nb, torch.Generator().manual_seed(ctx), "cuda")
                q = torch.randn(batch, hq, d, device="cuda", generator=gen).half()
                caches = [(torch.randn(nb, bs, hk, d, device="cuda", generator=gen).half(),
                           torch.randn(nb, bs, hk, d, device="cuda", generator=gen).half()) for _ in range(LAYERS)]
                want = ref.paged_attention(q.float(), caches[0][0].float(), caches[0][1].float(), md, d ** -0.5)
                got = attention_ops.paged_attention(q, *caches[0], md, d ** -0.5)
                err = float((got.double() - want.double()).norm() / want.double().norm())
                for rnd in range(2 if len(min_parts) > 1 else 1):  # variants alternated, twice
                    for mp in min_parts:
                        attention_ops.MIN_PART = mp  # the split-KV plan's floor on keys per partition
                        t = graph_time(lambda: [attention_ops.paged_attention(q, k, v, md, d ** -0.5)
                                                for k, v in caches], LAYERS)
                        rows.append(dict(kind="attention", heads=f"{hq}/{hk}", d=d, batch=batch, ctx=ctx,
                                         variant=f"split>={mp}", us=statistics.median(t), us_min=min(t),
                                         us_max=max(t), rel_err=err))
                attention_ops.MIN_PART = default_min_part
                del caches
                torch.cuda.empty_cache()
    return rows


def argmax_rows() -> list[dict]:
    rows = []
    for b, v, dt in [(1, 49152, torch.float32), (1, 128256, torch.float32), (1, 128256, torch.float16),
                     (4, 128256, torch.float32), (32, 128256, torch.float32), (64, 49152, torch.float32)]:
        xs = [torch.randn(b, v, device="cuda", dtype=dt) for _ in range(20)]
        ok = all(torch.equal(ops.argmax(x), torch.argmax(x, -1)) for x in xs)
        for name, fn in [("torch.argmax", lambda x: torch.argmax(x, -1)), ("ops.argmax", ops.argmax)]:
            t = graph_time(lambda: [fn(x) for x in xs], len(xs))
            rows.append(dict(kind="argmax", batch=b, vocab=v, dtype=str(dt).removeprefix("torch."), variant=name,
                             us=statistics.median(t), us_min=min(t), us_max=max(t), equal=ok))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--min-parts", default=str(attention_ops.MIN_PART),
                    help="comma list of attention_ops.MIN_PART values to alternate (keys per partition at least)")
    ap.add_argument("--attention-only", action="store_true", help="SmolLM2's heads only, no argmax rows")
    a = ap.parse_args()
    print(torch.cuda.get_device_name(0), "| graph of", LAYERS, "calls,", REPLAYS, "replays; us per call")
    heads = [(9, 3, 64)] if a.attention_only else [(9, 3, 64), (32, 8, 128)]
    rows = ([] if a.attention_only else argmax_rows()) + attention_rows(
        [int(v) for v in a.min_parts.split(",")], heads)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"{'op':10} {'shape':28} {'variant':13} {'median':>8} {'min':>8} {'max':>8}  check")
    for r in rows:
        if r["kind"] == "argmax":
            shape, check = f"B={r['batch']} V={r['vocab']} {r['dtype']}", f"equal={r['equal']}"
        else:
            shape, check = f"{r['heads']} D{r['d']} b{r['batch']} ctx{r['ctx']}", f"err={r['rel_err']:.2e}"
        print(f"{r['kind']:10} {shape:28} {r['variant']:13} {r['us']:8.2f} {r['us_min']:8.2f} {r['us_max']:8.2f}  {check}")


if __name__ == "__main__":
    main()
