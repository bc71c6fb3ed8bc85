"""s49, prepared: what W's loads and x's staging cost w64b2 (gate_up 28672 x 4096, plain entries, M 64 / 48): the
route against its _nw (no W loads), _nx (no x staging) and _nwx (neither) diagnostics (gemm_ops.WG_DIAG; outputs
wrong by design), alternated in rounds. Timed as gemm_bench times (CUDA events behind a queued sleep, weight sets
rotated past 160 MB). From the repo root."""
import statistics

import torch

from onecat.kernels import gemm_ops
from onecat.kernels.bench import packed_gpu_sets, time_sets

gen = torch.Generator(device="cuda").manual_seed(0)
n, k = 28672, 4096
ws = packed_gpu_sets(n, k, "q4_0", gen)
nsets = len(ws)
route = gemm_ops._WG["w64b2"]
forms = {"route": route, **gemm_ops.WG_DIAG}
for m in (64, 48):
    xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
    t = {f: [] for f in forms}
    for _ in range(3):
        for f, kern in forms.items():
            gemm_ops._WG["w64b2"] = kern
            try:
                t[f].append(statistics.median(time_sets(
                    lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, "w64b2", 1), nsets, 30)))
            finally:
                gemm_ops._WG["w64b2"] = route
    print(f"| gate_up w64b2 x1 M {m} | " + " | ".join(
        f"{f} {statistics.median(v):.1f} us ({', '.join(f'{x:.1f}' for x in v)})" for f, v in t.items()) + " |",
        flush=True)
