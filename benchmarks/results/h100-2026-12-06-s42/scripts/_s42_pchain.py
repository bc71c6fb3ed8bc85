"""s42: the persistent q4_0 GEMV chain (gemv_pchain.cu, beside this file) against the graphed PDL chain of the
route's kernels (tools/gpu/gemv_chain.py's chains, `auto` shapes), in one process, on the same weights.

    python3 _s42_pchain.py [--chains layer,square,updown] [--variants t1024u1,t1024u2,t512u1,t512u2] [--replays 20]

Checks first: a 4-link chain (qkv, o, gate_up, down) of each variant against an FP32 chain of the same arithmetic
(x rounded to FP16 between links, W dequantized), and the route's graphed chain against the same reference.
Then times: us per chain pass (CUDA graph of one launch / of the route's kernels), MEASURED."""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "gpu"))
import gemv_chain  # noqa: E402  (the graphed chain: chain_links / chain_once / time_chain)

from onecat.kernels import driver  # noqa: E402
from onecat.kernels.bench import copy_bandwidth, packed_gpu, time_graph  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gemv_pchain.cu")
VARIANTS = {"t1024u1": (1024, 1), "t1024u2": (1024, 1), "t512u1": (512, 2), "t512u2": (512, 2)}  # threads, blocks/SM


# smollm2-135m's projections (qkv 960 x 576, o, gate_up 3072 x 576, down 576 x 1536) x 30 layers: G1's shape,
# where the chain is all boundaries (16 MB a pass)
SMOL = [("plain", 960, 576), ("plain", 576, 576), ("plain", 3072, 576), ("plain", 576, 1536)] * 30


def links_of(cname: str):
    return SMOL if cname == "smol" else gemv_chain.chain_links(cname)


def kernel(name: str) -> driver.Kernel:
    return driver.Kernel(SRC, f"gemv_pchain_{name}", "pipp")


def blocks_per_sm(k: driver.Kernel, threads: int) -> int:
    n = ctypes.c_int()
    driver._check(driver.libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(n), k.function(torch.cuda.current_device()), threads, 0), "occupancy")
    return n.value


