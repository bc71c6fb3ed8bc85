"""s49 one-off: gate_up GLU at M 64 / 48 on w64b2 (route), w64b2s and w64b2s with the next step's W read from shared
memory at the end of a step (gemm_wg_q4_0_w64b2e_glu, WLE), alternated in rounds; the three bit-equal first.
Timed as gemm_bench times (CUDA events behind a queued sleep, weight sets rotated past 160 MB). From the repo root."""
import math
import statistics

import torch

from onecat.kernels import gemm_ops
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets

WLE = gemm_ops.WG_WLE_GLU
gen = torch.Generator(device="cuda").manual_seed(0)
n, k = 28672, 4096
first = packed_gpu(n, k, "q4_0", gen)
nsets = max(1, min(16, math.ceil(ROTATE_BYTES / first.nbytes)))
ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]


def run(form, x, w):
    if form == "w64b2e":
        plain = gemm_ops._WG_GLU["w64b2s"]
        gemm_ops._WG_GLU["w64b2s"] = WLE
        try:
            return gemm_ops.gemm_launch(x, w, None, "w64b2s", 1, glu=True)
        finally:
            gemm_ops._WG_GLU["w64b2s"] = plain
    return gemm_ops.gemm_launch(x, w, None, form, 1, glu=True)


for m in (64, 48, 37):
    xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
    want = run("w64b2", xs[0], ws[0])
    for form in ("w64b2s", "w64b2e"):
        assert torch.equal(run(form, xs[0], ws[0]), want), (form, m)
    print(f"M {m}: w64b2s and w64b2e bit-equal to w64b2", flush=True)
    if m == 37:
        break
    t = {f: [] for f in ("w64b2", "w64b2s", "w64b2e")}
    for _ in range(3):
        for f in t:
            t[f].append(statistics.median(time_sets(lambda i: run(f, xs[i], ws[i]), nsets, 30)))
    print(f"| gate_up GLU M {m} | " + " | ".join(f"{f} {statistics.median(v):.1f} us ({', '.join(f'{x:.1f}' for x in v)})"
                                               for f, v in t.items()) + " |", flush=True)
