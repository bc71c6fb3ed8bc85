"""s51, prepared: o -> post-attention norm -> gate_up GLU (linear_norm_ops.linear_rms_norm_linear_gemm, llama3-8b q4_0)
with gate_up's x as XStages written by o's _norm epilogue (_glu_xb) against x~ row-major (w64b2_glu), M 64 / 48 / 40;
bit-equal first. Timed as gemm_bench times (CUDA events behind a queued sleep, weight sets rotated past 160 MB),
alternated in rounds; both launches of the pair in each timing. From the repo root."""
import statistics

import torch

from onecat.kernels import gemm_ops, linear_norm_ops
from onecat.kernels.bench import packed_gpu_sets, time_sets

gen = torch.Generator(device="cuda").manual_seed(0)
h, inter = 4096, 14336
wo = packed_gpu_sets(h, h, "q4_0", gen)
wg = packed_gpu_sets(2 * inter, h, "q4_0", gen)
nsets = min(len(wo), len(wg))


def pair(a, xb: bool):
    gemm_ops.XB_ROUTE = xb
    try:
        return linear_norm_ops.linear_rms_norm_linear_gemm(*a)
    finally:
        gemm_ops.XB_ROUTE = True


for m in (64, 48, 40):
    args = []
    for i in range(nsets):
        x = torch.randn(m, h, device="cuda", generator=gen).half()
        res = torch.randn(m, h, device="cuda", generator=gen).half()
        norm = ((torch.rand(h, device="cuda", generator=gen) + 0.5) / 16).half()
        args.append([x, wo[i], res, norm, 1e-5, wg[i], None, "silu_and_mul"])
    assert gemm_ops.takes_x_stages(wg[0], m, torch.device("cuda")), m
    a, b = pair(args[0], True), pair(args[0], False)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), m
    t = {"row-major": [], "xb": []}
    for _ in range(3):
        t["row-major"].append(statistics.median(time_sets(lambda i: pair(args[i], False), nsets, 30)))
        t["xb"].append(statistics.median(time_sets(lambda i: pair(args[i], True), nsets, 30)))
    print(f"| o + gate_up GLU M {m} (bit-equal) | " + " | ".join(
        f"{f} {statistics.median(v):.1f} us ({', '.join(f'{x:.1f}' for x in v)})" for f, v in t.items()) + " |",
        flush=True)
