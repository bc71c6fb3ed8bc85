"""s24: ping-pong wgmma tiles (p64, p64d1: two consumer warpgroups on alternate K steps) against w64 and the
route on the llama3-8b q4_0 matrices at 48 / 64 rows; correctness against the float reference."""
import ctypes, math, statistics, sys
import torch
from onecat.kernels import gemm_ops, ops
from onecat.kernels.driver import libcuda
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets

TILES = ("w64", "w64s4", "n64", "n64d2")
for t in TILES:
    for glu in (False, True):
        k = (gemm_ops._WG_GLU if glu else gemm_ops._WG)[t]
        n = ctypes.c_int()
        libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), k.function(0),
                                                              gemm_ops.WG_TILES[t].threads, gemm_ops.WG_SMEM[t])
        print(f"occupancy {t} glu={glu}: {n.value} blocks per SM", flush=True)
gen = torch.Generator("cuda").manual_seed(0)
shapes = [(28672, 4096, True), (4096, 14336, False), (6144, 4096, False)]
ms = [int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "64,48").split(",")]
for n, k, glu in shapes:
    first = packed_gpu(n, k, "q4_0", gen)
    nsets = max(1, min(16, math.ceil(ROTATE_BYTES / first.nbytes)))
    ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
    wd = first.dequantize(torch.float64)
    for m in ms:
        xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
        want = xs[0].double() @ wd.t()
        route = statistics.median(time_sets(lambda i: ops.linear(xs[i], ws[i]), nsets, 20))
        shape = gemm_ops.gemm_shape(m, n, k, *gemm_ops.gemm_slots("q4_0", xs[0].device), rd=True)
        line = [f"N {n} K {k} M {m}: route {shape} {route:.1f} us"]
        for tile in TILES:
            for s in ((1,) if n > 8192 else (2, 3, 4, 8)):
                if (k // 128) // s < 4 and s > 1:
                    continue
                y = gemm_ops.gemm_launch(xs[0], ws[0], None, tile, s)
                err = float((y.double() - want).norm() / want.norm())
                bad = "" if err < 2e-3 else f" BAD err {err:.2e}"
                t = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, s), nsets, 20))
                g = ""
                if glu:
                    yg = gemm_ops.gemm_launch(xs[0], ws[0], None, tile, s, glu=True)
                    wantg = ops.silu_and_mul(y)
                    eg = float((yg.float() - wantg.float()).norm() / wantg.float().norm())
                    tg = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, s, glu=True), nsets, 20))
                    g = f" glu {tg:.1f}" + ("" if eg < 1e-3 else f" BADGLU {eg:.1e}")
                line.append(f"{tile} x{s} {t:.1f}{g}{bad}")
        print(" | ".join(line), flush=True)
