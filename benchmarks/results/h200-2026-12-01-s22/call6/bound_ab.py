"""s22 diagnostic: how much of a short FP8 decode launch the two latency chains cost. rd: the route (w4);
nomerge: the same without the fused merge (partials only: wrong output, the time without the count and the
merge); qpre: Q loaded before the PDL wait (valid here: the call ahead does not write Q); qpre_nomerge: both."""
import functools
import json
import sys

from onecat.kernels import attention_ops, cuda_ops
from onecat.kernels.bench import copy_bandwidth

sys.path.insert(0, "tools/gpu")
from decode_attention_row import decode_row  # noqa: E402


def nomerge(form, *a, **k):
    real = cuda_ops.split_counters
    cuda_ops.split_counters = lambda *x, **y: None
    try:
        return attention_ops.paged_attention_rd(*a, form=form, **k)
    finally:
        cuda_ops.split_counters = real


K = {"rd": functools.partial(attention_ops.paged_attention_rd, form="w4"), "nomerge": functools.partial(nomerge, "w4"),
     "late1": functools.partial(attention_ops.paged_attention_rd, form="late1"),
     "late2": functools.partial(attention_ops.paged_attention_rd, form="late2")}
rows = [("e4m3", 4, 8192), ("e4m3", 4, 16384), ("f16", 4, 8192)]
order = sys.argv[1].split(",")
c0 = copy_bandwidth()
out = []
for kv, b, ctx in rows:
    for name in order:
        r = decode_row(kv, b, ctx, 32, 8, 128, attend=K[name], graphed=True)
        r["kernel"] = name
        out.append(r)
copy = (c0 + copy_bandwidth()) / 2
print(f"copy {copy:.0f} GB/s")
for r in out:
    r["pct_copy"] = 100 * r["gbs"] / copy
    print(f"{r['kv']:5s} {r['batch']:3d} x {r['ctx']:6d} {r['kernel']:13s} {r['us']:7.2f} us ({r['us_min']:.1f}-{r['us_max']:.1f}) "
          f"{r['pct_copy']:5.1f}%  err {r['rel_err']:.1e}")
json.dump(out, open(sys.argv[2], "w"))
