"""s23 prototype: gemm_wg.cu (wgmma, sm_90a) against the register-direct route on the llama3-8b q4_0 matrices."""
import math, statistics, sys, json
import torch
from onecat.kernels import gemm_ops, ops, cuda_ops
from onecat.kernels.driver import Kernel
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets

SIG = "ppppppppiiiii"
K_ = {(t, glu): Kernel("gemm_wg.cu", f"gemm_wg_q4_0_{t}{'_glu' if glu else ''}", SIG, pdl=True)
      for t in ("w32", "w32c", "w32d", "w32e", "w64") for glu in (False, True)}
BM = {"w32": 32, "w32c": 32, "w32d": 32, "w32e": 32, "w64": 64}


def wg_launch(x, w, tile, splits, glu=False):
    k = x.shape[-1]; m, n = x.numel() // k, w.shape[0]
    out = torch.empty((m, n // 2 if glu else n), dtype=x.dtype, device=x.device)
    steps = k // 128
    per = -(-steps // max(1, min(splits, steps))); splits = -(-steps // per)
    gx, gy = -(-n // 128), -(-m // BM[tile])
    ws = cnt = None
    if splits > 1:
        ws = torch.empty((splits, m, n), dtype=torch.float32, device=x.device)
        cnt = torch.zeros(gx * gy, dtype=torch.int32, device=x.device)
    K_[(tile, glu)]((gx, gy, splits), (128 + BM[tile], 1, 1), out.data_ptr(), x.data_ptr(), w.q.data_ptr(), 0,
                    w.meta.data_ptr(), 0, 0 if ws is None else ws.data_ptr(), 0 if cnt is None else cnt.data_ptr(),
                    m, n, k, 1, per)
    return out


def occupancy():
    import ctypes
    from onecat.kernels.driver import libcuda
    for (t, glu), k in K_.items():
        n = ctypes.c_int()
        libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), k.function(0), 128 + BM[t], 0)
        print(f"occupancy {t} glu={glu}: {n.value} blocks per SM", flush=True)


def main():
    occupancy()
    gen = torch.Generator("cuda").manual_seed(0)
    shapes = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]
    ms = [int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "32,64").split(",")]
    rows = []
    for n, k in shapes:
        first = packed_gpu(n, k, "q4_0", gen)
        nsets = max(1, min(16, math.ceil(ROTATE_BYTES / first.nbytes)))
        ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
        sub = first.select_rows(slice(0, 256)); wsub = sub.dequantize(torch.float64)
        for m in ms:
            xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
            want = xs[0].double() @ wsub.t()
            yr = ops.linear(xs[0], ws[0])
            er = float((yr[:, :256].double() - want).norm() / want.norm())
            route = statistics.median(time_sets(lambda i: ops.linear(xs[i], ws[i]), nsets, 20))
            shape = gemm_ops.gemm_shape(m, n, k, *gemm_ops.gemm_slots("q4_0", xs[0].device), rd=True)
            res = {}
            for tile in ("w32", "w32c", "w32d", "w32e"):
                for s in (1, 2, 4, 8):
                    if k // 128 // s < 4 and s > 1:
                        continue
                    y = wg_launch(xs[0], ws[0], tile, s)
                    e = float((y[:, :256].double() - want).norm() / want.norm())
                    d = float((y.float() - yr.float()).abs().max())
                    t = statistics.median(time_sets(lambda i: wg_launch(xs[i], ws[i], tile, s), nsets, 20))
                    res[f"{tile}x{s}"] = (t, e, d)
            best = min(res, key=lambda v: res[v][0])
            row = dict(n=n, k=k, m=m, route=f"{shape[0]}x{shape[1]}", route_us=route, route_err=er, best=best,
                       best_us=res[best][0], variants={v: dict(us=t, err=e, maxdiff=d) for v, (t, e, d) in res.items()})
            rows.append(row)
            print(json.dumps(row), flush=True)
        # GLU check on gate_up
        if n == 28672:
            for m in ms:
                x = xs[0][:m] if m <= xs[0].shape[0] else None
                x = torch.randn(m, k, device="cuda", generator=gen).half()
                ref = gemm_ops.gemm_launch(x, ws[0], None, "r32w", 1, glu=True)
                for tile in ("w32", "w32d"):
                    g = wg_launch(x, ws[0], tile, 1, glu=True)
                    rel = float((g.float() - ref.float()).norm() / ref.float().norm())
                    tg = statistics.median(time_sets(lambda i: wg_launch(xs[i][:m] if False else x, ws[i], tile, 1, glu=True), nsets, 20))
                    tr = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(x, ws[i], None, "r32w", 1, glu=True), nsets, 20))
                    print(f"GLU M {m} {tile}: rel diff vs r32w_glu {rel:.2e}; {tg:.1f} us vs r32w_glu {tr:.1f} us", flush=True)
        del ws, first
        torch.cuda.empty_cache()
    print()
    print(f"{'N x K':<11} {'M':>3} {'route':<8} {'us':>7} {'best wg':<8} {'us':>7} {'x':>5}  all")
    for r in rows:
        allv = " ".join(f"{v}:{d['us']:.1f}" for v, d in r["variants"].items())
        print(f"{r['n']}x{r['k']:<6} {r['m']:>3} {r['route']:<8} {r['route_us']:7.1f} {r['best']:<8} {r['best_us']:7.1f} "
              f"{r['route_us'] / r['best_us']:5.2f}  {allv}")
    errs = [d["err"] for r in rows for d in r["variants"].values()]
    print("max rel err of wg variants vs float64:", max(errs), "route max:", max(r["route_err"] for r in rows))


main()
