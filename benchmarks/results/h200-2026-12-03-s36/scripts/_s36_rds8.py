"""s36: the int8-activation q4_0 GEMM (_s36_rds8.cu, not routed) against the route's register-direct FP16 tiles
on llama3-8b's decode-batch matrices. Per matrix and M: (1) outputs against a float64 reference of the same int8
quantization of x (the kernel's arithmetic: only FP32 accumulation and the FP16 store differ) and, for scale,
both routes against float64 of the unquantized x; (2) us per link in one CUDA graph of LINKS distinct weights
(> L2), PDL on, the route and the variants alternated, median (min-max) of the replays. From the repo root on
the GPU machine:

    python3 benchmarks/results/h200-2026-12-03-s36/scripts/_s36_rds8.py [--m 32] [--variants r32w,r32w1]
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics

import torch
import torch.nn.functional as F

from onecat.kernels import build, gemm_ops
from onecat.kernels.bench import packed_gpu, time_graph
from onecat.kernels.cuda_ops import split_counters
from onecat.kernels.driver import Kernel

SRC = pathlib.Path(__file__).with_name("_s36_rds8.cu")
DST = pathlib.Path(build.__file__).parent / "csrc" / "gemm_rds8.cu"
ARGS = "ppppppppiiiii"
MATRICES = {"gate_up": (28672, 4096, True), "down": (4096, 14336, False), "qkv": (6144, 4096, False),
            "o": (4096, 4096, False)}
_K = {}


def kern(variant: str, glu: bool) -> Kernel:
    key = (variant, glu)
    if key not in _K:
        _K[key] = Kernel("gemm_rds8.cu", f"gemm_rds8_q4_0_{variant}{'_glu' if glu else ''}",
                         ARGS + ("pif" if glu else ""), pdl=True)
    return _K[key]


def rds8(x, w, variant: str, splits: int, glu: bool):
    k = x.shape[-1]
    m, n = x.shape[0], w.shape[0]
    t = gemm_ops.RD_TILES["r32" if variant == "r32" else "r32w"]
    steps = k // 128
    per = -(-steps // max(1, min(splits, steps)))
    splits = -(-steps // per)
    gx, gy = -(-n // t.bn), -(-m // 32)
    out = torch.empty(m, n // 2 if glu else n, dtype=torch.half, device=x.device)
    ws = cnt = None
    if splits > 1:
        ws = torch.empty(splits, m, n, dtype=torch.float32, device=x.device)
        cnt = split_counters(x.device, gx * gy)
    extra = (0, 0, 0.0) if glu else ()
    kern(variant, glu)((gx, gy, splits), (128, 1, 1), out.data_ptr(), x.data_ptr(), w.q.data_ptr(), 0,
                       w.meta.data_ptr(), 0, ws.data_ptr() if ws is not None else 0,
                       cnt.data_ptr() if cnt is not None else 0, m, n, k, 1, per, *extra)
    return out


def quantized_x(x: torch.Tensor) -> torch.Tensor:
    """x as the kernel quantizes it, dequantized in float64: per 32-chunk d = 1 / fp16_rd(127 / amax)."""
    m, k = x.shape
    xc = x.float().view(m, k // 32, 32)
    amax = xc.abs().amax(-1)
    t = (127.0 / amax).clamp(max=65504.0)
    h = t.half()
    h = torch.where(h.float() > t, (h.view(torch.int16) - 1).view(torch.half), h)
    xq = torch.round(xc.double() * h.double().unsqueeze(-1))
    assert xq.abs().max() <= 127
    dx = torch.where(amax > 0, 1.0 / h.float(), torch.zeros_like(amax)).double()
    return (xq * dx.unsqueeze(-1)).view(m, k)


def finish(y64: torch.Tensor, glu: bool) -> torch.Tensor:
    if not glu:
        return y64
    g, u = y64.chunk(2, dim=-1)
    return F.silu(g) * u


def rel(a, b) -> float:
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="32")
    ap.add_argument("--variants", default="r32w,r32w1")
    ap.add_argument("--matrices", default="gate_up,down,qkv,o")
    ap.add_argument("--links", type=int, default=8)
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    shutil.copy(SRC, DST)
    try:
        return run(args)
    finally:
        DST.unlink()


def run(args) -> int:
    dev = torch.device("cuda")
    gen = torch.Generator("cuda").manual_seed(0)
    sms, res = gemm_ops.gemm_slots("q4_0", dev)
    print(f"GPU {torch.cuda.get_device_name(0)}, {sms} SMs; q4_0 llama3-8b matrices, x ~ N(0, 1) fp16; MEASURED")
    for v in args.variants.split(","):
        for glu in (False, True):
            fn = kern(v, glu).function(0)
            n = __import__("ctypes").c_int()
            gemm_ops.libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(__import__("ctypes").byref(n), fn, 128, 0)
            print(f"  gemm_rds8_q4_0_{v}{'_glu' if glu else ''}: {n.value} blocks per SM")
    rows = []
    for name in args.matrices.split(","):
        n, k, glu = MATRICES[name]
        links = args.links * (2 if n * k < 50e6 else 1)
        ws = [packed_gpu(n, k, "q4_0", gen) for _ in range(links)]
        w64 = ws[0].dequantize().double()
        for m in (int(v) for v in args.m.split(",")):
            x = torch.randn(m, k, device=dev, generator=gen).half()
            tile, splits = gemm_ops.gemm_shape(m, n, k, sms, res, rd=True)
            if tile == "w64":  # the wgmma route at 33..64 rows; the int8 tiles go two 32-row tiles high
                rtile, rsplits = "r32w", splits
            else:
                rtile, rsplits = tile, splits
            ref_x = finish(x.double() @ w64.T, glu)
            ref_q = finish(quantized_x(x) @ w64.T, glu)
            route = gemm_ops.gemm_launch(x, ws[0], None, tile, splits, glu=glu)
            print(f"{name} {n}x{k} M {m}: route {tile} x{splits}: rel err vs float64(x) {rel(route, ref_x):.2e}")
            variants = []
            for v in args.variants.split(","):
                if (v == "r32") != (rtile == "r32"):
                    continue
                y = rds8(x, ws[0], v, rsplits, glu)
                torch.cuda.synchronize()
                ok = rel(y, ref_q) < 2e-3
                print(f"  rds8 {v} x{rsplits}: vs float64(int8 x) {rel(y, ref_q):.2e} (must be < 2e-3), "
                      f"vs float64(x) {rel(y, ref_x):.2e}, vs route {rel(y, route):.2e}{'' if ok else ': WRONG, not timed'}")
                if ok:
                    variants.append(v)
            if not variants:
                continue
            times = {}
            for _ in range(args.rounds):
                def run_route():
                    for w in ws:
                        gemm_ops.gemm_launch(x, w, None, tile, splits, glu=glu)
                times.setdefault("route", []).extend(v / links for v in time_graph(run_route, args.replays))
                for v in variants:
                    def run_v(v=v):
                        for w in ws:
                            rds8(x, w, v, rsplits, glu)
                    times.setdefault(v, []).extend(t / links for t in time_graph(run_v, args.replays))
            base = statistics.median(times["route"])
            for key, ts in times.items():
                med = statistics.median(ts)
                rows.append((f"{name}{' GLU' if glu else ''}", m, key if key != "route" else f"route {tile}",
                             rsplits if key != "route" else splits, med, min(ts), max(ts), base / med))
        del ws
        torch.cuda.empty_cache()
    print(f"\n{'matrix':>12} {'M':>3} {'kernel':>12} {'splits':>6} {'us median':>10} {'min-max':>15} {'route/this':>10}")
    for name, m, key, sp, med, lo, hi, sp_up in rows:
        print(f"{name:>12} {m:>3} {key:>12} {sp:>6} {med:>10.2f} {f'{lo:.2f}-{hi:.2f}':>15} {sp_up:>10.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
