"""Helpers for the per-block traces of the kernels' _trace entries (csrc common.cuh block_trace: a row
of 16 int64 per block in linear grid order; %globaltimer ns in row[i] and clock64 in row[8 + i] at the
kernel's point i < 7, the SM id in row[7] & 0xFFFF, row[15] the kernel's own), shared by
tools/gpu/decode_trace.py and tools/gpu/gemm_trace.py."""

from __future__ import annotations

import statistics
import subprocess

import torch

from onecat.kernels.bench import capture_graph


def sm_clock_mhz() -> float:
    """The SM clock nvidia-smi reports now (to show clock64 phases in us); 1980 (the H200's) if none."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.split()
        return float(out[0])
    except Exception:  # noqa: BLE001 - a label only
        return 1980.0


def mmm(v) -> str:
    """'min / median / max' of a 1-D tensor or list, two decimals."""
    v = [float(x) for x in (v.tolist() if isinstance(v, torch.Tensor) else v)]
    return f"{min(v):.2f} / {statistics.median(v):.2f} / {max(v):.2f}"


def recorded(tr: torch.Tensor) -> torch.Tensor:
    """The rows the launch wrote (entry timestamp set), in grid order."""
    return tr[tr[:, 0] != 0]


def points(rows: torch.Tensor, names: dict[int, str], t0: int | None = None) -> list[str]:
    """Per point i (globaltimer ns from t0, by default the first of these blocks' entries): 'name at
    min .. median .. max us' over the blocks that recorded it."""
    t0 = int(rows[:, 0].min()) if t0 is None else t0
    out = []
    for i, name in names.items():
        col = rows[:, i][rows[:, i] != 0]
        if len(col):
            us = [(int(v) - t0) / 1e3 for v in col.tolist()]
            out.append(f"  {name:22} at {min(us):6.1f} .. median {statistics.median(us):6.1f} .. max {max(us):6.1f} us")
    return out


def phase(rows: torch.Tensor, a: int, b: int, clock: float) -> torch.Tensor:
    """Per block, us from point a to point b by clock64 (both recorded)."""
    return (rows[:, 8 + b] - rows[:, 8 + a]).double() / clock


def middle_of_three(launch, traces: list[torch.Tensor]) -> float:
    """Three traced calls (launch(i) records into traces[i]), each run once to compile and warm, the
    traces cleared, then the three back to back: CUDA-event us around the middle one (its trace is the
    one to read; the first's shows when the previous call ended)."""
    for i in range(3):
        launch(i)
    torch.cuda.synchronize()
    for t in traces:
        t.zero_()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    launch(0)
    ev[0].record()
    launch(1)
    ev[1].record()
    launch(2)
    torch.cuda.synchronize()
    return ev[0].elapsed_time(ev[1]) * 1e3


def middle_of_three_graphed(launch, traces: list[torch.Tensor]) -> float:
    """As middle_of_three, the three calls captured in one CUDA graph (programmatic dependent launch
    between them, as a decode graph runs its kernels): replayed to warm, the traces cleared, replayed
    once more. Returns the replay's CUDA-event us / 3 (no event can sit between a graph's kernels)."""
    g = capture_graph(lambda: [launch(i) for i in range(3)])
    g.replay()
    torch.cuda.synchronize()
    for t in traces:
        t.zero_()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ev[0].record()
    g.replay()
    ev[1].record()
    torch.cuda.synchronize()
    return ev[0].elapsed_time(ev[1]) * 1e3 / 3
