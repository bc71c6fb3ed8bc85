"""Where a register-direct or wgmma GEMM launch spends its time: the _trace entries of csrc/gemm_rd.cu and
csrc/gemm_wg.cu (the route's tiles with per-block timestamps; gemm_ops.gemm_launch(trace=...); the wgmma
tiles' point 2 is the first step's MMAs issued, not finished; w64b2 records none) on three back-to-back launches
over three weight sets (distinct, so W comes from HBM; the middle launch read), per block: entry, the
first W / x loads out and x's first step stashed, the first step done, the K loop done, the tile (or
split-K partial) stored, the split-K count resolved, block end. Printed per case: the grid against the
resident slots (waves), the kernel's span by %globaltimer, CUDA events around the middle launch, the
points' spread, the per-block phases by clock64, and for split-K the merging block of each tile (the
one with the longest time after its count). For G3 (#7): how much of a batch-32 / 64 GEMM is ramp,
K loop and epilogue.

    python tools/gpu/gemm_trace.py [--json RAW.json] [--l2] [N:K:M[:TILE:SPLITS] ...]
        (--l2: one weight set for the three launches, so a matrix that fits L2 is read from there:
        whether a K loop waits on DRAM or on the SM)
        (default: llama3-8b's q4_0 matrices qkv 6144:4096, o 4096:4096, gate_up 28672:4096,
        down 4096:14336 at M 32 and 64, each with the route's tile and split: gemm_ops.gemm_shape)
"""

from __future__ import annotations

import json
import sys

import torch

from onecat.kernels import gemm_ops
from onecat.kernels.bench import packed_gpu

sys.path.insert(0, "tools/gpu")
from block_trace import middle_of_three, mmm, phase, points, recorded, sm_clock_mhz  # noqa: E402

POINTS = {1: "first loads out", 2: "first step done", 3: "K loop done", 4: "tile / partial stored",
          5: "split-K count resolved", 6: "block end"}
SHAPES = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]


def run(n: int, k: int, m: int, tile: str | None, splits: int | None, out: list, l2: bool = False) -> None:
    gen = torch.Generator(device="cuda").manual_seed(n + k + m)
    if tile is None:
        dev = torch.device("cuda")
        tile, splits = gemm_ops.gemm_shape(m, n, k, *gemm_ops.gemm_slots("q4_0", dev),
                                           rd=gemm_ops.rd_fits("q4_0", k, dev))
    tiles = {**gemm_ops.RD_TILES, **gemm_ops.WG_TILES}
    if tile not in tiles:
        raise SystemExit(f"{n}x{k} M {m}: tile {tile} has no trace entry (register-direct and wgmma tiles: "
                         f"{sorted(tiles)})")
    ws = [packed_gpu(n, k, "q4_0", gen)] * 3 if l2 else [packed_gpu(n, k, "q4_0", gen) for _ in range(3)]
    xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(3)]
    t = tiles[tile]
    blocks = -(-n // t.bn) * -(-m // t.bm) * splits
    trs = [torch.zeros(blocks + 64, 16, dtype=torch.int64, device="cuda") for _ in range(3)]
    events_us = middle_of_three(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, splits, trace=trs[i]), trs)
    rows, clock = recorded(trs[1].cpu()), sm_clock_mhz()
    sms, resident = gemm_ops.gemm_slots("q4_0", torch.device("cuda"))
    t0 = int(rows[:, 0].min())
    per_sm = resident.get(tile, 1)
    print(f"\n{n}x{k} M {m}, {tile} x {splits}: {len(rows)} blocks on {len(set((rows[:, 7] & 0xFFFF).tolist()))} SMs "
          f"({per_sm} resident per SM: {len(rows) / (sms * per_sm):.2f} waves); events around the launch "
          f"{events_us:.1f} us; globaltimer span {(int(rows[:, 6].max()) - t0) / 1e3:.1f} us; blocks enter "
          f"0 .. {(int(rows[:, 0].max()) - t0) / 1e3:.1f} us")
    print("\n".join(points(rows, POINTS)))
    names = [("wait + first loads", 0, 1), ("first step", 1, 2), ("K loop", 2, 3), ("store", 3, 4)]
    if not bool((rows[:, 2] != 0).any()):  # w64b2 records no point 2 (csrc/gemm_wg.cu: it would serialize its wgmma)
        names[1:3] = [("first step + K loop", 1, 3)]
    if splits > 1:
        names += [("count", 4, 5), ("after the count", 5, 6)]
    print("  per block (clock64 at %.0f MHz, min / median / max us): " % clock
          + ", ".join(f"{name} {mmm(phase(rows, a, b, clock))}" for name, a, b in names))
    if splits > 1:  # the tile's merging block: the longest after its count (it sums the S partials)
        per_tile = rows.shape[0] // splits
        after = phase(rows, 5, 6, clock).view(splits, per_tile)
        last = after.argmax(0)
        merging = rows.view(splits, per_tile, 16)[last, torch.arange(per_tile)]
        loop_end = rows.view(splits, per_tile, 16)[:, :, 3].max(0).values
        print(f"  merging blocks ({per_tile}): merge {mmm(after.max(0).values)}, from the tile's last K loop end "
              f"to its merge end {mmm((merging[:, 6] - loop_end).double() / 1e3)} us (globaltimer)")
    out.append(dict(n=n, k=k, m=m, tile=tile, splits=splits, l2=l2, events_us=events_us, sm_clock_mhz=clock,
                    trace=rows.tolist()))


def main(argv: list[str]) -> int:
    dump, l2 = None, False
    if argv and argv[0] == "--json":
        dump, argv = argv[1], argv[2:]
    if argv and argv[0] == "--l2":
        l2, argv = True, argv[1:]
    cases = argv or [f"{n}:{k}:{m}" for m in (32, 64) for n, k in SHAPES]
    where = "one weight set reused (from L2 where it fits)" if l2 else "weights from HBM"
    print(f"packed GEMM trace (register-direct / wgmma tiles), {torch.cuda.get_device_name(0)}; q4_0, {where}; "
          "measured")
    out: list = []
    for c in cases:  # N:K:M[:TILE:SPLITS]
        f = c.split(":")
        run(int(f[0]), int(f[1]), int(f[2]), f[3] if len(f) > 3 else None, int(f[4]) if len(f) > 4 else None, out,
            l2)
    if dump:
        with open(dump, "w") as fh:
            json.dump(out, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