def pick_kp(n: int, nch: int, workers: int) -> int:
    """K parts of a row: the fewest whose units fill >= 90% of the warps' last round (else the best of 1/2/4)."""
    best, eff_best = 1, 0.0
    for kp in (1, 2, 4):
        if nch % kp:
            continue
        units = n * kp
        rounds = -(-units // workers)
        eff = units / (rounds * workers)
        if eff >= 0.9:
            return kp
        if eff > eff_best:
            best, eff_best = kp, eff
    return best


class PChain:
    """One persistent launch over `ws` (links chained as gemv_chain.chain_once does: x = the first K outputs)."""

    def __init__(self, ws, x0: torch.Tensor, name: str, threads: int, bps_cap: int):
        self.k = kernel(name)
        self.threads = threads
        dev = x0.device
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        self.bps = min(bps_cap, blocks_per_sm(self.k, threads))
        self.grid = sms * self.bps
        workers = self.grid * threads // 32
        words, self.outs, prev = [], [], None
        for w in ws:
            n, k = w.shape
            kp = pick_kp(n, k // 32, workers)
            out = torch.zeros(kp, n, dtype=torch.float32, device=dev)
            xin, kp_in, xstride = (0, 0, 0) if prev is None else (prev.data_ptr(), prev.shape[0], prev.shape[1])
            words += [out.data_ptr(), xin, x0.data_ptr() if prev is None else 0, w.q.data_ptr(), w.meta.data_ptr(),
                      n | (k << 32), kp | (kp_in << 32), xstride]
            self.outs.append(out)
            prev = out
        self.tasks = torch.tensor(words, dtype=torch.int64, device=dev)
        self.ntasks = len(ws)
        self.bar = torch.zeros(2, dtype=torch.int32, device=dev)
        self.err = torch.zeros(1, dtype=torch.int32, device=dev)

    def __call__(self) -> None:
        self.k((self.grid, 1, 1), (self.threads, 1, 1), self.tasks.data_ptr(), self.ntasks, self.bar.data_ptr(),
               self.err.data_ptr())

    def result(self) -> torch.Tensor:
        return self.outs[-1].sum(0)


def reference(ws, x0: torch.Tensor) -> torch.Tensor:
    """FP32 chain: x rounded to FP16 between links as the kernels' staging does."""
    x = x0.float().reshape(-1)
    y = None
    for w in ws:
        k = w.shape[1]
        y = w.dequantize(torch.float32).to(x.device) @ x[:k].half().float()
        x = y
    return y


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chains", default="layer,square,updown,smol")
    ap.add_argument("--variants", default="t1024u1,t1024u2,t512u1,t512u2")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    gen = torch.Generator("cuda").manual_seed(0)
    print(f"GPU {torch.cuda.get_device_name(0)}")
    # correctness: one layer's 4 links
    ws = [packed_gpu(n, k, "q4_0", gen) for n, k in gemv_chain.LAYER]
    x0 = (torch.randn(1, 4096, device="cuda", generator=gen) * 0.05).half()
    want = reference(ws, x0)
    outs = [torch.empty(1, n, dtype=torch.float16, device="cuda") for n, _ in gemv_chain.LAYER]
    gemv_chain.chain_once(ws, ["plain"] * 4, x0, outs, None, True)
    torch.cuda.synchronize()
    print(f"check: route chain (4 links) rel err vs FP32 {rel(outs[-1].float().reshape(-1), want):.2e}")
    for name in a.variants.split(","):
        threads, cap = VARIANTS[name]
        pc = PChain(ws, x0, name, threads, cap)
        pc()
        torch.cuda.synchronize()
        print(f"check: {name} grid {pc.grid} ({pc.bps}/SM) err flag {int(pc.err.item())} rel err vs FP32 "
              f"{rel(pc.result(), want):.2e}; kp per link {[o.shape[0] for o in pc.outs]}")
    del ws, outs
    torch.cuda.empty_cache()
    copy0 = copy_bandwidth()
    rows = []
    for cname in a.chains.split(","):
        links = links_of(cname)
        ws = [packed_gpu(n, k, "q4_0", gen) for _, n, k in links]
        outs = [torch.empty(1, n, dtype=torch.float16, device="cuda") for _, n, _ in links]
        x0 = (torch.randn(1, links[0][2], device="cuda", generator=gen) * 0.05).half()
        moved = sum(w.nbytes for w in ws)
        runs = {"route (graphed, PDL)": lambda: gemv_chain.time_chain(
            lambda: gemv_chain.chain_once(ws, ["plain"] * len(ws), x0, outs, None, True), True, a.replays)}
        pchains = {}
        for name in a.variants.split(","):
            threads, cap = VARIANTS[name]
            pc = PChain(ws, x0, name, threads, cap)
            pchains[f"{name} ({pc.bps}/SM)"] = pc
            runs[f"{name} ({pc.bps}/SM)"] = lambda pc=pc: time_graph(pc, a.replays)
        times = {k: [] for k in runs}
        for _ in range(a.rounds):
            for k, fn in runs.items():
                times[k] += fn()
        for k, pc in pchains.items():
            assert int(pc.err.item()) == 0, f"{k}: a barrier timed out"
        for k, t in times.items():
            rows.append((cname, len(links), moved, k, statistics.median(t), min(t), max(t)))
        del ws, outs, runs, pchains
        torch.cuda.empty_cache()
    copy = (copy0 + copy_bandwidth()) / 2
    print(f"copy bandwidth {copy:.0f} GB/s (mean of before / after); chains of dependent q4_0 M = 1 GEMVs, weights "
          f"distinct per link (HBM); median/min/max of {a.rounds} x {a.replays} replays; MEASURED")
    print(f"{'chain':<8} {'links':>5} {'MB':>7} {'variant':<22} {'med us':>8} {'min':>8} {'max':>8} {'us/link':>7} "
          f"{'%copy':>6}")
    for cname, nl, moved, k, med, mn, mx in rows:
        print(f"{cname:<8} {nl:>5} {moved / 1e6:>7.1f} {k:<22} {med:>8.1f} {mn:>8.1f} {mx:>8.1f} {med / nl:>7.2f} "
              f"{100 * moved / med / 1e3 / copy:>5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
