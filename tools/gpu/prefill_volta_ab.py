"""The tensor-core prefill kernel (attention_ops.flash_prefill: csrc/attention_prefill.cu, the route a
V100 takes; on sm_80+ torch SDPA is admitted instead) forced on this GPU at attention_check.sh's prefill
shapes (plus a sliding window and an FP8 cache): useful causal TFLOP/s (CUDA events behind a queued
sleep, median / min / max of 10), error against torch SDPA (FP16) or the float reference (FP8, window).
For A/Bs of the Volta kernel's code on the lent GPU: run once per tree (PYTHONPATH) and compare.

    python3 tools/gpu/prefill_volta_ab.py [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from onecat.kernels import attention_ops
from onecat.kernels.bench import time_sets

sys.path.insert(0, "tools/gpu")
from prefill_row import prefill_case  # noqa: E402

# (batch, tokens, hq, hk, d, kv, window)
SHAPES = [(1, 2048, 32, 8, 128, "f16", 0), (1, 8192, 32, 8, 128, "f16", 0), (4, 4096, 32, 8, 128, "f16", 0),
          (1, 4096, 16, 8, 256, "f16", 0), (1, 4096, 32, 8, 64, "f16", 0), (1, 8192, 32, 8, 128, "f16", 1024),
          (1, 4096, 32, 8, 128, "e4m3", 0)]


def row(batch, s, hq, hk, d, kv, window) -> dict:
    c = prefill_case(batch, s, hq, hk, d, kv, window)
    t = time_sets(lambda i: attention_ops.flash_prefill(*c.args), 1, 10)
    got = attention_ops.flash_prefill(*c.args).float()
    want = c.reference()
    err = float((got - want).norm() / want.norm())
    med = statistics.median(t)
    return dict(batch=batch, tokens=s, heads=f"{hq}/{hk}", d=d, kv=kv, window=window, us=med, us_min=min(t),
                us_max=max(t), tflops=c.flops / med / 1e6, rel_err=err)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    print(f"flash_prefill (the Volta route) forced, {torch.cuda.get_device_name(0)}, block 16, median of 10 "
          "(min-max); measured")
    print(f"{'batch':>5} {'tokens':>6} {'heads':>6} {'D':>4} {'KV':>5} {'window':>6} | {'us':>22} {'TFLOP/s':>8} | err")
    for shape in SHAPES:
        r = row(*shape)
        rows.append(r)
        print(f"{r['batch']:5d} {r['tokens']:6d} {r['heads']:>6} {r['d']:4d} {r['kv']:>5} {r['window']:6d} | "
              f"{r['us']:9.1f} ({r['us_min']:.1f}-{r['us_max']:.1f}) {r['tflops']:8.1f} | {r['rel_err']:.1e}")
        torch.cuda.empty_cache()
    if a.json:
        json.dump(dict(device=torch.cuda.get_device_name(0), rows=rows), open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
