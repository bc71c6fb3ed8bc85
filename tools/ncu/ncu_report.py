"""Turn an Nsight Compute raw CSV (`ncu --import X.ncu-rep --csv --page raw`) into a per-kernel
table and a decode-step timeline summary.

    python tools/ncu/ncu_report.py X.raw.csv [--steps X.steps.json] [--json X.kernels.json] [--md X.md]

The raw page has a header row, a units row, then one row per profiled kernel launch. Columns used
(ncu's metric names; whichever are present):
  duration            gpu__time_duration.sum
  DRAM bytes          dram__bytes_read.sum + dram__bytes_write.sum (or dram__bytes.sum)
  DRAM bandwidth      those bytes / duration (else dram__bytes.sum.per_second)
  DRAM % of peak      gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed (or dram__throughput...)
  SM %                sm__throughput.avg.pct_of_peak_sustained_elapsed
  tensor pipe %       the first sm__pipe_tensor*...pct_of_peak* / sm__inst_executed_pipe_tensor*...pct* column
  registers           launch__registers_per_thread
  shared memory       launch__shared_mem_per_block_static + launch__shared_mem_per_block_dynamic
  occupancy           sm__warps_active.avg.pct_of_peak_sustained_active (achieved),
                      sm__maximum_warps_per_active_cycle_pct (theoretical)
  NVTX                the "thread Domain:Push/Pop_Range..." column(s): onecat.step.<phase>.<i> and
                      onecat.op.<op>.<provider> ranges (tools/ncu/target.py names them); kernels
                      replayed from a CUDA graph have no op range: their op comes from the kernel
                      name (KERNEL_OPS), provider "graph"

ncu serializes and replays kernels, so the gaps between kernels cannot be read from the report:
the timeline sets each profiled step's summed kernel durations against the step's device time
measured without the profiler (CUDA events, --steps JSON from target.py); gap = step - kernels.
Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import statistics
from dataclasses import asdict, dataclass, field

TIME_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
BYTES = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12, "kib": 1024.0, "mib": 2.0**20,
         "gib": 2.0**30}
NVTX_PREFIXES = ("thread Domain:Push/Pop_Range", "Id:Domain:Start/Stop_Range", "NVTX")
OP_RE = re.compile(r"onecat\.op\.([A-Za-z0-9_]+)\.([A-Za-z0-9_\-]+)")
STEP_RE = re.compile(r"onecat\.step\.([A-Za-z0-9_]+)\.(\d+)")
# kernels replayed from a CUDA graph carry no op ranges (those were pushed at capture): their op is
# read from onecat's kernel names, provider "graph"
# (the first matching pattern wins: the fused GEMVs' suffixes before the plain GEMV prefix). The GEMMs' _norm
# entries (linear_rms_norm_*'s projection in front, its epilogue the residual add) read as linear; the _glu /
# _rope launch behind them, which scales by the norm, as rms_norm_linear / rms_norm_qkv_rotary_cache
KERNEL_OPS = ((r"^gemv_.*_rn_rope$", "rms_norm_qkv_rotary_cache"), (r"^gemv_.*_rn(_glu)?$", "rms_norm_linear"),
              (r"^gemv_", "linear"), (r"^gemm_.*_rope$", "rms_norm_qkv_rotary_cache"),
              (r"^gemm_.*_glu$", "rms_norm_linear"), (r"^gemm_", "linear"), (r"^attn_", "paged_attention"),
              (r"^rms_norm", "rms_norm"),
              (r"^rotary_cache_", "rotary_and_cache"), (r"^rotary_", "rotary_embedding"),
              (r"^silu_and_mul", "silu_and_mul"), (r"^gelu_", "gelu_and_mul"),
              (r"^reshape_and_cache", "reshape_and_cache"), (r"^argmax", "argmax"), (r"^sample", "sample"))
TENSOR_RE = re.compile(r"^sm__(pipe_tensor\w*cycles_active|inst_executed_pipe_tensor\w*)\..*pct")


class ReportError(ValueError):
    pass


def _num(cell: str | None) -> float | None:
    if cell is None:
        return None
    s = str(cell).strip().replace(",", "")
    if not s or s.lower() in ("n/a", "nan", "-"):
        return None
    s = s.split(" (", 1)[0]  # instance exports: "158 (0: 158)"
    try:
        return float(s)
    except ValueError:
        return None


def _scaled(row: dict, units: dict, col: str, table: dict[str, float]) -> float | None:
    v = _num(row.get(col))
    if v is None:
        return None
    unit = (units.get(col) or "").strip().lower()
    base = unit.split("/")[0] if table is BYTES else unit
    if base not in table:
        raise ReportError(f"unknown unit {units.get(col)!r} for {col}")
    return v * table[base]


def _rate_bytes_per_s(row: dict, units: dict, col: str) -> float | None:
    v = _num(row.get(col))
    if v is None:
        return None
    unit = (units.get(col) or "").strip().lower()
    num, _, den = unit.partition("/")
    if num not in BYTES or den not in ("s", "second", "sec"):
        raise ReportError(f"unknown rate unit {units.get(col)!r} for {col}")
    return v * BYTES[num]


def read_raw_csv(text: str) -> tuple[list[dict], dict]:
    """(rows, units) from ncu's raw CSV; lines before the header (==PROF== logs) are skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"') or ln.startswith("ID,")), None)
    if start is None:
        raise ReportError("no ncu raw CSV header (a line starting with \"ID\") found")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    if len(rows) < 2:
        raise ReportError("an ncu raw CSV needs a header and a units row")
    header = rows[0]
    units = dict(zip(header, rows[1]))
    return [dict(zip(header, r)) for r in rows[2:] if r and any(c.strip() for c in r)], units


