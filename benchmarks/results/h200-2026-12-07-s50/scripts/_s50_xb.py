"""s50, prepared: w64b2 with x's stages by one bulk copy a step (gemm_ops.WG_XB, from gemm_ops.wg_x_stages) against the
route, gate_up 28672 x 4096 plain at M 64 / 48, one split; bit-equal first. Timed as gemm_bench times (CUDA events
behind a queued sleep, weight sets rotated past 160 MB), alternated in rounds. The stages are built outside the timing:
in a route the kernel writing x would write them. From the repo root."""
import statistics

import torch

from onecat.kernels import gemm_ops
from onecat.kernels.bench import packed_gpu_sets, time_sets

gen = torch.Generator(device="cuda").manual_seed(0)
n, k = 28672, 4096
ws = packed_gpu_sets(n, k, "q4_0", gen)
nsets = len(ws)
route = gemm_ops._WG["w64b2"]


def xb(x_as, w):
    gemm_ops._WG["w64b2"] = gemm_ops.WG_XB
    try:
        return gemm_ops.gemm_launch(x_as, w, None, "w64b2", 1)
    finally:
        gemm_ops._WG["w64b2"] = route


for m in (64, 48):
    xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
    stages = [gemm_ops.wg_x_stages(x) for x in xs]
    as_x = [s.view(-1)[: 2 * m * k].view(torch.float16).view(m, k) for s in stages]
    assert torch.equal(xb(as_x[0], ws[0]), gemm_ops.gemm_launch(xs[0], ws[0], None, "w64b2", 1)), m
    t = {"route": [], "xb": []}
    for _ in range(3):
        t["route"].append(statistics.median(time_sets(
            lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, "w64b2", 1), nsets, 30)))
        t["xb"].append(statistics.median(time_sets(lambda i: xb(as_x[i], ws[i]), nsets, 30)))
    print(f"| gate_up w64b2 x1 M {m} (bit-equal) | " + " | ".join(
        f"{f} {statistics.median(v):.1f} us ({', '.join(f'{x:.1f}' for x in v)})" for f, v in t.items()) + " |",
        flush=True)
