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

from .contract import Contract, append_jsonl, summary

PROMPT = "Explain in detail how a transformer language model generates text, step by step:"


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
    rates = []
    for _ in range(repeats):
        t1, tn = timed(1), timed(gen)
        rates.append((gen - 1) / (tn - t1))
    return loads, rates


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
    rates = []
    for _ in range(repeats):
        t1, tn = timed(1), timed(gen)
        rates.append((gen - 1) / (tn - t1))
    return loads, rates


def main(argv: list[str] | None = None) -> None:
    from onecat.models.loader import default_model_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF path (default: the embedded SmolLM2)")
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/cpu_smollm2.jsonl")
    a = ap.parse_args(argv)
    path = a.model or default_model_path()
    common = dict(model=os.path.basename(path), weights="GGUF Q4_1 (embd Q8_0), dequantized to float32 at load",
                  batch=1, context=f"prompt {PROMPT!r}, generate {a.gen}", kv_dtype="float32",
                  graph_mode="eager", sampling="greedy")
    records = []
    for engine, fn in [("onecat (torch reference route)", _onecat), ("hf-transformers", _hf)]:
        loads, rates = fn(path, a.gen, a.repeats)
        records.append(Contract(engine=engine, metric="load_time", unit="s", result=summary(loads), **common))
        records.append(Contract(engine=engine, metric="decode", unit="tok/s", result=summary(rates), **common))
    append_jsonl(a.out, records)
    print(f"{'engine':32} {'metric':10} {'median':>8} {'min':>8} {'max':>8} unit")
    for r in records:
        s = r.result
        print(f"{r.engine:32} {r.metric:10} {s['median']:8.2f} {s['min']:8.2f} {s['max']:8.2f} {r.unit}")


if __name__ == "__main__":
    main()