@dataclass
class Launch:
    id: int
    kernel: str
    op: str  # the onecat op whose dispatch launched it, or "(outside ops)"
    provider: str
    step: str | None  # e.g. "decode.0"
    duration_us: float
    dram_bytes: float | None
    dram_gbps: float | None
    dram_pct_peak: float | None
    sm_pct: float | None
    tensor_pct: float | None
    registers: int | None
    shared_bytes: float | None
    occupancy_achieved: float | None
    occupancy_theoretical: float | None
    grid: str = ""
    block: str = ""


def parse_launches(text: str) -> list[Launch]:
    rows, units = read_raw_csv(text)
    if not rows:
        return []
    cols = set(rows[0])
    if "gpu__time_duration.sum" not in cols:
        raise ReportError("the report has no gpu__time_duration.sum column (collect the SpeedOfLight section)")
    nvtx_cols = [c for c in rows[0] if c.startswith(NVTX_PREFIXES)]
    tensor_col = next((c for c in rows[0] if TENSOR_RE.match(c)), None)
    dram_pct_col = next((c for c in ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                                     "dram__throughput.avg.pct_of_peak_sustained_elapsed") if c in cols), None)
    out = []
    for i, r in enumerate(rows):
        nvtx = " ".join(r.get(c, "") for c in nvtx_cols)
        op = OP_RE.findall(nvtx)
        if not op:
            name = r.get("Kernel Name", "")
            op = [(o, "graph") for pattern, o in KERNEL_OPS if re.search(pattern, name)][:1]
        step = STEP_RE.findall(nvtx)
        dur = _scaled(r, units, "gpu__time_duration.sum", TIME_US)
        if dur is None:
            continue
        if "dram__bytes_read.sum" in cols or "dram__bytes_write.sum" in cols:
            parts = [_scaled(r, units, c, BYTES) for c in ("dram__bytes_read.sum", "dram__bytes_write.sum") if c in cols]
            dram = sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None
        else:
            dram = _scaled(r, units, "dram__bytes.sum", BYTES) if "dram__bytes.sum" in cols else None
        if dram is not None and dur > 0:
            gbps = dram / (dur * 1e-6) / 1e9
        else:
            rate = _rate_bytes_per_s(r, units, "dram__bytes.sum.per_second") if "dram__bytes.sum.per_second" in cols else None
            gbps = rate / 1e9 if rate is not None else None
        smem = [_scaled(r, units, c, BYTES) for c in ("launch__shared_mem_per_block_static",
                                                      "launch__shared_mem_per_block_dynamic") if c in cols]
        smem_v = [s for s in smem if s is not None]
        regs = _num(r.get("launch__registers_per_thread"))
        out.append(Launch(
            id=int(_num(r.get("ID")) if _num(r.get("ID")) is not None else i), kernel=r.get("Kernel Name", "?"),
            op=op[-1][0] if op else "(outside ops)", provider=op[-1][1] if op else "-",
            step=f"{step[-1][0]}.{step[-1][1]}" if step else None, duration_us=dur, dram_bytes=dram, dram_gbps=gbps,
            dram_pct_peak=_num(r.get(dram_pct_col)) if dram_pct_col else None,
            sm_pct=_num(r.get("sm__throughput.avg.pct_of_peak_sustained_elapsed")),
            tensor_pct=_num(r.get(tensor_col)) if tensor_col else None,
            registers=int(regs) if regs is not None else None, shared_bytes=sum(smem_v) if smem_v else None,
            occupancy_achieved=_num(r.get("sm__warps_active.avg.pct_of_peak_sustained_active")),
            occupancy_theoretical=_num(r.get("sm__maximum_warps_per_active_cycle_pct")),
            grid=r.get("Grid Size", ""), block=r.get("Block Size", "")))
    return out


