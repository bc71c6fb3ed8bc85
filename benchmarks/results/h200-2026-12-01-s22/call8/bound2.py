"""s22 diagnostic: the short decode launch with no merge at all (partials only: wrong output; the time
without the count, the merge and attn_reduce), against the route."""
import json
import sys

from onecat.kernels import attention_ops, cuda_ops
from onecat.kernels.bench import copy_bandwidth

sys.path.insert(0, "tools/gpu")
from decode_attention_row import decode_row  # noqa: E402


def partials_only(*a, **k):
    real_counters, real_launch = cuda_ops.split_counters, attention_ops._launch
    cuda_ops.split_counters = lambda *x, **y: None
    attention_ops._launch = lambda kernel, *x, **y: None if kernel is attention_ops._REDUCE else real_launch(kernel, *x, **y)
    try:
        return attention_ops.paged_attention_rd(*a, form="w4", **k)
    finally:
        cuda_ops.split_counters, attention_ops._launch = real_counters, real_launch


K = {"rd": lambda *a, **k: attention_ops.paged_attention_rd(*a, form="w4", **k), "partials_only": partials_only}
rows = [("e4m3", 4, 8192), ("e4m3", 4, 16384), ("f16", 4, 8192)]
c0 = copy_bandwidth()
out = []
for kv, b, ctx in rows:
    for name in sys.argv[1].split(","):
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
