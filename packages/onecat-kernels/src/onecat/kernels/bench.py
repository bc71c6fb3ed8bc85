"""Kernel benchmark: `python -m onecat.kernels.bench [--quick] [--json out.json]`.

Times each op (through `onecat.kernels.ops`, so the admitted provider runs) with CUDA events,
after warm-up, rotating over input sets larger than L2 so weights come from HBM. A long
`torch.cuda._sleep` is queued first so every event pair is enqueued before the GPU reaches it:
the times are device times, free of host launch gaps. Device copy bandwidth (bytes read + written)
is measured in the same run; each row prints GB/s (bytes the kernel must move / median time) and
its fraction of copy bandwidth, the torch reference's median time, and the error against it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import asdict, dataclass
from typing import Callable

import torch

from . import ops
from . import reference as ref
from .weights import BYTES_PER_BLOCK, GGUFWeight

ROTATE_BYTES = 160 << 20  # > 2x the H200's 60 MB L2 (V100: 6 MB)
LLAMA3_8B_GEMV = [(4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096)]  # (N, K)


@dataclass
class Row:
    kernel: str
    shape: str
    provider: str
    median_us: float
    min_us: float
    max_us: float
    gbps: float
    frac_copy: float
    torch_us: float
    rel_err: float


def time_sets(fn: Callable[[int], object], nsets: int, iters: int, warmup: int = 3) -> list[float]:
    """Device time (us) of fn(i % nsets) per call, one CUDA-event pair per call."""
    for i in range(warmup):
        fn(i % nsets)
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    torch.cuda._sleep(50_000_000)  # ~25 ms of GPU time: the loop below is enqueued before it ends
    for i, (a, b) in enumerate(events):
        a.record()
        fn(i % nsets)
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) * 1e3 for a, b in events]


def copy_bandwidth(nbytes: int = 1 << 30, iters: int = 20) -> float:
    """Device-to-device copy, GB/s of bytes read + written."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    times = time_sets(lambda i: dst.copy_(src), 1, iters)
    return 2 * nbytes / (statistics.median(times) * 1e-6) / 1e9


def _h(*shape, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).half()


def _gguf(n: int, k: int, t: str) -> GGUFWeight:
    nb = k // 32
    d = (torch.rand(n, nb, 1, device="cuda") * 0.02 + 0.005) * torch.where(torch.rand(n, nb, 1, device="cuda") < 0.5, 1, -1)
    qs = torch.randint(0, 256, (n, nb, BYTES_PER_BLOCK[t] - 2), dtype=torch.uint8, device="cuda")
    return GGUFWeight(torch.cat([d.half().view(torch.uint8), qs], -1).reshape(n, -1), t, (n, k))


def _nbytes(obj) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, GGUFWeight):
        return obj.nbytes
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    return 0


