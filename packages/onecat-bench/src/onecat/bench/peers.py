"""onecat vs llama.cpp vs HF transformers decode, on the same shapes and GGUF files, in one run.

    onecat-bench peers --out DIR [--configs smollm2-135m:Q4_1 llama3-8b:Q4_0 llama3-8b:Q4_K_M]
        [--llama-cpp-bin DIR] [--batched llama3-8b:Q4_0=32,64] [--deadline SECONDS]

For each config (shape:file type) it writes a GGUF with generated weights (synth_gguf.py; kept in
--gguf-dir and reused), then runs llama.cpp (llama-bench, llama-batched-bench), HF transformers
(FP16, once per shape) and onecat's engine, each in a child process with a time limit (a crash or
an out-of-memory is recorded, not fatal). A peer that cannot run here (no llama.cpp binaries, no
transformers) is skipped with its reason. Every result becomes a contract record in
DIR/peers.jsonl, and DIR/peers.md is rewritten after each one, so a run cut short still leaves
its report. Measurement: peer_runners.py. Device-to-device copy bandwidth is measured in the
same run; "% of copy" = weight bytes read per token x tok/s / copy bandwidth (batch 1 only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from .contract import (MEASURED, Machine, Metric, ModelInfo, Record, Runtime, Sampling, Workload, append_jsonl,
                       metric)
from .peer_runners import KV_TYPES, DecodeResult
from .synth_gguf import SHAPES, SynthResult, describe, synthesize, tensor_plan

DEFAULT_CONFIGS = ["smollm2-135m:Q4_1", "llama3-8b:Q4_0", "llama3-8b:Q4_K_M"]
DEFAULT_BATCHED = ["llama3-8b:Q4_0=32,64"]
LLAMA_CPP_BUILD = "/tmp/onecat-llama.cpp-build/bin"
LLAMA_CPP_SOURCE = os.path.join(os.path.dirname(__file__), *[".."] * 5, ".peers", "llama.cpp", "ONECAT_SOURCE")


def parse_config(text: str) -> tuple[str, str]:
    shape, _, ftype = text.partition(":")
    if shape not in SHAPES or not ftype:
        raise SystemExit(f"config {text!r}: expected SHAPE:TYPE with SHAPE one of {', '.join(SHAPES)}")
    tensor_plan(SHAPES[shape], ftype)  # validates the type
    return shape, ftype


def parse_batched(items: list[str]) -> dict[tuple[str, str], list[int]]:
    out = {}
    for text in items:
        cfg, _, sizes = text.partition("=")
        try:
            out[parse_config(cfg)] = [int(b) for b in sizes.split(",") if b]
        except ValueError:
            raise SystemExit(f"--batched {text!r}: expected SHAPE:TYPE=B1,B2,...") from None
    return out


def copy_bandwidth(nbytes: int = 1 << 30, iters: int = 20) -> float | None:
    """Device-to-device copy, bytes read + written per second (median of `iters`), or None on CPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    times.sort()
    return 2 * nbytes / times[len(times) // 2]


def gguf_file(shape: str, ftype: str, gguf_dir: str, log) -> SynthResult:
    """The config's synthesized GGUF, reused when its sidecar says it is complete."""
    path = os.path.join(gguf_dir, f"{shape}.{ftype}.gguf")
    side = path + ".synth.json"
    if os.path.isfile(path) and os.path.isfile(side):
        with open(side) as fh:
            meta = json.load(fh)
        if meta.get("bytes") == os.path.getsize(path) and meta.get("shape") == shape and meta.get("ftype") == ftype:
            spec = SHAPES[shape]
            return SynthResult(path, spec, ftype, tensor_plan(spec, ftype), meta["bytes"], meta["seconds"],
                               meta["tokenizer"], meta["type_counts"])
    r = synthesize(shape, ftype, path)
    with open(side, "w") as fh:
        json.dump({"shape": shape, "ftype": ftype, "bytes": r.bytes, "seconds": r.seconds, "tokenizer": r.tokenizer,
                   "type_counts": r.type_counts}, fh)
    log(describe(r))
    return r


def hf_weight_bytes(shape: str, dtype: str = "float16") -> int:
    """Bytes a batch-1 decode step reads in HF (FP16 on GPU, FP32 on CPU): every weight, the
    embedding as one row (a tied embedding also whole, as the output)."""
    s = SHAPES[shape]
    emb = s.vocab * s.hidden
    return (4 if dtype == "float32" else 2) * (s.n_params() - emb + s.hidden + (emb if s.tied else 0))


class PeerRun:
    """Runs children under a shared deadline and turns their results into records and a report."""

    def __init__(self, a, machine: Machine, copy_bw: float | None):
        self.a, self.machine, self.copy_bw = a, machine, copy_bw
        self.t_end = time.monotonic() + a.deadline if a.deadline else None
        self.records: list[Record] = []
        self.files: dict[tuple[str, str], SynthResult] = {}
        self.jsonl = os.path.join(a.out, "peers.jsonl")
        self.logf = open(os.path.join(a.out, "peers.log"), "a")

    def log(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        self.logf.write(line + "\n")
        self.logf.flush()

    def time_left(self) -> float:
        return float("inf") if self.t_end is None else self.t_end - time.monotonic()

    def limit(self) -> float:
        return max(1.0, min(self.a.timeout, self.time_left() - 5))

    # -- records --------------------------------------------------------------------------------
    def add(self, rec: Record) -> None:
        self.records.append(rec)
        append_jsonl(self.jsonl, [rec])
        from .peers_report import write_report

        write_report(self.records, os.path.join(self.a.out, "peers.md"), self.copy_bw, self.files)

    def skipped(self, engine: str, shape: str, fmt: str, reason: str, batch: int = 1) -> None:
        self.log(f"skip {engine} {shape} {fmt} batch {batch}: {reason}")
        rec = self.record(DecodeResult(engine, shape, fmt, batch, self.a.prompt_len, self.a.gen, []), None)
        rec.errors = {"count": 1, "skipped": reason}
        self.add(rec)

    def record(self, r: DecodeResult, synth: SynthResult | None) -> Record:
        s = SHAPES[r.shape]
        d = r.details
        metrics: dict[str, Metric] = {}
        if r.tok_s:
            metrics["decode_tok_s"] = metric(r.tok_s, "tok/s")
            metrics["ms_per_token"] = metric([1e3 * r.batch / x for x in r.tok_s], "ms")
        if r.prefill_tok_s:
            metrics["prefill_tok_s"] = metric(r.prefill_tok_s, "tok/s")
        if r.load_s is not None:
            metrics["load_time"] = Metric("s", r.load_s, r.load_s, r.load_s, 1)
        wbytes = (synth.weight_bytes_per_token() if synth else
                  hf_weight_bytes(r.shape, d.get("dtype", "float16")) if r.engine.startswith("hf") else None)
        extra = {"peer": d, "weight_bytes_per_token": wbytes, "copy_bandwidth_Bps": self.copy_bw,
                 "decode_tok_s_samples": r.tok_s, "prefill_tok_s_samples": r.prefill_tok_s}
        if wbytes and r.tok_s and r.batch == 1:
            bw = [wbytes * x for x in r.tok_s]
            metrics["weight_bandwidth"] = metric([b / 1e9 for b in bw], "GB/s")
            if self.copy_bw:
                metrics["pct_of_copy_bandwidth"] = metric([100 * b / self.copy_bw for b in bw], "%")
        fmt = r.weight_format + (f"; engine: {d['engine_weight_format']}" if d.get("engine_weight_format") else "")
        model = ModelInfo(name=s.name, source=synth.path if synth else "shape table (HF config)", arch="llama",
                          layers=s.layers, hidden=s.hidden, ffn=s.ffn, heads=s.heads, kv_heads=s.kv_heads,
                          head_dim=s.head_dim, vocab=s.vocab, weight_format=fmt,
                          compute_dtype=d.get("compute_dtype") or d.get("dtype") or "")
        engine = r.engine
        if r.engine == "llama.cpp":
            engine += f" {d.get('build_commit') or ''}".rstrip()
        runtime = Runtime(device=d.get("device") or ("cuda" if self.machine.gpu else "cpu"),
                          kv_dtype=d.get("kv_dtype") or d.get("type_k") or ("float16" if self.machine.gpu else ""),
                          graph_mode=d.get("graph_mode") or ("llama.cpp CUDA graphs (its default)"
                                                             if r.engine == "llama.cpp" else ""),
                          prefix_cache=d.get("prefix_cache", "n/a"), route=d.get("route") or {})
        n = len(r.tok_s)
        measure = d.get("measure") or ("llama-bench per-repetition tok/s" if r.engine == "llama.cpp" else
                                       "decode tok/s = B*(N-1)/(t(generate N)-t(generate 1)), per repeat")
        return Record(engine=engine, kind=MEASURED, metrics=metrics, model=model,
                      workload=Workload(kind="decode", dataset="random token ids", input_len=r.prompt_len,
                                        output_len=r.gen, batch=r.batch, concurrency=r.batch, repeats=n),
                      runtime=runtime, sampling=Sampling(temperature=0.0, ignore_eos=True, max_tokens=r.gen,
                                                         workload_seed=0),
                      machine=self.machine, extra=extra,
                      notes="weights generated (speed does not depend on their values: dense model, no "
                            "speculative decoding); " + measure)

    # -- peers ------------------------------------------------------------------------------------
    def child(self, args: list[str], label: str) -> list[DecodeResult] | str:
        """Run a peer_runners child; its results, or the reason it failed."""
        if self.time_left() < 20:
            return "deadline reached before this run"
        fd, out = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        os.unlink(out)  # the child writes it (after each result, so a time limit keeps what was done)
        cmd = [sys.executable, "-m", "onecat.bench.peer_runners", *args, "--json", out]
        t = time.monotonic()
        why = None
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.limit())
            stdout, stderr = p.stdout, p.stderr
            if p.returncode != 0:
                why = f"exited {p.returncode}: " + (p.stderr.strip().splitlines() or ["(no output)"])[-1][-400:]
        except subprocess.TimeoutExpired as e:
            stdout, stderr = _text(e.stdout), _text(e.stderr)
            why = f"timed out after {time.monotonic() - t:.0f} s"
        with open(os.path.join(self.a.out, "peers_children.log"), "a") as fh:
            fh.write(f"== {label}: {' '.join(cmd)}\n{stdout[-4000:]}\n{stderr[-8000:]}\n")
        res = []
        if os.path.isfile(out):
            with open(out) as fh:
                res = [DecodeResult(**r) for r in json.load(fh)]
            os.unlink(out)
        if why and not res:
            return why
        if why:
            self.log(f"{label}: {why}; keeping the {len(res)} result(s) it finished")
            for r in res:
                r.details["cut_short"] = why
        return res

    def emit(self, res: list[DecodeResult] | str, engine: str, shape: str, fmt: str, synth, batches=(1,)) -> None:
        if isinstance(res, str):
            for b in batches:
                self.skipped(engine, shape, fmt, res, b)
            return
        for r in res:
            rec = self.record(r, synth)
            m = rec.metrics.get("decode_tok_s")
            self.log(f"{engine:16} {shape:13} {r.weight_format:18} batch {r.batch:3} ctx {r.prompt_len:4}: "
                     f"{m.median:9.1f} tok/s (min {m.min:.1f}, max {m.max:.1f}, n {m.n})")
            self.add(rec)
        done = {r.batch for r in res}
        for b in batches:
            if b not in done:
                why = next((r.details.get("cut_short") for r in res if r.details.get("cut_short")), "no result")
                self.skipped(engine, shape, fmt, why, b)

    def llama_cpp(self, shape: str, ftype: str, synth: SynthResult, batches: list[int]) -> None:
        from .peer_runners import run_llama_batched, run_llama_bench

        a = self.a
        raw = os.path.join(a.out, "peers_children.log")
        if not a.llama_cpp_bin or not os.path.isfile(os.path.join(a.llama_cpp_bin, "llama-bench")):
            self.skipped("llama.cpp", shape, f"GGUF {ftype}", f"no llama-bench under {a.llama_cpp_bin!r} "
                         "(build it: tools/peers/build_llama_cpp.sh)")
            return
        for name, fn, bs in (("llama-bench", lambda: run_llama_bench(
                a.llama_cpp_bin, synth.path, shape, ftype, a.prompt_len, a.gen, a.llama_repeats,
                depths=(0, a.prompt_len), timeout=self.limit(), raw_log=raw, kv=a.kv), [1]),
                ("llama-batched-bench", lambda: run_llama_batched(
                    a.llama_cpp_bin, synth.path, shape, ftype, a.prompt_len, a.gen, batches,
                    timeout=self.limit(), raw_log=raw, kv=a.kv), batches)):
            if not bs:
                continue
            if self.time_left() < 20:
                self.emit("deadline reached before this run", "llama.cpp", shape, f"GGUF {ftype}", synth, bs)
                continue
            try:
                res = fn()
                for r in res:
                    r.details["source"] = self.llama_source
            except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
                res = f"{name}: {type(e).__name__}: {str(e)[-400:]}"
            self.emit(res, "llama.cpp", shape, f"GGUF {ftype}", synth, bs)

    def hf(self, shape: str) -> None:
        a = self.a
        why = _missing("transformers")
        res = why or self.child(["hf", "--shape", shape, "--device", a.device, "--prompt-len", str(a.prompt_len),
                                 "--gen", str(a.gen), "--repeats", str(a.repeats)]
                                + (["--threads", str(a.threads)] if a.threads else []), f"hf {shape}")
        self.emit(res, "hf-transformers", shape, "fp16", None)

    def onecat(self, shape: str, ftype: str, batches: list[int]) -> None:
        a = self.a
        synth = self.files[(shape, ftype)]
        bs = [1] + [b for b in batches if b != 1]
        why = _missing("onecat.serve.llm")
        res = why or self.child(["onecat", "--gguf", synth.path, "--shape", shape, "--format", ftype, "--device",
                                 a.device, "--prompt-len", str(a.prompt_len), "--gen", str(a.gen), "--repeats",
                                 str(a.repeats), "--batched-repeats", str(a.batched_repeats), "--batch", *map(str, bs)]
                                + (["--threads", str(a.threads)] if a.threads else [])
                                + (["--scheduling", a.onecat_scheduling] if a.onecat_scheduling else [])
                                + (["--prefill-first"] if a.onecat_prefill_first else [])
                                + ["--kv", a.kv],
                                f"onecat {shape} {ftype}")
        self.emit(res, "onecat", shape, f"GGUF {ftype}", synth, bs)

    def run(self) -> None:
        """llama.cpp first (seconds), then per config HF (once per shape: FP16, seconds) and onecat:
        if the deadline cuts the run, what is lost is the last config's onecat run."""
        a = self.a
        self.llama_source = _read_source(a.llama_cpp_source)
        configs = [parse_config(c) for c in a.configs]
        batched = parse_batched(a.batched)
        for shape, ftype in configs:
            self.files[(shape, ftype)] = gguf_file(shape, ftype, a.gguf_dir, self.log)
        if a.synth_only:
            return
        if "llama.cpp" in a.engines:
            for shape, ftype in configs:
                self.llama_cpp(shape, ftype, self.files[(shape, ftype)], batched.get((shape, ftype), []))
        hf_done = set()
        for shape, ftype in configs:
            if "hf" in a.engines and shape not in hf_done:
                hf_done.add(shape)
                self.hf(shape)
            if "onecat" in a.engines:
                self.onecat(shape, ftype, batched.get((shape, ftype), []))


def _text(x) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")


def _missing(module: str) -> str | None:
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    return None if found else f"python module {module!r} is not installed here"


def _read_source(path: str | None) -> dict:
    if not path or not os.path.isfile(path):
        return {}
    with open(path) as fh:
        return dict(line.strip().split("=", 1) for line in fh if "=" in line)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="onecat-bench peers", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory for peers.jsonl, peers.md and logs")
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS, help="SHAPE:TYPE (default: %(default)s)")
    ap.add_argument("--engines", nargs="+", default=["llama.cpp", "hf", "onecat"],
                    choices=["llama.cpp", "hf", "onecat"])
    ap.add_argument("--batched", nargs="*", default=DEFAULT_BATCHED,
                    help="SHAPE:TYPE=B1,B2: aggregate decode at these batch sizes (default: %(default)s)")
    ap.add_argument("--gguf-dir", default=os.path.join(tempfile.gettempdir(), "onecat-peers-gguf"))
    ap.add_argument("--llama-cpp-bin", default=os.environ.get("ONECAT_LLAMA_CPP_BIN", LLAMA_CPP_BUILD))
    ap.add_argument("--llama-cpp-source", default=os.path.normpath(LLAMA_CPP_SOURCE),
                    help="the ONECAT_SOURCE file of the trimmed llama.cpp source (commit, sdist)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--onecat-scheduling", choices=["async", "sync"], default=None,
                    help="onecat's scheduler.async_scheduling (default: the engine's, asynchronous)")
    ap.add_argument("--onecat-prefill-first", action="store_true",
                    help="onecat's scheduler.prefill_first: every prompt of a batch before its decode rows, as "
                    "llama-batched-bench runs them (default: the engine's, decode rows first)")
    ap.add_argument("--kv", choices=sorted(KV_TYPES), default="fp16",
                    help="the KV cache on both sides: fp16 (each engine's default), or 8bit (onecat E4M3, "
                    "llama.cpp q8_0)")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3, help="onecat and HF repeats (median/min/max)")
    ap.add_argument("--batched-repeats", type=int, default=2, help="onecat repeats at batch > 1")
    ap.add_argument("--llama-repeats", type=int, default=5, help="llama-bench -r")
    ap.add_argument("--synth-only", action="store_true", help="write the configs' GGUF files and stop")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads in the children")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per child run")
    ap.add_argument("--deadline", type=float, default=None, help="seconds for the whole run; later runs are skipped")
    return ap


def main(argv: list[str] | None = None) -> None:
    a = build_parser().parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    machine = Machine.current()
    bw = None if a.synth_only else copy_bandwidth()
    run = PeerRun(a, machine, bw)
    if not a.synth_only:
        run.log(f"machine: {machine.gpu or machine.cpu}; copy bandwidth "
                + (f"{bw / 1e9:.0f} GB/s" if bw else "n/a (no GPU)"))
    try:
        run.run()
    finally:
        from .peers_report import write_report

        path = os.path.join(a.out, "peers.md")
        write_report(run.records, path, bw, run.files)
        run.log(f"wrote {path} and {run.jsonl} ({len(run.records)} records)")


if __name__ == "__main__":
    main()
