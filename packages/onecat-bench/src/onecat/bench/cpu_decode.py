"""CPU batch-1 decode speed and load time of the embedded SmolLM2 GGUF: onecat's reference route
next to HF transformers on the same file, same machine, same run.

    python -m onecat.bench.cpu_decode --out benchmarks/results/cpu_smollm2.jsonl

Decode tok/s excludes prefill: (generate N tokens) - (generate 1 token), over N - 1 tokens.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from .contract import Machine, ModelInfo, Record, Runtime, Sampling, Workload, append_jsonl, metric
from .peer_runners import positive_pair

PROMPT = "Explain in detail how a transformer language model generates text, step by step:"


def _rates(timed, gen: int, repeats: int, engine: str) -> list[float]:
    """(gen - 1) / (t(generate gen) - t(generate 1)) per repeat, each pair measured again while its
    difference is not positive (peer_runners.positive_pair)."""
    rates = []
    for rep in range(repeats):
        t1, tn, _ = positive_pair(lambda: timed(1), lambda: (timed(gen), None), gen, f"{engine} repeat {rep}")
        rates.append((gen - 1) / (tn - t1))
    return rates


def _onecat(path: str, gen: int, repeats: int) -> tuple[list[float], list[float]]:
    from onecat.serve.llm import LLM
    from onecat.serve.sampling_params import SamplingParams

    loads = []
    for _ in range(repeats):
        t = time.perf_counter()
        llm = LLM(path, progress=False)
        loads.append(time.perf_counter() - t)
    ids = llm.tokenizer.encode(PROMPT)

    def timed(n: int) -> float:
        t = time.perf_counter()
        llm.generate(ids, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
        return time.perf_counter() - t

    timed(4)  # warm-up
    return loads, _rates(timed, gen, repeats, "onecat")


def _hf(path: str, gen: int, repeats: int) -> tuple[list[float], list[float]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d, f = os.path.split(path)
    loads = []
    for _ in range(repeats):
        t = time.perf_counter()
        tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
        loads.append(time.perf_counter() - t)
    ids = tok(PROMPT, return_tensors="pt").input_ids

    def timed(n: int) -> float:
        t = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        return time.perf_counter() - t

    timed(4)
    return loads, _rates(timed, gen, repeats, "hf-transformers")


def main(argv: list[str] | None = None) -> None:
    from onecat.models.loader import default_model_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF path (default: the embedded SmolLM2)")
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/cpu_smollm2.jsonl")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    a = ap.parse_args(argv)
    path = a.model or default_model_path()
    if a.threads:
        torch.set_num_threads(a.threads)
    machine = Machine.current()
    model = ModelInfo(name=os.path.basename(path), source=path,
                      weight_format="GGUF Q4_1 (embd Q8_0), dequantized to float32 at load", compute_dtype="float32")
    workload = Workload(kind="decode", dataset=f"one prompt: {PROMPT!r}", output_len=a.gen, batch=1,
                        concurrency=1, repeats=a.repeats)
    runtime = Runtime(device="cpu", kv_dtype="float32", graph_mode="eager", prefix_cache="n/a (timed generate calls)")
    sampling = Sampling(temperature=0.0, ignore_eos=True, max_tokens=a.gen)
    records = []
    for engine, fn in [("onecat (torch reference route)", _onecat), ("hf-transformers", _hf)]:
        loads, rates = fn(path, a.gen, a.repeats)
        records.append(Record(engine=engine, metrics={"load_time": metric(loads, "s"), "decode_tok_s": metric(rates, "tok/s")},
                              model=model, workload=workload, runtime=runtime, sampling=sampling, machine=machine,
                              notes="decode tok/s = (N - 1) / (t(generate N) - t(generate 1)): prefill excluded"))
    append_jsonl(a.out, records)
    print(f"{'engine':32} {'metric':14} {'median':>8} {'min':>8} {'max':>8} unit")
    for r in records:
        for name, s in r.metrics.items():
            print(f"{r.engine:32} {name:14} {s.median:8.2f} {s.min:8.2f} {s.max:8.2f} {s.unit}")


if __name__ == "__main__":
    main()
