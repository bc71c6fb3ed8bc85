"""s25: the wgmma tile's K splits against wave quantization (gate_up's 224 tiles are 1.7 waves at one block per SM;
qkv's 48 tiles x 2 splits fill 96 of 132 SMs): llama3-8b q4_0 matrices, median of 20 over rotated weight sets, us;
every output checked against the float64 reference."""
import math, statistics, sys
import torch
from onecat.kernels import gemm_ops, ops
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets

gen = torch.Generator("cuda").manual_seed(0)
shapes = [(28672, 4096, True, (1, 2, 4, 8)), (4096, 14336, False, (4, 8, 16)), (6144, 4096, False, (2, 4, 5, 8, 11)),
          (4096, 4096, False, (4, 8))]
ms = [int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "64,48").split(",")]
for rnd in range(2):
    for n, k, glu, splits in shapes:
        first = packed_gpu(n, k, "q4_0", gen)
        nsets = max(1, min(16, math.ceil(ROTATE_BYTES / first.nbytes)))
        ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
        wd = first.dequantize(torch.float64)
        for m in ms:
            xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
            want = xs[0].double() @ wd.t()
            ref = ops.silu_and_mul(want.half()).double() if glu else want
            if glu:
                route = statistics.median(time_sets(lambda i: ops.silu_and_mul(ops.linear(xs[i], ws[i])), nsets, 20))
            else:
                route = statistics.median(time_sets(lambda i: ops.linear(xs[i], ws[i]), nsets, 20))
            shape = gemm_ops.gemm_shape(m, n, k, *gemm_ops.gemm_slots("q4_0", xs[0].device), rd=True)
            line = [f"r{rnd} N {n} K {k} M {m}{' glu' if glu else ''}: route {shape} {route:.1f}"]
            for s in splits:
                y = gemm_ops.gemm_launch(xs[0], ws[0], None, "w64", s, glu=glu)
                err = float((y.double() - ref).norm() / ref.norm())
                bad = "" if err < 3e-3 else f" BAD err {err:.1e}"
                t = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, "w64", s, glu=glu),
                                                nsets, 20))
                line.append(f"w64 x{s} {t:.1f}{bad}")
            print(" | ".join(line), flush=True)
