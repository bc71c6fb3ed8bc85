"""PNG plots from records: output throughput vs concurrency, TPOT vs context length.

One line per series (engine, offline/online, model, the workload's other lengths); points are
medians, bars span min-max over repeats (throughput) or median-p90 over requests (TPOT).
"""

from __future__ import annotations

import os
from collections import defaultdict

from .contract import MEASURED, Record


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series_label(r: Record, *fields: str) -> str:
    w = r.workload
    bits = [r.engine, w.kind, r.model.name]
    for f in fields:
        v = getattr(w, f)
        if v is not None:
            bits.append({"input_len": "in", "output_len": "out", "concurrency": "conc"}.get(f, f) + f" {v}")
    return ", ".join(bits)


def _machine_note(records: list[Record]) -> str:
    m = records[0].machine
    return f"{m.gpu_count} x {m.gpu}" if m.gpu else f"CPU: {m.cpu[:40]}, torch threads {m.torch_threads}"


def throughput_vs_concurrency(records: list[Record], path: str) -> str | None:
    recs = [r for r in records if r.kind == MEASURED and r.workload.kind in ("offline", "online")
            and r.workload.request_rate is None and "output_throughput" in r.metrics]
    if not recs:
        return None
    plt = _plt()
    series: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        series[_series_label(r, "input_len", "output_len")].append(r)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    for label, rs in sorted(series.items()):
        rs = sorted(rs, key=lambda r: r.workload.concurrency or 0)
        x = [r.workload.concurrency for r in rs]
        ms = [r.metrics["output_throughput"] for r in rs]
        y = [m.median for m in ms]
        err = [[m.median - m.min for m in ms], [m.max - m.median for m in ms]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
    ax.set_xscale("log", base=2)
    xs = sorted({r.workload.concurrency for r in recs})
    ax.set_xticks(xs, [str(v) for v in xs])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("output throughput (tok/s)")
    ax.set_title(f"Output throughput vs concurrency - measured on {_machine_note(recs)}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.text(0.01, 0.01, "median over repeats; bars: min-max", fontsize=7, alpha=0.7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def tpot_vs_context(records: list[Record], path: str) -> str | None:
    recs = [r for r in records if r.kind == MEASURED and r.workload.kind in ("offline", "online")
            and r.workload.input_len is not None and "tpot" in r.metrics]
    if not recs:
        return None
    plt = _plt()
    series: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        series[_series_label(r, "concurrency", "output_len")].append(r)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    for label, rs in sorted(series.items()):
        rs = sorted(rs, key=lambda r: r.workload.input_len)
        ms = [r.metrics["tpot"] for r in rs]
        x = [r.workload.input_len for r in rs]
        y = [m.median for m in ms]
        err = [[0.0] * len(ms), [max((m.p90 or m.median) - m.median, 0.0) for m in ms]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
    xs = sorted({r.workload.input_len for r in recs})
    if len(xs) > 1 and xs[-1] / max(xs[0], 1) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(v) for v in xs])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("context at the start of decode (prompt tokens)")
    ax.set_ylabel("TPOT (ms / output token)")
    ax.set_title(f"Time per output token vs context - measured on {_machine_note(recs)}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.text(0.01, 0.01, "median over requests; bars up to p90", fontsize=7, alpha=0.7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def make_plots(records: list[Record], outdir: str) -> list[str]:
    os.makedirs(outdir, exist_ok=True)
    done = [throughput_vs_concurrency(records, os.path.join(outdir, "throughput_vs_concurrency.png")),
            tpot_vs_context(records, os.path.join(outdir, "tpot_vs_context.png"))]
    return [p for p in done if p]
