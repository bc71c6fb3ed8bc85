"""dev: short-context decode attention, partition size sweep (MIN_PART) and warps, span as the engine plans."""
import dataclasses, statistics, sys, json
import torch
from onecat.kernels import attention_ops
from onecat.kernels.bench import time_graph
from onecat.kernels.inputs import paged_metadata
sys.path.insert(0, "tools/gpu")

def sets_for(batch, ctx, span, n=8):
    hq, hk, d, bs = 32, 8, 128, 16
    nb = batch * (-(-span // bs)) + 4
    out = []
    for i in range(n):
        md = paged_metadata([1] * batch, [ctx] * batch, bs, nb, torch.Generator().manual_seed(10 + i), "cuda")
        md = dataclasses.replace(md, host_written=True, max_seq_len=span)
        q = torch.randn(batch, hq, d, device="cuda").half()
        kc = torch.randn(nb, bs, hk, d, device="cuda").half()
        vc = torch.randn(nb, bs, hk, d, device="cuda").half()
        out.append((q, kc, vc, md, d ** -0.5))
    return out

rows = [(1, 512, 656), (1, 512, 512), (1, 1024, 1168), (1, 2048, 2192), (1, 4096, 4240), (2, 512, 656), (4, 512, 656), (8, 512, 656), (16, 512, 656)]
res = []
for b, ctx, span in rows:
    S = sets_for(b, ctx, span)
    ref0 = None
    for warps in (4, 1):
        for mp in (64, 128, 256, 512, 1024):
            attention_ops.MIN_PART = mp
            fn = lambda: [attention_ops.paged_attention_rd(*x, warps=warps) for x in S]
            t = time_graph(fn, replays=30, n_calls=len(S))
            o = attention_ops.paged_attention_rd(*S[0], warps=warps).float()
            ref0 = o if ref0 is None else ref0
            err = float((o - ref0).norm() / ref0.norm())
            r = dict(b=b, ctx=ctx, span=span, warps=warps, min_part=mp, us=statistics.median(t), mn=min(t), mx=max(t), dev=err)
            res.append(r)
            print(json.dumps(r), flush=True)
    attention_ops.MIN_PART = 64
print("\n b  ctx span | w4: 64 128 256 512 1024 | w1: 64 128 256 512 1024 (graphed us per call)")
for b, ctx, span in rows:
    v = {(r["warps"], r["min_part"]): r["us"] for r in res if (r["b"], r["ctx"], r["span"]) == (b, ctx, span)}
    print(f"{b:2d} {ctx:5d} {span:5d} | " + " ".join(f"{v[(4, m)]:5.2f}" for m in (64, 128, 256, 512, 1024)) + " | "
          + " ".join(f"{v[(1, m)]:5.2f}" for m in (64, 128, 256, 512, 1024)))
