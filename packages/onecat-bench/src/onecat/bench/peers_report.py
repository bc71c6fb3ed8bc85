"""The Markdown report of a peers run (peers.py): one table of decode figures, then ratios.

Rows: shape, format, engine, batch, context at the start of decode, decode tok/s median (min-max,
n), ms per token (per sequence), weight bandwidth and % of the copy bandwidth measured in the
same run (batch 1), prefill tok/s, load time. Skipped or failed peers are listed with their
reasons. Ratios set onecat against each peer on the same shape and batch (llama.cpp at the
context closest to onecat's).
"""

from __future__ import annotations

import datetime
import os

from .contract import Record


def _fmt(x: float | None, nd: int = 1) -> str:
    if x is None:
        return "-"
    return f"{x:,.{nd}f}"


def _m(rec: Record, name: str):
    return rec.metrics.get(name)


def _row(rec: Record) -> str:
    w, m = rec.workload, rec.model
    fmt = m.weight_format.split(";")[0]
    run_as = m.weight_format.partition("dequantized to ")[2].partition(" at load")[0]
    if run_as:
        fmt += f" (run as {run_as}, dequantized at load)"
    elif "kept quantized" in m.weight_format:
        fmt += " (kept quantized)"
    if rec.errors.get("skipped"):
        return (f"| {m.name} | {fmt} | {rec.engine} | {w.batch} | {w.input_len} | skipped | | | | | | |")
    d, ms = _m(rec, "decode_tok_s"), _m(rec, "ms_per_token")
    bw, pct = _m(rec, "weight_bandwidth"), _m(rec, "pct_of_copy_bandwidth")
    pre, load = _m(rec, "prefill_tok_s"), _m(rec, "load_time")
    return (f"| {m.name} | {fmt} | {rec.engine} | {w.batch} | {w.input_len} | **{_fmt(d.median)}** | "
            f"{_fmt(d.min)} - {_fmt(d.max)} (n {d.n}) | {_fmt(ms.median, 2) if ms else '-'} | "
            f"{_fmt(bw.median, 0) if bw else '-'} | {_fmt(pct.median) + '%' if pct else '-'} | "
            f"{_fmt(pre.median, 0) if pre else '-'} | {_fmt(load.median, 1) if load else '-'} |")


def _key(rec: Record):
    order = {"onecat": 0, "llama.cpp": 1, "hf-transformers": 2}
    eng = rec.engine.split()[0]
    return (rec.model.name, rec.model.weight_format.split(";")[0] if eng != "hf-transformers" else "~",
            rec.workload.batch or 0, order.get(eng, 9), rec.workload.input_len or 0)


def ratios(records: list[Record]) -> list[str]:
    ok = [r for r in records if "decode_tok_s" in r.metrics]
    lines = []
    for oc in (r for r in ok if r.engine == "onecat"):
        fmt = oc.model.weight_format.split(";")[0]
        for peer in ("llama.cpp", "hf-transformers"):
            cands = [r for r in ok if r.engine.split()[0] == peer and r.model.name == oc.model.name
                     and r.workload.batch == oc.workload.batch
                     and (peer != "llama.cpp" or r.model.weight_format.split(";")[0] == fmt)]
            if not cands:
                continue
            best = min(cands, key=lambda r: abs((r.workload.input_len or 0) - (oc.workload.input_len or 0)))
            x = oc.metrics["decode_tok_s"].median / best.metrics["decode_tok_s"].median
            peer_fmt = best.model.weight_format.split(";")[0]
            lines.append(f"- {oc.model.name} {fmt}, batch {oc.workload.batch}: onecat / {peer} "
                         f"({peer_fmt}, context {best.workload.input_len}) = **{x:.2f}x**")
    return lines