def _mean(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


@dataclass
class KernelRow:
    op: str
    provider: str
    kernel: str
    launches: int
    total_us: float
    mean_us: float
    share: float
    dram_gbps: float | None  # bytes over summed time
    dram_pct_peak: float | None
    sm_pct: float | None
    tensor_pct: float | None
    registers: int | None
    shared_bytes: float | None
    occupancy_achieved: float | None
    occupancy_theoretical: float | None


def kernel_table(launches: list[Launch]) -> list[KernelRow]:
    """One row per (op, provider, kernel), by total time, largest first."""
    groups: dict[tuple, list[Launch]] = {}
    for ln in launches:
        groups.setdefault((ln.op, ln.provider, ln.kernel), []).append(ln)
    total = sum(ln.duration_us for ln in launches) or 1.0
    rows = []
    for (op, prov, kern), ls in groups.items():
        t = sum(ln.duration_us for ln in ls)
        b = [ln.dram_bytes for ln in ls]
        gbps = (sum(b) / (t * 1e-6) / 1e9) if all(x is not None for x in b) and t > 0 else _mean([ln.dram_gbps for ln in ls])
        rows.append(KernelRow(op, prov, kern, len(ls), t, t / len(ls), t / total, gbps,
                              _mean([ln.dram_pct_peak for ln in ls]), _mean([ln.sm_pct for ln in ls]),
                              _mean([ln.tensor_pct for ln in ls]), ls[0].registers, ls[0].shared_bytes,
                              _mean([ln.occupancy_achieved for ln in ls]), _mean([ln.occupancy_theoretical for ln in ls])))
    return sorted(rows, key=lambda r: -r.total_us)


@dataclass
class StepSummary:
    step: str
    kernels: int
    kernel_us: float
    by_op: dict[str, float] = field(default_factory=dict)


@dataclass
class Timeline:
    steps: list[StepSummary]
    median_kernel_us: float | None
    measured_step_us: float | None  # median device time of an unprofiled step (CUDA events)
    gap_us: float | None
    kernel_fraction: float | None


def timeline(launches: list[Launch], steps_json: dict | None = None) -> Timeline:
    per: dict[str, StepSummary] = {}
    for ln in launches:
        if ln.step is None:
            continue
        s = per.setdefault(ln.step, StepSummary(ln.step, 0, 0.0))
        s.kernels += 1
        s.kernel_us += ln.duration_us
        s.by_op[ln.op] = s.by_op.get(ln.op, 0.0) + ln.duration_us
    steps = sorted(per.values(), key=lambda s: (s.step.split(".")[0], int(s.step.split(".")[1])))
    med = statistics.median(s.kernel_us for s in steps) if steps else None
    measured = steps_json.get("median_step_us") if steps_json else None
    gap = measured - med if (measured is not None and med is not None) else None
    frac = med / measured if (measured and med is not None) else None
    return Timeline(steps, med, measured, gap, frac)


def _f(x, fmt="{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def format_table(rows: list[KernelRow]) -> str:
    head = (f"{'op':18} {'provider':10} {'kernel':38} {'n':>4} {'total us':>9} {'mean us':>8} {'share':>6} "
            f"{'DRAM GB/s':>9} {'%peak':>6} {'SM %':>6} {'TC %':>6} {'regs':>5} {'smem KB':>8} {'occ %':>12}")
    lines = [head, "-" * len(head)]
    for r in rows:
        occ = f"{_f(r.occupancy_achieved)}/{_f(r.occupancy_theoretical, '{:.0f}')}"
        lines.append(f"{r.op[:18]:18} {r.provider[:10]:10} {r.kernel[:38]:38} {r.launches:4d} {r.total_us:9.1f} "
                     f"{r.mean_us:8.2f} {r.share:6.1%} {_f(r.dram_gbps, '{:.0f}'):>9} {_f(r.dram_pct_peak):>6} "
                     f"{_f(r.sm_pct):>6} {_f(r.tensor_pct):>6} {_f(r.registers, '{:d}'):>5} "
                     f"{_f(None if r.shared_bytes is None else r.shared_bytes / 1e3, '{:.1f}'):>8} {occ:>12}")
    return "\n".join(lines)


def format_timeline(t: Timeline) -> str:
    if not t.steps:
        return "no NVTX step ranges in the report (run tools/ncu/target.py under ncu with --nvtx)"
    lines = [f"{'step':12} {'kernels':>7} {'kernel us':>10}  top ops"]
    for s in t.steps:
        top = sorted(s.by_op.items(), key=lambda kv: -kv[1])[:4]
        lines.append(f"{s.step:12} {s.kernels:7d} {s.kernel_us:10.1f}  "
                     + ", ".join(f"{op} {us / s.kernel_us:.0%}" for op, us in top))
    lines.append(f"median kernel time per step {t.median_kernel_us:.1f} us (sum of ncu durations, clocks not locked)")
    if t.measured_step_us is not None and t.gap_us < 0:
        lines.append(f"measured step (CUDA events, unprofiled) {t.measured_step_us:.1f} us < the kernels' ncu "
                     f"durations: ncu replays each kernel alone (caches flushed, --cache-control all), which "
                     f"overstates graph-replayed kernels; the gaps are not resolvable from this report (read "
                     f"busy vs idle from tools/ncu/target.py --timeline)")
    elif t.measured_step_us is not None:
        lines.append(f"measured step (CUDA events, unprofiled) {t.measured_step_us:.1f} us -> gaps "
                     f"{t.gap_us:.1f} us; kernels busy {t.kernel_fraction:.0%} of the step")
    else:
        lines.append("no measured step time given (--steps): gaps unknown")
    return "\n".join(lines)


def report(text: str, steps_json: dict | None = None) -> dict:
    launches = parse_launches(text)
    return {"kernels": [asdict(r) for r in kernel_table(launches)],
            "timeline": asdict(timeline(launches, steps_json)), "launches": len(launches)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--steps", default=None, help="target.py's --steps-json (the unprofiled step times)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--md", default=None)
    a = ap.parse_args(argv)
    with open(a.csv) as f:
        text = f.read()
    steps = None
    if a.steps:
        with open(a.steps) as f:
            steps = json.load(f)
    launches = parse_launches(text)
    table, tl = kernel_table(launches), timeline(launches, steps)
    out = f"{len(launches)} kernel launches\n\n{format_table(table)}\n\n{format_timeline(tl)}"
    print(out)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"kernels": [asdict(r) for r in table], "timeline": asdict(tl)}, f, indent=1)
    if a.md:
        with open(a.md, "w") as f:
            f.write("# ncu kernel report\n\n```\n" + out + "\n```\n")


if __name__ == "__main__":
    main()
