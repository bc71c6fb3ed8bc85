"""s25: where the wgmma tile's step goes: w64 against itself without x loads (nx), without W loads (nw), without
both (nxw; timing only, their outputs are wrong), and with 3 / 4 producer warps taking turns (p3, p4: 3 / 4 x
stages in dynamic shared memory); llama3-8b q4_0 matrices, median of 20 over rotated weight sets, us."""
import math, statistics, sys
import torch
from onecat.kernels import gemm_ops, ops
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets

TILES = sys.argv[2].split(",")  # each call's tiles: README (calls 1-5 and 8 had them as the default list)
gen = torch.Generator("cuda").manual_seed(0)
shapes = [(28672, 4096, True, 1), (4096, 14336, False, 4), (6144, 4096, False, 2), (4096, 4096, False, 4)]
ms = [int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "64").split(",")]
for rnd in range(2):
    for n, k, glu, s in shapes:
        first = packed_gpu(n, k, "q4_0", gen)
        nsets = max(1, min(16, math.ceil(ROTATE_BYTES / first.nbytes)))
        ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
        wd = first.dequantize(torch.float64)
        for m in ms:
            xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
            want = xs[0].double() @ wd.t()
            route = statistics.median(time_sets(lambda i: ops.linear(xs[i], ws[i]), nsets, 20))
            line = [f"r{rnd} N {n} K {k} M {m}: route {route:.1f}"]
            for tile in TILES:
                y = gemm_ops.gemm_launch(xs[0], ws[0], None, tile, s, glu=glu)
                ref = ops.silu_and_mul(want.half()).double() if glu else want
                err = float((y.double() - ref).norm() / ref.norm())
                bad = "" if err < 3e-3 else f" (err {err:.1e})"  # calls 9, 12: f" e{err:.0e}" always
                t = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, s, glu=glu),
                                                nsets, 20))
                line.append(f"{tile}{'-glu' if glu else ''} x{s} {t:.1f}{bad}")
            print(" | ".join(line), flush=True)
