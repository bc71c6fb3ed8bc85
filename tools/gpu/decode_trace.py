"""Where a register-direct decode launch spends its time: the trace entries of csrc/attention_decode_rd.cu
(the route's 4-warp kernel at D 128 with per-block timestamps; paged_attention_rd(trace=...)) on three
back-to-back calls over three KV sets (the middle one read), per block: entry, after the wait and first
loads, warp 0's first step, warp 0's loop end, all warps done, partials written, block end (after the
fused merge's count or the merge itself). Printed per case: the kernel's span by %globaltimer, CUDA
events around the middle call, how block starts and ends spread, and the median / max of each phase
(clock64 cycles within a block, shown in us at the run's SM clock), so the fixed cost of a short
launch (s14: ~6 us of FP8 batch 4 x 8K's 25-29 us) can be split into ramp, streaming, drain and merge.

    python tools/gpu/decode_trace.py [--json RAW.json] [--graphed] [KV:BATCH:CTX ...]
        (default e4m3:4:8192 f16:4:8192 e4m3:16:8192)
--graphed: the three calls in one CUDA graph (PDL between them, the metadata host-written: the first
loads go before the wait), so the middle call's ramp shows how much of it overlaps the first's tail.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys

import torch

from onecat.kernels import attention_ops
from onecat.kernels import reference as ref
from onecat.kernels.inputs import paged_metadata

sys.path.insert(0, "tools/gpu")
from block_trace import middle_of_three, middle_of_three_graphed, mmm, phase, points, sm_clock_mhz  # noqa: E402
from decode_attention_row import KV  # noqa: E402
POINTS = {1: "after wait+loads", 2: "first step done", 3: "warp 0 loop done", 4: "all warps done",
          5: "partials written", 6: "block end"}
PHASES = ["wait+loads", "first step", "loop", "other warps", "partials", "merge"]  # between consecutive points


def kv_set(kv: str, batch: int, ctx: int, seed: int, host_written: bool = True):
    """paged_attention_rd's arguments for `batch` requests of `ctx` keys, 32/8 heads, D 128, block 16;
    host_written: the metadata as the engine's decode graphs pass it (loads before the wait)."""
    hq, hk, d, bs = 32, 8, 128, 16
    nb = batch * (-(-ctx // bs)) + 4
    md = paged_metadata([1] * batch, [ctx] * batch, bs, nb, torch.Generator().manual_seed(seed), "cuda")
    md = dataclasses.replace(md, host_written=host_written)
    q = torch.randn(batch, hq, d, device="cuda").half()
    x = torch.randn(nb, bs, hk, d, device="cuda")
    kc = x.half() if kv == "f16" else ref.fp8_quantize(x, 0.02, KV[kv])
    x.normal_()
    vc = x.half() if kv == "f16" else ref.fp8_quantize(x, 0.02, KV[kv])
    return q, kc, vc, md, d ** -0.5, None, None, *(() if kv == "f16" else (0.02, 0.02))


def run(kv: str, batch: int, ctx: int, out: list | None = None, graphed: bool = False) -> None:
    sets = [kv_set(kv, batch, ctx, 10 + i) for i in range(3)]
    blocks = 8 * batch * 1024
    trs = [torch.zeros(blocks, 16, dtype=torch.int64, device="cuda") for _ in sets]
    three = middle_of_three_graphed if graphed else middle_of_three
    events_us = three(lambda i: attention_ops.paged_attention_rd(*sets[i], trace=trs[i]), trs)
    summarize(kv, batch, ctx, trs[1].cpu(), trs[0].cpu(), events_us, sm_clock_mhz(), out)


def summarize(kv: str, batch: int, ctx: int, tr: torch.Tensor, prev: torch.Tensor, events_us: float, clock: float,
              out: list | None = None) -> None:
    """Print one case from its blocks' records (rows of 16 int64, see csrc common.cuh block_trace) and the previous
    call's; append the raw records to `out`."""
    tr = tr[tr[:, 0] != 0]
    prev = prev[prev[:, 0] != 0]
    empty = (tr[:, 7] >> 16) & 1
    full = tr[empty == 0]
    t0 = int(tr[:, 0].min())

    def us(v) -> float:
        return (int(v) - t0) / 1e3

    print(f"\n{kv} batch {batch} x {ctx}: {len(tr)} blocks ({int(empty.sum())} empty), "
          f"SMs {len(set((tr[:, 7] & 0xFFFF).tolist()))}; events around the call {events_us:.1f} us; globaltimer span "
          f"{us(tr[:, 6].max()):.1f} us (from the first block's entry)")
    print(f"  previous call's last block end at {us(prev[:, 6].max()):+.1f} us; this call's blocks enter "
          f"{us(tr[:, 0].min()):.1f} .. {us(tr[:, 0].max()):.1f} us (median {us(tr[:, 0].median()):.1f})")
    print("\n".join(points(full, POINTS, t0)))
    print(f"  per block (clock64 at {clock:.0f} MHz): "
          + ", ".join(f"{n} {mmm(phase(full, j, j + 1, clock))}" for j, n in enumerate(PHASES)) + "  (min / median / max us)")
    # the fused merge (slot 15: the clock when the count resolved): its count, then the group's merge
    # in the block that counted last (per group the block with the longest time after its count)
    if bool((full[:, 15] != 0).all()):
        nparts = max(1, len(tr) // (8 * batch))
        idx = torch.arange(len(tr))[empty == 0]
        group = (idx // 8 // nparts) * 8 + idx % 8
        count = (full[:, 15] - full[:, 13]).double() / clock
        rest = (full[:, 14] - full[:, 15]).double() / clock
        last = [max((i for i in range(len(full)) if int(group[i]) == gid), key=lambda i: float(rest[i]))
                for gid in sorted(set(group.tolist()))]
        print(f"  fused merge (clock64): count {mmm(count)}; the merging blocks ({len(last)}): count "
              f"{mmm(count[last])}, merge {mmm(rest[last])}, from the block's last warp done "
              f"{mmm((full[last, 14] - full[last, 12]).double() / clock)}  (min / median / max us)")
    # the end of the streaming by how many blocks shared the SM (one wave: 2 or 3 per SM here)
    per_sm: dict[int, int] = {}
    for sm in (full[:, 7] & 0xFFFF).tolist():
        per_sm[sm] = per_sm.get(sm, 0) + 1
    by: dict[int, list[float]] = {}
    for row in full.tolist():
        by.setdefault(per_sm[row[7] & 0xFFFF], []).append(us(row[3]))
    print("  warp 0 loop done by blocks on its SM: " + ", ".join(
        f"{k} per SM ({len(v)} blocks) median {statistics.median(v):.1f} max {max(v):.1f} us" for k, v in sorted(by.items())))
    if out is not None:
        out.append(dict(kv=kv, batch=batch, ctx=ctx, events_us=events_us, sm_clock_mhz=clock, trace=tr.tolist(),
                        prev_end_ns=int(prev[:, 6].max())))


def main(argv: list[str]) -> int:
    dump, graphed = None, "--graphed" in argv
    argv = [a for a in argv if a != "--graphed"]
    if argv and argv[0] == "--json":
        dump, argv = argv[1], argv[2:]
    cases = argv or ["e4m3:4:8192", "f16:4:8192", "e4m3:16:8192"]
    print(f"decode trace, {torch.cuda.get_device_name(0)}; 32/8 heads D 128, block 16; "
          f"{'one CUDA graph of the three calls (events: replay / 3)' if graphed else 'eager'}; measured")
    out = []
    for c in cases:  # KV:BATCH:CTX
        kv, b, ctx = c.split(":")
        run(kv, int(b), int(ctx), out, graphed)
    if dump:
        import json
        json.dump(out, open(dump, "w"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
