import math, statistics, sys
import torch
from onecat.kernels import ops
from onecat.kernels import reference as ref
from onecat.kernels.bench import time_sets
from onecat.kernels.inputs import paged_metadata
dev = "cuda"
KV = {"f16": torch.float16, "e4m3": torch.float8_e4m3fn}
def row(kv, batch, ctx, hq, hk, d, bs=16, iters=40):
    dt = KV[kv]
    nb = batch * (-(-ctx // bs)) + 4
    kvb = 2 * nb * bs * hk * d * torch.empty((), dtype=dt).element_size()
    nsets = max(1, min(8, math.ceil((200 << 20) / kvb)))
    sets = []
    for i in range(nsets):
        md = paged_metadata([1] * batch, [ctx] * batch, bs, nb, torch.Generator().manual_seed(10 + i), dev)
        q = torch.randn(batch, hq, d, device=dev).half()
        x = torch.randn(nb, bs, hk, d, device=dev)
        kc = x.half() if kv == "f16" else ref.fp8_quantize(x, 0.02, dt)
        x.normal_()
        vc = x.half() if kv == "f16" else ref.fp8_quantize(x, 0.02, dt)
        sets.append((q, kc, vc, md, d ** -0.5, None, None) + (() if kv == "f16" else (0.02, 0.02)))
    t = time_sets(lambda i: ops.paged_attention(*sets[i]), nsets, iters)
    nbytes = 2 * batch * ctx * hk * d * sets[0][1].element_size()
    med = statistics.median(t)
    print(f"{sys.argv[1]} {kv} b{batch} ctx{ctx} {hq}/{hk} d{d}: {med:7.2f} us (min {min(t):.2f}) {nbytes / med / 1e3:7.0f} GB/s")
for args in [("f16", 1, 512, 9, 3, 64), ("f16", 1, 512, 32, 8, 128), ("f16", 4, 8192, 32, 8, 128),
             ("f16", 4, 16384, 32, 8, 128), ("f16", 4, 32768, 32, 8, 128), ("f16", 16, 8192, 32, 8, 128),
             ("e4m3", 4, 16384, 32, 8, 128), ("f16", 8, 16384, 32, 4, 256)]:
    row(*args)
