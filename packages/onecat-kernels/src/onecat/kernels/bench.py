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


def capture_graph(fn: Callable[[], object]) -> torch.cuda.CUDAGraph:
    """fn()'s launches captured once in a CUDA graph, after one warm-up call on a side stream (compiles,
    loads and allocates workspaces outside capture)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def time_graph(fn: Callable[[], object], replays: int = 30, n_calls: int = 1) -> list[float]:
    """Device time (us) per call of fn()'s n_calls calls, captured once in a CUDA graph and replayed
    `replays` times, one CUDA-event pair per replay behind a queued sleep: launches off the clock,
    kernels back to back as a decode graph runs them (with programmatic dependent launch on sm_90)."""
    g = capture_graph(fn)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    torch.cuda._sleep(20_000_000)
    for a, b in ev:
        a.record()
        g.replay()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) * 1e3 / n_calls for a, b in ev]


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
    out += sampling_cases()
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


def sampling_cases():
    """`sample` rows: GB/s counts one read of the logits (the kernel makes 2 to 10 passes over each
    row: argmax, 4 top-k and 4 top-p radix passes when those filters are on, the Gumbel draw)."""
    def make(b, v, top_k, top_p, temperature=0.7):
        full = lambda x, dt: torch.full((b,), x, dtype=dt, device="cuda")  # noqa: E731
        return (_h(b, v, scale=4.0), full(temperature, torch.float32), full(top_k, torch.int32),
                full(top_p, torch.float32), full(0.0, torch.float32), torch.arange(b, device="cuda"),
                torch.zeros(b, dtype=torch.int64, device="cuda"))
    out = []
    for b, v, k, p in ((1, 128256, 50, 0.9), (32, 128256, 50, 0.9), (32, 262144, 0, 0.95), (256, 128256, 0, 1.0)):
        out.append(("sample", f"B={b} V={v} k={k} p={p}", lambda b=b, v=v, k=k, p=p: make(b, v, k, p),
                    lambda a: _nbytes(a[0])))
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
    ap.add_argument("--gemv", action="store_true", help="the packed GEMV table (formats x llama3-8b shapes x M)")
    ap.add_argument("--formats", default=",".join(GEMV_FORMATS))
    ap.add_argument("--m", default="1,4,16")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to time")
        return 1
    if args.gemv:
        shapes = LLAMA3_8B_GEMV[:1] if args.quick else LLAMA3_8B_GEMV
        print(gemv_bench(args.iters, args.formats.split(","), shapes, [int(v) for v in args.m.split(",")], args.json))
        return 0
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



# -- packed GEMV benchmark (`--gemv`): the K2 contract ------------------------------------------
V100_READ_GBPS = 879.0  # measured V100 read ceiling (v100.md); projections scale it by H200 efficiency
GEMV_FORMATS = ("q4_0", "q4_k", "awq", "q4_1", "q8_0", "q6_k")


def packed_gpu(n: int, k: int, kind: str, gen: torch.Generator, scale: float = 0.02):
    """A random PackedWeight made directly on the GPU (valid planes; packing 128256x4096 on the host
    would take minutes). Scales are finite and of realistic size; `scale` sets them as
    GGUFWeight.random's does (q4_0 / q8_0 block scales within +-[scale / 4, 1.25 scale]; q4_k's super-block
    d within [scale / 100, scale / 20], dmin = 8 d and each sub-block's min 15 / 16 of its scale, so rows
    are near zero-mean: weight RMS 5.1 scale)."""
    from .weights import PackedWeight, _k4_fields

    def rb(*shape):
        return torch.randint(0, 256, shape, dtype=torch.uint8, device="cuda", generator=gen)

    u = scale / 0.02  # the ranges below are for scale 0.02

    def f16(shape, lo, hi, signed=False):
        v = (torch.rand(shape, device="cuda", generator=gen) * (hi - lo) + lo) * u
        if signed:
            v = torch.where(torch.rand(shape, device="cuda", generator=gen) < 0.5, v, -v)
        return v.half().view(torch.uint8).reshape(*shape[:-1], shape[-1] * 2)

    nch = k // 32
    qh, g = None, 32
    if kind == "q8_0":
        q, meta = rb(n, k), f16((n, nch), 0.005, 0.025, True)
    elif kind == "q6_k":
        q, qh = rb(n, k // 2), rb(n, k // 4)
        sc = rb(n, nch, 2)
        d = f16((n, nch // 8, 1), 1e-4, 4e-4).view(n, nch // 8, 1, 2).expand(n, nch // 8, 8, 2).reshape(n, nch, 2)
        meta = torch.cat([sc, d], -1).reshape(n, -1).contiguous()
    else:
        q = rb(n, k // 2)
        if kind == "q4_0":
            meta = f16((n, nch), 0.005, 0.025, True)
        elif kind == "q4_1":
            meta = torch.stack([f16((n, nch), 0.005, 0.025).view(n, nch, 2),
                                f16((n, nch), 0.0, 0.1, True).view(n, nch, 2)], -2).reshape(n, -1)
        elif kind == "q4_k":  # rows near zero-mean, as real Q4_K: dmin = 8 d, min_j = 15 / 16 scale_j
            d = (torch.rand((n, nch // 8, 1), device="cuda", generator=gen) * 8e-4 + 2e-4) * u
            sc = torch.randint(0, 64, (n, nch // 8, 8), device="cuda", generator=gen)
            f16b = lambda v: v.half().view(torch.uint8).reshape(n, -1, 2)  # noqa: E731
            head = torch.cat([f16b(d), f16b(8 * d), _k4_fields(sc, (15 * sc + 8) // 16).to(torch.uint8)], -1)
            meta = head.reshape(n, -1).contiguous()
        else:  # awq g128: (s, 1024 + z)
            g = 128
            s = (torch.rand(n, k // g, device="cuda", generator=gen) * 0.003 + 0.001) * u
            z = torch.randint(0, 16, (n, k // g), device="cuda", generator=gen).float() + 1024
            meta = torch.stack([s, z], -1).half().contiguous().view(torch.uint8).reshape(n, -1)
    return PackedWeight(kind, (n, k), q.contiguous(), meta.contiguous(), qh, g)


def packed_gpu_sets(n: int, k: int, kind: str, gen: torch.Generator, max_sets: int = 16) -> list:
    """packed_gpu weights enough to rotate past ROTATE_BYTES (at most max_sets), so that a timed call reads its
    weights from memory, not from the L2 the call before filled."""
    first = packed_gpu(n, k, kind, gen)
    nsets = max(1, min(max_sets, math.ceil(ROTATE_BYTES / first.nbytes)))
    return [first] + [packed_gpu(n, k, kind, gen) for _ in range(nsets - 1)]


def time_stream(fn: Callable[[int], object], nsets: int, calls: int = 20, reps: int = 5) -> list[float]:
    """Per-call device time (us) of `calls` back-to-back launches (one event pair around them)."""
    for i in range(3):
        fn(i % nsets)
    torch.cuda.synchronize()
    out = []
    torch.cuda._sleep(20_000_000)
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    j = 0
    for a, b in evs:
        a.record()
        for _ in range(calls):
            fn(j % nsets)
            j += 1
        b.record()
    torch.cuda.synchronize()
    for a, b in evs:
        out.append(a.elapsed_time(b) * 1e3 / calls)
    return out


def gemv_bench(iters: int, formats, shapes, ms, out_json: str = "") -> str:
    from . import cuda_ops
    props = torch.cuda.get_device_properties(0)
    device = f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs), torch {torch.__version__}"
    gen = torch.Generator("cuda").manual_seed(0)
    copy0 = copy_bandwidth()
    rows = []
    for kind in formats:
        for n, k in shapes:
            first = packed_gpu(n, k, kind, gen)
            wbytes = first.nbytes
            nsets = max(1, min(32, math.ceil(ROTATE_BYTES / wbytes)))
            ws = [first] + [packed_gpu(n, k, kind, gen) for _ in range(nsets - 1)]
            for m in ms:
                xs = [(torch.randn(m, k, device="cuda", generator=gen)).half() for _ in range(nsets)]
                sel = ops.registry.select(ops.problem("linear", xs[0], ws[0])).provider.name
                fn = lambda i: ops.linear(xs[i], ws[i])  # noqa: E731
                # correctness: poisoned output, first 256 rows against the float64 reference
                with cuda_ops.poison_outputs():
                    y = ops.linear(xs[0], ws[0])
                sub = ws[0].select_rows(slice(0, 256))
                want = xs[0].double().cpu() @ sub.dequantize(torch.float64).cpu().t()
                got = y[:, :sub.shape[0]].double().cpu()
                err = float((got - want).norm() / want.norm().clamp_min(1e-30))
                finite = bool(torch.isfinite(y).all())
                t = time_sets(fn, nsets, iters)
                ts = time_stream(fn, nsets)
                moved = wbytes + m * k * 2 + m * n * 2
                med = statistics.median(t)
                rows.append(dict(format=kind, n=n, k=k, m=m, provider=sel, bytes=moved, median_us=med,
                                 min_us=min(t), max_us=max(t), gbps=moved / med / 1e3, stream_us=statistics.median(ts),
                                 stream_gbps=moved / statistics.median(ts) / 1e3, rel_err=err, finite=finite))
                del xs
            del ws, first
            torch.cuda.empty_cache()
    copy1 = copy_bandwidth()
    copy = (copy0 + copy1) / 2
    for r in rows:
        r["frac_copy"] = r["gbps"] / copy
        r["stream_frac_copy"] = r["stream_gbps"] / copy
        eff = min(1.0, r["frac_copy"])
        r["v100_projected_us"] = r["bytes"] / (V100_READ_GBPS * eff) / 1e3
    head = (f"{'format':<6} {'N x K':<13} {'M':>2} {'provider':<9} {'MB':>7} {'med us':>8} {'min us':>8} {'max us':>8} "
            f"{'GB/s':>6} {'%copy':>6} {'strm us':>8} {'%copy':>6} {'rel err':>8} {'V100 us (projected)':>20}")
    lines = [f"device: {device}",
             f"copy bandwidth (read + write) measured in this run: {copy0:.0f} GB/s before, {copy1:.0f} after; "
             f"%copy uses their mean {copy:.0f}",
             "med/min/max: one CUDA-event pair per call, rotating over weight sets > 160 MB (weights from HBM); "
             "strm: per-call time of 20 back-to-back calls",
             "V100 projected = bytes / (879 GB/s x min(1, H200 %copy)) -- a projection, not a measurement",
             head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['format']:<6} {str(r['n']) + 'x' + str(r['k']):<13} {r['m']:>2} {r['provider']:<9} "
                     f"{r['bytes'] / 1e6:>7.2f} {r['median_us']:>8.1f} {r['min_us']:>8.1f} {r['max_us']:>8.1f} "
                     f"{r['gbps']:>6.0f} {100 * r['frac_copy']:>5.0f}% {r['stream_us']:>8.1f} "
                     f"{100 * r['stream_frac_copy']:>5.0f}% {r['rel_err']:>8.1e}{'' if r['finite'] else ' NaN!'} "
                     f"{r['v100_projected_us']:>20.1f}")
    text = "\n".join(lines)
    if out_json:
        with open(out_json, "w") as f:
            json.dump({"device": device, "copy_gbps_before": copy0, "copy_gbps_after": copy1, "copy_gbps": copy,
                       "v100_read_gbps": V100_READ_GBPS, "rows": rows}, f, indent=1)
    return text


if __name__ == "__main__":
    raise SystemExit(main())
