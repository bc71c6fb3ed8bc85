"""Reports: JSON lines in, Markdown and plots out; `compare` prints ratios of matching metrics.

    onecat-bench report results.jsonl --md report.md --plots plots/
    onecat-bench compare baseline.jsonl new.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict

from .contract import HIGHER_IS_BETTER, LOWER_IS_BETTER, PROJECTED, Record, append_jsonl, read_jsonl

MAIN_METRICS = ["output_throughput", "request_throughput", "ttft", "tpot", "itl", "e2e", "decode_tok_s",
                "load_time", "prefix_cache_hit_rate", "failed_requests"]


def emit(records: list[Record], out: str | None, report: str | None, plots: str | None,
         requests: list[dict] | None = None, requests_out: str | None = None) -> list[str]:
    """Write what a command was asked to write; returns the paths written."""
    written = []
    if out:
        append_jsonl(out, records)
        written.append(out)
    if requests_out and requests:
        os.makedirs(os.path.dirname(requests_out) or ".", exist_ok=True)
        with open(requests_out, "a") as f:
            for r in requests:
                f.write(json.dumps(r) + "\n")
        written.append(requests_out)
    if report:
        write_markdown(records, report)
        written.append(report)
    if plots:
        from .plots import make_plots

        written += make_plots(records, plots)
    for p in written:
        print(f"wrote {p}")
    return written


# -- Markdown ----------------------------------------------------------------------------------------
def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def metric_cell(rec: Record, name: str) -> str:
    m = rec.metrics.get(name)
    if m is None:
        return "-"
    if m.over == "requests" and m.p99 is not None:
        return f"{fmt(m.median)} (p99 {fmt(m.p99)})"
    if m.n > 1 and m.min != m.max:
        return f"{fmt(m.median)} [{fmt(m.min)}-{fmt(m.max)}]"
    return fmt(m.median)


def _machine_line(rec: Record) -> str:
    m = rec.machine
    if m.gpu:
        clocks = "; ".join(f"GPU{c.get('index', i)} SM {c.get('clocks.sm', '?')}/{c.get('clocks.max.sm', '?')} MHz, "
                           f"mem {c.get('clocks.mem', '?')}/{c.get('clocks.max.mem', '?')} MHz, "
                           f"{c.get('power.draw', '?')}/{c.get('power.limit', '?')} W, {c.get('temperature.gpu', '?')} C"
                           for i, c in enumerate(m.gpu_clocks)) or "clocks not read (no nvidia-smi)"
        return (f"{m.gpu_count} x {m.gpu} ({m.gpu_capability or '?'}), driver {m.driver or '?'}, CUDA runtime "
                f"{m.cuda_runtime or '?'} / driver CUDA {m.cuda_driver or '?'}, torch {m.torch}; clocks as found: {clocks}")
    return (f"CPU only: {m.cpu} ({m.cpu_count} cores, torch threads {m.torch_threads}), torch {m.torch}, "
            f"Python {m.python}")


def write_markdown(records: list[Record], path: str, title: str = "onecat-bench report") -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(markdown(records, title))


def markdown(records: list[Record], title: str = "onecat-bench report") -> str:
    out = [f"# {title}", ""]
    machines = sorted({_machine_line(r) for r in records if r.kind != PROJECTED})
    if machines:
        out += ["## Machine", ""] + [f"- {m}" for m in machines] + [""]
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        groups["projected" if r.kind == PROJECTED else r.workload.kind].append(r)
    for kind in sorted(groups, key=lambda k: (k == "projected", k)):
        recs = groups[kind]
        if kind == "projected":
            out += _projected_section(recs)
            continue
        if kind == "quality":
            out += _quality_section(recs)
            continue
        names = [n for n in MAIN_METRICS if any(n in r.metrics for r in recs)]
        units = {n: next(r.metrics[n].unit for r in recs if n in r.metrics) for n in names}
        out += [f"## {kind} (measured)", "",
                "Throughputs: median [min-max] over repeats; latencies: median (p99) over requests.", ""]
        head = ["engine", "model / weights", "workload"] + [f"{n} ({units[n]})" for n in names]
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in recs:
            row = [r.engine, f"{r.model.name} / {r.model.weight_format}", r.label()] + [metric_cell(r, n) for n in names]
            out.append("| " + " | ".join(row) + " |")
        errs = [r for r in recs if r.errors.get("count")]
        if errs:
            out += ["", "Failed requests (recorded per request; the runs completed):", ""]
            for r in errs:
                e = r.errors
                out.append(f"- {r.label()}: {e['count']}/{e['of']} failed, by kind {e['by_kind']}; e.g. "
                           + "; ".join(f"`{x[:120]}`" for x in e.get("examples", [])[:3]))
        out.append("")
    out += _contracts_section(records)
    return "\n".join(out) + "\n"


def _quality_section(recs: list[Record]) -> list[str]:
    out = ["## quality gates (measured)", "",
           "| engine | model / weights | PPL | reference PPL | rel diff | tolerance | gate | greedy agreement "
           "(clear / all) | natural stops | capped | invalid JSON |", "|" + "---|" * 11]
    for r in recs:
        q = r.quality
        gate = "-" if q.passed is None else ("PASS" if q.passed else "FAIL")
        rel = f"{q.ppl_rel_diff:+.2e}" if q.ppl_rel_diff is not None else "-"
        agree = (f"{fmt(q.greedy_agreement, 4)} / {fmt(q.greedy_agreement_all, 4)}"
                 if q.greedy_agreement_all is not None else "-")
        inv = f"{q.invalid_json}/{q.json_prompts}" if q.invalid_json is not None else "-"
        out.append(f"| {r.engine} | {r.model.name} / {r.model.weight_format} | {fmt(q.ppl, 6)} | "
                   f"{fmt(q.ppl_reference, 6)} | {rel} | {fmt(q.ppl_tolerance)} | {gate} | {agree} | "
                   f"{fmt(q.natural_stop_rate)} | {fmt(q.capped_outputs)} | {inv} |")
    refs = sorted({r.quality.reference for r in recs if r.quality.reference})
    if refs:
        out += ["", "Reference: " + "; ".join(refs) + ". PPL over fixed pydoc_data.topics segments; greedy "
                "agreement teacher-forced on the same segments."]
    return out + [""]


def _projected_section(recs: list[Record]) -> list[str]:
    out = ["## PROJECTED (not measured)", "",
           "| route | model / weights | workload | projected decode tok/s | step (us) | ideal tok/s | bytes with "
           "H200-measured efficiency |", "|---|---|---|---|---|---|---|"]
    for r in recs:
        out.append(f"| {r.engine} | {r.model.name} / {r.model.weight_format} | {r.label()} on {r.runtime.device} | "
                   f"{metric_cell(r, 'decode_tok_s')} | {metric_cell(r, 'decode_step_us')} | "
                   f"{fmt(r.extra.get('ideal_tok_s'))} | "
                   f"{'-' if r.extra.get('measured_eff_share') is None else format(r.extra['measured_eff_share'], '.0%')} |")
    for r in recs:
        out += ["", f"Assumptions ({r.model.name} {r.model.weight_format}, {r.label()}):", ""]
        out += [f"- {a}" for a in r.assumptions]
    return out + [""]


def _contracts_section(records: list[Record]) -> list[str]:
    out = ["## Contracts", "",
           "| run | engine | kind | model (arch, layers, hidden, heads/kv) | TP/PP | device | KV dtype | graph | "
           "prefix cache | sampling | spec | load avg | date |", "|" + "---|" * 13]
    for r in records:
        m, s = r.model, r.sampling
        shape = f"{m.name} ({m.arch}, {m.layers}, {m.hidden}, {m.heads}/{m.kv_heads})"
        samp = (f"T={s.temperature:g} top_p={s.top_p:g} top_k={s.top_k} seed={s.seed} workload seed={s.workload_seed}"
                f"{' ignore_eos' if s.ignore_eos else ''}")
        spec = r.spec.method + (f" (acceptance {r.spec.acceptance_rate:.2f})" if r.spec.acceptance_rate is not None else "")
        out.append(f"| {r.run_id} | {r.engine} | {r.kind} | {shape} | {m.tp}/{m.pp} | {r.runtime.device} | "
                   f"{r.runtime.kv_dtype} | {r.runtime.graph_mode} | {r.runtime.prefix_cache} | {samp} | {spec} | "
                   f"{'/'.join(str(x) for x in r.machine.load_average) or '-'} | {r.date} |")
    routes = sorted({json.dumps(r.runtime.route, sort_keys=True) for r in records if r.runtime.route})
    for route in routes:
        out += ["", "Kernel route: " + ", ".join(f"{k}: {v}" for k, v in json.loads(route).items())]
    return out + [""]


# -- compare -----------------------------------------------------------------------------------------
def match_records(a: list[Record], b: list[Record], ignore: tuple[str, ...] = ()) -> list[tuple[Record, Record]]:
    """Pairs with the same configuration: first with the engine in the key, then (for what is left,
    where the key is unique on both sides) without it, so one engine can be compared with another."""
    pairs, used_a, used_b = [], set(), set()
    for with_engine in (True, False):
        ka: dict[str, list[int]] = defaultdict(list)
        kb: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(a):
            if i not in used_a:
                ka[r.config_key(with_engine, ignore)].append(i)
        for j, r in enumerate(b):
            if j not in used_b:
                kb[r.config_key(with_engine, ignore)].append(j)
        for key, ia in ka.items():
            jb = kb.get(key, [])
            if not jb or (not with_engine and (len(ia) > 1 or len(jb) > 1)):
                continue
            for i, j in zip(ia, jb):  # several runs of one configuration pair in file order
                pairs.append((a[i], b[j]))
                used_a.add(i)
                used_b.add(j)
    return pairs


def compare_rows(a: list[Record], b: list[Record], ignore: tuple[str, ...] = ()) -> list[dict]:
    rows = []
    for ra, rb in match_records(a, b, ignore):
        for name in sorted(set(ra.metrics) & set(rb.metrics)):
            ma, mb = ra.metrics[name], rb.metrics[name]
            ratio = mb.median / ma.median if ma.median else None
            verdict = ""
            if ratio is not None and ratio != 1.0:
                if name in HIGHER_IS_BETTER:
                    verdict = "better" if ratio > 1 else "worse"
                elif name in LOWER_IS_BETTER:
                    verdict = "better" if ratio < 1 else "worse"
            rows.append({"config": rb.label(), "engines": ra.engine if ra.engine == rb.engine else f"{ra.engine} -> {rb.engine}",
                         "metric": name, "unit": mb.unit, "a": ma.median, "b": mb.median, "ratio": ratio,
                         "verdict": verdict, "kind": rb.kind})
    return rows


def compare_text(a_path: str, b_path: str, ignore: tuple[str, ...] = ()) -> str:
    a, b = read_jsonl(a_path), read_jsonl(b_path)
    rows = compare_rows(a, b, ignore)
    lines = [f"A = {a_path} ({len(a)} records), B = {b_path} ({len(b)} records); ratio = B / A (medians)"]
    if not rows:
        lines.append("no matching configurations (--ignore workload weights ... loosens the match)")
        return "\n".join(lines)
    lines.append(f"{'configuration':40} {'engine':40} {'metric':22} {'unit':9} {'A':>11} {'B':>11} {'B/A':>7}  verdict")
    for r in rows:
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        tag = " (projected)" if r["kind"] == PROJECTED else ""
        lines.append(f"{r['config'][:40]:40} {r['engines'][:40]:40} {r['metric'][:22]:22} {r['unit'][:9]:9} "
                     f"{fmt(r['a'], 4):>11} {fmt(r['b'], 4):>11} {ratio:>7}  {r['verdict']}{tag}")
    return "\n".join(lines)


def main_compare(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="onecat-bench compare", description="ratios (B / A) of matching metrics")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--ignore", nargs="+", default=[], choices=Record.KEY_FIELDS,
                    help="configuration fields not to match on (e.g. workload weights: offline vs online)")
    ap.add_argument("--loose", action="store_true",
                    help="match on lengths, concurrency, rate, prefix, sampling and model name only "
                         "(= --ignore workload weights kv graph: offline vs online, local vs remote)")
    a = ap.parse_args(argv)
    ignore = set(a.ignore) | ({"workload", "weights", "kv", "graph"} if a.loose else set())
    print(compare_text(a.a, a.b, tuple(sorted(ignore))))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="onecat-bench report", description="Markdown report and plots from JSON lines")
    ap.add_argument("jsonl", nargs="+")
    ap.add_argument("--md", default=None, help="write the Markdown here (default: print it)")
    ap.add_argument("--plots", default=None, help="directory for PNG plots")
    ap.add_argument("--title", default="onecat-bench report")
    a = ap.parse_args(argv)
    recs = [r for p in a.jsonl for r in read_jsonl(p)]
    if a.md:
        write_markdown(recs, a.md, a.title)
        print(f"wrote {a.md}")
    else:
        print(markdown(recs, a.title))
    if a.plots:
        from .plots import make_plots

        for p in make_plots(recs, a.plots):
            print(f"wrote {p}")
