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

import torch
import torch.nn.functional as F

from onecat.kernels import attention_ops, ops
from onecat.kernels import reference as ref
from onecat.kernels.bench import time_sets
from onecat.kernels.inputs import paged_metadata

# (batch, tokens, hq, hk, d, kv, window)
SHAPES = [(1, 2048, 32, 8, 128, "f16", 0), (1, 8192, 32, 8, 128, "f16", 0), (4, 4096, 32, 8, 128, "f16", 0),
          (1, 4096, 16, 8, 256, "f16", 0), (1, 4096, 32, 8, 64, "f16", 0), (1, 8192, 32, 8, 128, "f16", 1024),
          (1, 4096, 32, 8, 128, "e4m3", 0)]


def row(batch, s, hq, hk, d, kv, window) -> dict:
    bs, dev = 16, "cuda"
    nb = batch * (s // bs) + 4
    md = paged_metadata([s] * batch, [s] * batch, bs, nb, torch.Generator().manual_seed(2), dev)
    q = torch.randn(batch * s, hq, d, device=dev).half()
    k = torch.randn(batch * s, hk, d, device=dev).half()
    v = torch.randn(batch * s, hk, d, device=dev).half()
    dt = torch.float16 if kv == "f16" else torch.float8_e4m3fn
    kc = torch.zeros(nb, bs, hk, d, device=dev, dtype=dt)
    vc = torch.zeros_like(kc)
    scales = () if kv == "f16" else (0.02, 0.02)
    ops.reshape_and_cache(k, v, kc, vc, md.slot_mapping, *scales)
    args = (q, kc, vc, md, d ** -0.5, window or None, None, *scales)
    t = time_sets(lambda i: attention_ops.flash_prefill(*args), 1, 10)
    got = attention_ops.flash_prefill(*args).float()
    if kv == "f16" and not window:
        qt, kt, vt = (x.view(batch, s, -1, d).transpose(1, 2) for x in (q, k, v))
        want = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=True).transpose(1, 2)
        want = want.reshape(batch * s, hq, d).float()
    else:
        kf = ref.kv_dequantize(kc, 0.02) if kv != "f16" else kc.float()
        vf = ref.kv_dequantize(vc, 0.02) if kv != "f16" else vc.float()
        want = ref.paged_attention(q.float(), kf, vf, md, d ** -0.5, window or None)
    err = float((got - want).norm() / want.norm())
    vis = [min(i + 1, window) if window else i + 1 for i in range(s)]
    flops = batch * 4 * hq * d * sum(vis)  # useful (visible) work
    med = statistics.median(t)
    return dict(batch=batch, tokens=s, heads=f"{hq}/{hk}", d=d, kv=kv, window=window, us=med, us_min=min(t),
                us_max=max(t), tflops=flops / med / 1e6, rel_err=err)


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
