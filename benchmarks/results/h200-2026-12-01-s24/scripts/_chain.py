"""s24 diagnostic: #5's graphed decode rows with the graph holding `chain` calls (the rotation's sets
cycled) instead of one per set, to see how much of the per-call time is the graph's start."""
import statistics, sys, torch
sys.path.insert(0, "tools/gpu")
import decode_attention_row as dar
from onecat.kernels import ops
from onecat.kernels.bench import copy_bandwidth, time_graph

orig = dar.time_graph
def rows(chain):
    def tg(fn, replays=30, n_calls=1):
        calls = []
        def many():
            for i in range(max(1, chain // n_calls)):
                fn()
        k = max(1, chain // n_calls)
        return orig(many, replays=replays, n_calls=n_calls * k)
    dar.time_graph = tg
    out = []
    for kv, b, ctx, hq, hk, d in [("e4m3", 4, 8192, 32, 8, 128), ("e4m3", 4, 16384, 32, 8, 128),
                                  ("e5m2", 4, 8192, 32, 8, 128), ("f16", 4, 8192, 32, 8, 128),
                                  ("e4m3", 4, 8192, 16, 8, 256)]:
        r = dar.decode_row(kv, b, ctx, hq, hk, d, graphed=True)
        out.append(r)
    return out
copy = copy_bandwidth()
print(f"copy {copy:.0f} GB/s")
for rnd in range(2):
    for chain in (1, 12, 24):
        for r in rows(chain):
            print(f"chain {chain:>2} {r['kv']} {r['batch']}x{r['ctx']} {r['heads']} D{r['d']}: {r['us']:.2f} us "
                  f"({r['us_min']:.2f}-{r['us_max']:.2f}) {100 * r['gbs'] / copy:.1f}% err {r['rel_err']:.1e}")