def _decode_record(recs: list[Record], engine: str, shape: str, fmt: str, batch: int, ctx: int | None = None):
    """The decode record of `engine` for (shape, format, batch) (llama.cpp: at context `ctx` if given)."""
    for r in recs:
        if (r.engine.split()[0] == engine and r.model.name == shape and r.workload.batch == batch
                and r.model.weight_format.split(";")[0] == f"GGUF {fmt}" and "decode_tok_s" in r.metrics
                and (ctx is None or r.workload.input_len == ctx)):
            return r
    return None


def goals(records: list[Record]) -> list[str]:
    """G1-G3 of ../shared/perf.md, each met / not met / not measured, from this run's records."""
    lines = []
    oc, lc = (_decode_record(records, "onecat", "smollm2-135m", "Q4_1", 1),
              _decode_record(records, "llama.cpp", "smollm2-135m", "Q4_1", 1, ctx=0))
    if oc and lc:
        x = oc.metrics["decode_tok_s"].median / lc.metrics["decode_tok_s"].median
        lines.append(f"- G1 (smollm2-135m Q4_1 batch 1 >= 2.0x llama.cpp tg128): {x:.2f}x: "
                     f"{'met' if x >= 2.0 else 'not met'}")
    else:
        lines.append("- G1: not measured in this run")
    for fmt in ("Q4_0", "Q4_K_M"):
        r = _decode_record(records, "onecat", "llama3-8b", fmt, 1)
        pct = r.metrics.get("pct_of_copy_bandwidth") if r else None
        lines.append(f"- G2 (llama3-8b {fmt} batch 1 >= 85% of copy): "
                     + (f"{pct.median:.1f}%: {'met' if pct.median >= 85 else 'not met'}" if pct else "not measured"))
    for b in (32, 64):
        o = _decode_record(records, "onecat", "llama3-8b", "Q4_0", b)
        p = _decode_record(records, "llama.cpp", "llama3-8b", "Q4_0", b)
        if o and p:
            x = o.metrics["decode_tok_s"].median / p.metrics["decode_tok_s"].median
            kv = f" (KV: onecat {o.runtime.kv_dtype}, llama.cpp {p.runtime.kv_dtype})"
            if (o.extra.get("peer") or {}).get("prefill_first"):
                kv += " (onecat scheduler: prompts first)"
            lines.append(f"- G3 (llama3-8b Q4_0, {b} sequences >= 3x llama-batched-bench){kv}: {x:.2f}x: "
                         f"{'met' if x >= 3.0 else 'not met'}")
        else:
            lines.append(f"- G3 at {b} sequences: not measured in this run")
    return lines


