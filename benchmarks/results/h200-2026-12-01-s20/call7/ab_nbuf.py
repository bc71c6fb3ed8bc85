"""s20: decode_rd with more load sets at 2 blocks per SM (A/B entries) against the route, graphed rows."""
import functools, json, statistics, sys
import torch
sys.path.insert(0, "tools/gpu")
from decode_attention_row import decode_row
from onecat.kernels import attention_ops as ao
from onecat.kernels.bench import copy_bandwidth
from onecat.kernels.driver import Kernel

def entry(suffix, kvs):
    return {(128, kv): Kernel("attention_decode_rd.cu", f"attn_decode_rd_d128_{kv}_{suffix}", ao._SIG_FUSED, pdl=True) for kv in kvs}

def flash(kernels, bps, q, kc, vc, md, scale, sw=None, cap=None, k_scale=1.0, v_scale=1.0):
    return ao._flash(kernels, ao.DECODE_RD_TILE, q, kc, vc, md, scale, sw, cap, k_scale, v_scale, fused=True,
                     blocks_per_sm=bps, threads=128)

V = {"rd": ao.paged_attention_rd,
     "plan2": functools.partial(flash, ao._DECODE_RD, 2),
     "n3b2": functools.partial(flash, entry("n3b2", ["e4m3"]), 2),
     "n4b2": functools.partial(flash, entry("n4b2", ["e4m3", "e5m2"]), 2),
     "f_n2b2": functools.partial(flash, entry("n2b2", ["f16"]), 2)}
ROWS = [("f16", b, c) for b, c in ((1, 512), (1, 4096), (4, 512), (8, 512), (16, 512), (32, 512), (32, 1024), (64, 512),
                                   (64, 1024), (128, 512), (16, 2048), (4, 8192), (16, 8192), (8, 16384), (4, 32768))]
ROWS += [("e4m3", 32, 512), ("e4m3", 64, 512), ("e4m3", 64, 1024)]
WHICH = {"e4m3": ["rd", "n3b2", "n4b2"], "e5m2": ["rd", "n4b2"], "f16": ["rd", "f_n2b2"]}
c0 = copy_bandwidth()
res = {}
for rnd in range(2):
    for kv, b, ctx in ROWS:
        for v in WHICH[kv]:
            r = decode_row(kv, b, ctx, 32, 8, 128, attend=V[v], graphed=True)
            res.setdefault((kv, b, ctx), {}).setdefault(v, []).append(r)
            print(json.dumps(dict(variant=v, round=rnd, **r)), flush=True)
c = (c0 + copy_bandwidth()) / 2
print(f"copy {c:.0f} GB/s; graphed, mean of 2 rounds' medians (us, % of copy, max rel err)")
for k, d in res.items():
    print(f"{k[0]} b{k[1]} {k[2]}: " + " | ".join(
        f"{v} {statistics.mean(r['us'] for r in rs):.2f} {100 * statistics.mean(r['gbs'] for r in rs) / c:.1f}% "
        f"e{max(r['rel_err'] for r in rs):.1e}" for v, rs in d.items()))
