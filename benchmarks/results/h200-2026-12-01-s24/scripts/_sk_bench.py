"""s24: the stream-K wgmma tile (w64sk, grid G) against w64 at the route's splits and the route, llama3-8b q4_0
matrices at M 64 / 48; outputs against the float64 reference before and after the timed launches."""
import math, statistics, sys
import torch
from onecat.kernels import gemm_ops, ops
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets

gen = torch.Generator("cuda").manual_seed(0)
shapes = [(28672, 4096, True)]
ms = [int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "64,48").split(",")]
bad = 0
for n, k, glu in shapes:
    first = packed_gpu(n, k, "q4_0", gen)
    nsets = max(1, min(16, math.ceil(ROTATE_BYTES / first.nbytes)))
    ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
    wd = first.dequantize(torch.float64)
    for m in ms:
        xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
        want = xs[0].double() @ wd.t()
        wantg = None
        route = statistics.median(time_sets(lambda i: ops.linear(xs[i], ws[i]), nsets, 20))
        shape = gemm_ops.gemm_shape(m, n, k, *gemm_ops.gemm_slots("q4_0", xs[0].device), rd=True)
        line = [f"N {n} K {k} M {m}: route {shape} {route:.1f} us"]
        cands = [("w64", 1)] + [("w64sk", g) for g in (224, 112, 132, 66)]
        for tile, s in cands:
            def err_of():
                y = gemm_ops.gemm_launch(xs[0], ws[0], None, tile, s)
                e = float((y.double() - want).norm() / want.norm())
                eg = 0.0
                if glu:
                    yg = gemm_ops.gemm_launch(xs[0], ws[0], None, tile, s, glu=True)
                    wg = ops.silu_and_mul(y)
                    eg = float((yg.float() - wg.float()).norm() / wg.float().norm())
                return e, eg
            e0, eg0 = err_of()
            t = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, s), nsets, 20))
            tg = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, s, glu=True),
                                             nsets, 20)) if glu else 0.0
            e1, eg1 = err_of()
            ok = max(e0, e1) < 2e-3 and max(eg0, eg1) < 1e-3
            bad += not ok
            line.append(f"{tile} x{s} {t:.1f}" + (f" glu {tg:.1f}" if glu else "") +
                        ("" if ok else f" BAD err {e0:.1e}/{e1:.1e} glu {eg0:.1e}/{eg1:.1e}"))
        print(" | ".join(line), flush=True)
print("BAD" if bad else "all outputs within tolerance")
