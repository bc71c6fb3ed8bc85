"""s30: split-K through thread-block clusters (gemm_epilogue.cuh cluster_sum8) against the counter merge, per
llama3-8b q4_0 matrix as the decode route splits it (gemm_shape, rd), M 32 and 64: CUDA events behind a queued
sleep (bench.time_sets), weights rotated past the L2, median / min / max of 30, the two forms alternated over
two rounds; outputs checked bit-equal first."""
from __future__ import annotations

import statistics

import torch

from onecat.kernels import gemm_ops
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets


def main() -> None:
    dev = torch.device("cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    sms, res = gemm_ops.gemm_slots("q4_0", dev)
    shapes = {"qkv": (6144, 4096), "o": (4096, 4096), "down": (4096, 14336), "gate_up": (28672, 4096)}
    print(f"{'matrix':8} {'M':>3} {'tile':>9} {'counter us (min-max)':>26} {'cluster us (min-max)':>26} {'change':>7}")
    for m in (32, 64):
        for name, (n, k) in shapes.items():
            glu = name == "gate_up"
            tile, split = gemm_ops.gemm_shape(m, n, k, sms, res, rd=True)
            if split == 1:
                print(f"{name:8} {m:3} {tile}x{split:<3} unsplit: no merge")
                continue
            first = packed_gpu(n, k, "q4_0", gen)
            nsets = max(1, min(16, -(-ROTATE_BYTES // first.nbytes)))
            ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
            xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
            a = gemm_ops.gemm_launch(xs[0], ws[0], None, tile, split, glu=glu, cluster=False)
            b = gemm_ops.gemm_launch(xs[0], ws[0], None, tile, split, glu=glu, cluster=True)
            assert torch.equal(a, b), (name, m)
            t = {False: [], True: []}
            for _ in range(2):
                for cl in (False, True):
                    t[cl] += time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, split, glu=glu,
                                                                      cluster=cl), nsets, 30)
            med = {cl: statistics.median(v) for cl, v in t.items()}
            cell = {cl: f"{med[cl]:7.2f} ({min(v):.2f}-{max(v):.2f})" for cl, v in t.items()}
            print(f"{name:8} {m:3} {tile}x{split:<3} {cell[False]:>26} {cell[True]:>26} {100 * (med[True] / med[False] - 1):+6.1f}%",
                  flush=True)
            del ws, xs


if __name__ == "__main__":
    main()