def _rel_err(a, b) -> float:
    if isinstance(a, (tuple, list)):
        return max(_rel_err(x, y) for x, y in zip(a, b))
    if not a.is_floating_point():
        return float((a != b).float().mean())
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def bench_case(kernel: str, shape: str, make: Callable[[], tuple], moved: Callable[[tuple], int], iters: int,
               copy_gbps: float, op: str | None = None) -> Row:
    op = op or kernel.split()[0]
    first = make()
    nsets = max(1, min(64, math.ceil(ROTATE_BYTES / max(1, _nbytes(first)))))
    sets = [first] + [make() for _ in range(nsets - 1)]
    fn = getattr(ops, op)
    provider = ops.registry.select(ops.problem(op, *first)).provider.name
    t = time_sets(lambda i: fn(*sets[i]), nsets, iters)
    t_ref = time_sets(lambda i: ops.registry.ops[op].reference(*sets[i]), nsets, max(5, iters // 4))
    err = _rel_err(fn(*first), ops.registry.ops[op].reference(*first)) if op != "reshape_and_cache" else 0.0
    med = statistics.median(t)
    gbps = moved(first) / (med * 1e-6) / 1e9
    return Row(kernel, shape, provider, med, min(t), max(t), gbps, gbps / copy_gbps, statistics.median(t_ref), err)


def cases(quick: bool):
    """(kernel, shape, make_inputs, bytes_moved) for every kernel, llama3-8b sizes."""
    T = 512
    out = []
    for t in (1, T):
        out.append(("rms_norm +res", f"T={t} H=4096", lambda t=t: (_h(t, 4096), _h(4096), 1e-5, _h(t, 4096)),
                    lambda a: 4 * _nbytes(a[0]) + _nbytes(a[1])))
    cs = ref.rope_cos_sin(128, 128, 8192, 500000.0, device="cuda")
    out.append(("rotary_embedding", f"T={T} Hq=32 Hk=8 D=128",
                lambda: (torch.randint(0, 8192, (T,), device="cuda"), _h(T, 4096), _h(T, 1024), 128, cs, True),
                lambda a: 2 * (_nbytes(a[1]) + _nbytes(a[2])) + T * 128 * 4))
    for op in ("silu_and_mul", "gelu_and_mul"):
        for t in (1, T):
            out.append((op, f"T={t} d=14336", lambda t=t: (_h(t, 2 * 14336),), lambda a: _nbytes(a[0]) * 3 // 2))
    out.append(("reshape_and_cache", f"T={T} Hk=8 D=128 fp16",
                lambda: (_h(T, 8, 128), _h(T, 8, 128), _h(2048, 16, 8, 128), _h(2048, 16, 8, 128),
                         torch.randperm(2048 * 16, device="cuda")[:T]),
                lambda a: 2 * (_nbytes(a[0]) + _nbytes(a[1]))))
    for b in (1, 32):
        out.append(("argmax", f"B={b} V=128256 fp16", lambda b=b: (_h(b, 128256),), lambda a: _nbytes(a[0])))
    shapes = LLAMA3_8B_GEMV[:1] if quick else LLAMA3_8B_GEMV
    for fmt in ("dense", "q4_0", "q8_0"):
        for n, k in shapes:
            for m in (1, 4, 16):
                def make(m=m, n=n, k=k, fmt=fmt):
                    w = _h(n, k, scale=k ** -0.5) if fmt == "dense" else _gguf(n, k, fmt)
                    return (_h(m, k), w, None)
                out.append((f"linear {fmt}", f"M={m} N={n} K={k}", make,
                            lambda a: _nbytes(a[1]) + _nbytes(a[0]) + a[0].shape[0] * a[1].shape[0] * 2))
    return out


def format_rows(rows: list[Row], copy_gbps: float, device: str) -> str:
    head = (f"{'kernel':<20} {'shape':<24} {'provider':<10} {'med us':>9} {'min us':>9} {'max us':>9} "
            f"{'GB/s':>7} {'%copy':>6} {'torch us':>9} {'rel err':>8}")
    lines = [f"device: {device}; copy bandwidth {copy_gbps:.0f} GB/s (read + write), measured in this run", head,
             "-" * len(head)]
    for r in rows:
        lines.append(f"{r.kernel:<20} {r.shape:<24} {r.provider:<10} {r.median_us:>9.1f} {r.min_us:>9.1f} "
                     f"{r.max_us:>9.1f} {r.gbps:>7.0f} {100 * r.frac_copy:>5.0f}% {r.torch_us:>9.1f} {r.rel_err:>8.1e}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m onecat.kernels.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="only the 4096x4096 GEMV shapes")
    ap.add_argument("--only", default="", help="substring filter on the kernel name")
    ap.add_argument("--json", default="", help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to time")
        return 1
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    device = f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs), torch {torch.__version__}"
    copy_gbps = copy_bandwidth()
    rows = []
    for kernel, shape, make, moved in cases(args.quick):
        if args.only and args.only not in kernel:
            continue
        try:
            rows.append(bench_case(kernel, shape, make, moved, args.iters, copy_gbps))
        except Exception as e:  # keep going: one failing kernel should not hide the others
            print(f"FAILED {kernel} {shape}: {type(e).__name__}: {e}")
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "copy_gbps": copy_gbps, "rows": [asdict(r) for r in rows]}, f, indent=1)
    print(format_rows(rows, copy_gbps, device))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