def write_report(records: list[Record], path: str, copy_bw: float | None, files: dict | None = None) -> None:
    recs = sorted(records, key=_key)
    mach = records[0].machine if records else None
    out = [f"# Decode: onecat vs llama.cpp vs HF transformers ({datetime.date.today().isoformat()})", ""]
    if mach:
        clocks = mach.gpu_clocks[0] if mach.gpu_clocks else {}
        out += [f"- Machine: {mach.gpu or mach.cpu} x{mach.gpu_count or 1}, driver {mach.driver or '-'}, CUDA "
                f"{mach.cuda_runtime or '-'} (torch {mach.torch}), CPU {mach.cpu} ({mach.cpu_count} cores)",
                f"- Clocks as found: SM {clocks.get('clocks.sm', '-')} / max {clocks.get('clocks.max.sm', '-')} MHz, "
                f"memory {clocks.get('clocks.mem', '-')} MHz, power {clocks.get('power.draw', '-')} W"]
    out.append("- Device-to-device copy bandwidth, this run: "
               + (f"{copy_bw / 1e9:,.0f} GB/s (bytes read + written)" if copy_bw else "n/a (no GPU)"))
    peers, routes = {}, {}
    for r in records:
        p = r.extra.get("peer", {})
        eng = r.engine.split()[0]
        if eng == "llama.cpp" and p.get("source"):
            src = p["source"]
            peers[eng] = (f"llama.cpp {src.get('llama_cpp_commit', '?')[:12]} (vendored in {src.get('sdist', '?')}), "
                          f"CUDA backend, flash attention {'on' if p.get('flash_attn') else 'off'}, all layers on GPU")
        elif eng == "hf-transformers" and p:
            peers[eng] = (f"HF transformers {p.get('transformers')} (torch {p.get('torch')}), {p.get('dtype')} "
                          f"weights generated on the device, {p.get('attn_implementation')}, {p.get('cache')}, "
                          f"{p.get('graph_mode')}")
        elif eng == "onecat" and p:
            route = ", ".join(f"{k}={v}" for k, v in sorted((p.get("route") or {}).items()))
            routes.setdefault(route, set()).add(f"{r.model.name} {r.model.weight_format.split(';')[0]}")
            peers[eng] = (f"onecat engine (LLM offline API), compute "
                          f"{p.get('compute_dtype')}, KV {p.get('kv_dtype')}, {p.get('graph_mode')}, "
                          f"{'asynchronous' if p.get('async_scheduling') else 'synchronous'} scheduling"
                          f"{', prompts first (scheduler.prefill_first)' if p.get('prefill_first') else ''}, "
                          f"prefix cache off")
    if "onecat" in peers:  # the route differs by file where a format is refused a provider
        peers["onecat"] += ("; route: " + next(iter(routes)) if len(routes) == 1 else "; routes: " + "; ".join(
            f"{', '.join(sorted(files))}: {route}" for route, files in sorted(routes.items())))
    out += [f"- {v}" for _, v in sorted(peers.items())]
    if files:
        out += ["", "GGUF files (generated weights in real formats, `onecat-bench synth-gguf`):", ""]
        for (shape, ftype), f in files.items():
            types = ", ".join(f"{n} {t}" for t, n in sorted(f.type_counts.items(), key=lambda kv: -kv[1]))
            out.append(f"- {shape} {ftype}: {f.bytes / 1e9:.3f} GB ({types}); {f.weight_bytes_per_token() / 1e6:,.1f} "
                       f"MB read per decoded token; tokenizer {f.tokenizer}; written in {f.seconds:.1f} s")
    out += ["", "| shape | format | engine | batch | context | decode tok/s | min - max | ms/token "
            "| file weight GB/s | % of copy | prefill tok/s | load s |", "|" + "---|" * 12]
    out += [_row(r) for r in recs]
    skipped = [r for r in recs if r.errors.get("skipped")]
    if skipped:
        out += ["", "Not measured:", ""]
        out += [f"- {r.engine} {r.model.name} {r.model.weight_format.split(';')[0]} batch {r.workload.batch}: "
                f"{r.errors['skipped']}" for r in skipped]
    rs = ratios(records)
    if rs:
        out += ["", "Ratios (decode tok/s medians):", ""] + rs
    out += ["", "Goals (../shared/perf.md):", ""] + goals(records)
    out += ["", "How measured: batch-1 decode after a prompt of `context` random token ids, greedy, EOS ignored. "
            "HF, and onecat on a CPU: B*(N-1)/(t(generate N) - t(generate 1)) per repeat (prefill cancels out); "
            "onecat on a GPU: its decode phase, as llama-batched-bench times its own (the tokens after the engine "
            "step that gives the last request its first token, over the seconds from that step to the last), so "
            "the prompts' prefill, the decode rows chunked prefill runs beside it and its run-to-run spread stay "
            "out (its records keep the difference's rates too); fresh "
            "prompts each repeat. llama.cpp: llama-bench tg rows (context 0 = the standard tg128; the context-512 "
            "row matches the others) with its per-repetition rates, and llama-batched-bench's decode-phase rate "
            "(one run per batch size). Weight GB/s = bytes of the weights read per decoded token (the GGUF's, "
            "embedding as one row; HF: FP16) x tok/s; % of copy against the copy bandwidth above. HF runs FP16 "
            "(it reads Q4 GGUF only by dequantizing on the CPU), so its row is per shape, not per format. "
            "Contract records: peers.jsonl beside this file."]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")
