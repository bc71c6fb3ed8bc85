"""s50 one-off: does the bare w64b2 consumer loop (_nwxb: no W loads, no x staging, no stage barriers; _nwxbh: that with
half the dequantization) go faster per tile with more consumer warpgroups an SM? Its producer warps return at once, so
the entry also runs in 128 threads, where its 168 registers allow three blocks an SM instead of two; a 150 KB dynamic
shared-memory request holds it to one. M 64, K 4096, N 101,376 (792 tiles of 128: 3 waves at two an SM, 2 at three,
6 at one). us per launch (CUDA events, median of 20) and SM-us per tile (us x SMs / tiles: the SM time a tile costs
at that occupancy). From the repo root. Ran at b16c89d: the dynamic shared memory it launches with (GemmTile.smem,
driver.Kernel's smem_max) left the tree with the ring tiles it was added for."""
import statistics

import torch

from onecat.kernels import driver, gemm_ops
from onecat.kernels.bench import packed_gpu, time_sets

gen = torch.Generator(device="cuda").manual_seed(0)
m, k = 64, 4096
sms = torch.cuda.get_device_properties(0).multi_processor_count
t0 = gemm_ops.WG_TILES["w64b2"]
rows = []
for n in (28672, 101376):
    w = packed_gpu(n, k, "q4_0", gen)
    x = torch.randn(m, k, device="cuda", generator=gen).half()
    tiles = n // 128
    cases = [("route", gemm_ops._WG["w64b2"], 192, 0, 2)]
    for d in ("nwxb", "nwxbh"):
        kern = gemm_ops.WG_DIAG[d]
        one = driver.Kernel(kern.source, kern.name, kern.signature, pdl=True, smem_max=150 * 1024)
        cases += [(d, kern, 192, 0, 2), (d, kern, 128, 0, 3), (d, one, 128, 150 * 1024, 1)]
    for name, kern, threads, smem, bps in cases:
        route = gemm_ops._WG["w64b2"]
        gemm_ops._WG["w64b2"] = kern
        gemm_ops.WG_TILES["w64b2"] = t0._replace(threads=threads, smem=smem)
        try:
            us = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(x, w, None, "w64b2", 1), 1, 20))
        finally:
            gemm_ops._WG["w64b2"] = route
            gemm_ops.WG_TILES["w64b2"] = t0
        per = us * sms / tiles
        rows.append(f"| {n} | {name} | {threads} | {bps} | {us:.1f} | {per:.2f} |")
        print(rows[-1], flush=True)
    del w
print("| N | entry | threads | blocks/SM | us | SM-us per tile |\n|---|---|---|---|---|---|\n" + "\n".join(rows))
