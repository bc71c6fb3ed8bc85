"""Speculative decoding on the CPU: acceptance length and speedup against spec off, on an
input-grounded prompt set (answers that quote a given passage).

    onecat-bench spec --methods none,ngram,draft:24 --repeats 3 --max-tokens 64 \\
        --out benchmarks/results/cpu-2026-11-29/spec_smollm2.jsonl

Prompts: passages of real text (the first characters of `pydoc_data.topics` entries) with an
instruction to repeat, quote or extract from them, chat template applied. Each method runs on
its own engine over the same loaded model (own KV tensors, prefix caching off: every request
prefills in full, the same for every method), one request at a time, greedy. Per repeat, the
methods run back to back (none first), so a speedup pairs runs made under the same CPU load.

Metrics per method (median/min/max over repeats):
- output_tok_s: output tokens / wall time over the whole prompt set (prefill included);
- speedup_vs_off: spec-off wall time / this method's wall time, in the same repeat;
- accepted_length: output tokens per target decode step, (output - 1) / (target steps - 1) per
  request (the prefill step emits the first token); 1.0 with spec off;
- spec_acceptance_rate: accepted drafts / drafted tokens.
Greedy outputs are compared with spec off on every run (quality.details.greedy_identical).
"""

from __future__ import annotations

import argparse
import time

from pydoc_data.topics import topics

from .contract import Machine, ModelInfo, Quality, Record, Runtime, Sampling, SpecDecode, Workload, append_jsonl, metric

# (topic, characters of it, instruction): the answer is in the passage
GROUNDED = [
    ("assert", 600, "Repeat the following text exactly, word for word."),
    ("if", 500, "Quote the first two sentences of the following text."),
    ("while", 500, "Copy the grammar rule from the following text, then quote the sentence after it."),
    ("pass", 500, "Extract every sentence of the following text that mentions a statement."),
    ("break", 500, "Repeat the following documentation verbatim."),
    ("return", 600, "Quote the passage below, then say in one sentence what it describes."),
]


def grounded_prompts(tokenizer, num: int) -> list[str]:
    out = []
    for topic, chars, ask in GROUNDED[:num]:
        passage = topics[topic].strip()[:chars]
        out.append(tokenizer.apply_chat_template([{"role": "user", "content": f"{ask}\n\n{passage}"}],
                                                 add_generation_prompt=True))
    return out


def parse_method(text: str):
    """none | ngram | draft:N (the target's first N layers) | draft=PATH (a checkpoint)."""
    from onecat.serve.config import SpecConfig

    if text == "none":
        return SpecConfig()
    if text == "ngram":
        return SpecConfig(method="ngram")
    if text.startswith("draft:"):
        return SpecConfig(method="draft", draft_layers=int(text.split(":", 1)[1]))
    if text.startswith("draft="):
        return SpecConfig(method="draft", draft_model=text.split("=", 1)[1])
    raise ValueError(f"method {text!r}: use none, ngram, draft:N or draft=PATH")


def run_set(engine, prompts: list[str], max_tokens: int) -> dict:
    """One request at a time; returns wall time, tokens, per-request accepted lengths, outputs."""
    from onecat.serve.sampling_params import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=max_tokens)
    proposed0, accepted0 = engine.scheduler.spec_proposed, engine.scheduler.spec_accepted
    outputs, lengths, total = [], [], 0.0
    for i, p in enumerate(prompts):
        t = time.perf_counter()
        engine.add_request(f"r{i}", p, params)
        steps, out = 0, None
        while engine.has_unfinished_requests():
            steps += 1
            for o in engine.step():
                if o.finished:
                    out = o.outputs[0]
        total += time.perf_counter() - t
        outputs.append(out.token_ids)
        if steps > 1:
            lengths.append((len(out.token_ids) - 1) / (steps - 1))
    return {"time": total, "tokens": sum(len(o) for o in outputs), "lengths": lengths, "outputs": outputs,
            "proposed": engine.scheduler.spec_proposed - proposed0,
            "accepted": engine.scheduler.spec_accepted - accepted0}


def main(argv: list[str] | None = None) -> None:
    import torch

    from onecat.serve.config import CacheConfig, EngineConfig, ModelConfig
    from onecat.serve.engine import LLMEngine
    from onecat.serve.model_runner import ModelRunner

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF path (default: the embedded SmolLM2)")
    ap.add_argument("--methods", default="none,ngram,draft:24", help="comma list: none, ngram, draft:N, draft=PATH")
    ap.add_argument("-k", "--num-speculative-tokens", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=len(GROUNDED))
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--out", default=None, help="append records to this JSONL file")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    names = a.methods.split(",")
    if names[0] != "none":
        names = ["none"] + [n for n in names if n != "none"]
    first = None
    engines = {}
    for name in names:
        spec = parse_method(name)
        spec.num_speculative_tokens = a.num_speculative_tokens
        cfg = EngineConfig(model=ModelConfig(path=a.model),
                           cache=CacheConfig(num_blocks=256, enable_prefix_caching=False),
                           spec=spec)
        runner = ModelRunner(cfg, loaded=first.loaded if first else None, progress=False)
        first = first or runner
        engines[name] = LLMEngine(cfg, runner=runner)
    prompts = grounded_prompts(first.loaded.tokenizer, a.prompts)
    input_lens = [len(first.loaded.tokenizer.encode(p)) for p in prompts]
    for engine in engines.values():  # warm-up: one short request each
        run_set(engine, prompts[:1], 4)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for rep in range(a.repeats):
        for name, engine in engines.items():
            runs[name].append(run_set(engine, prompts, a.max_tokens))
            r = runs[name][-1]
            print(f"repeat {rep}: {name:10} {r['time']:7.2f} s  {r['tokens']} tokens", flush=True)

    base = runs["none"]
    loaded = first.loaded
    records = []
    for name in names:
        rs = runs[name]
        identical = all(r["outputs"] == b["outputs"] for r, b in zip(rs, base))
        proposed, accepted = sum(r["proposed"] for r in rs), sum(r["accepted"] for r in rs)
        spec = engines[name].config.spec
        records.append(Record(
            engine="onecat (torch reference route)",
            metrics={"output_tok_s": metric([r["tokens"] / r["time"] for r in rs], "tok/s"),
                     "speedup_vs_off": metric([b["time"] / r["time"] for r, b in zip(rs, base)], "x"),
                     "accepted_length": metric([sum(r["lengths"]) / len(r["lengths"]) for r in rs], "tokens/step"),
                     "spec_acceptance_rate": metric([r["accepted"] / r["proposed"] for r in rs if r["proposed"]],
                                                    "fraction")},
            model=ModelInfo.from_spec(loaded.spec, name=loaded.source.rsplit("/", 1)[-1], source=loaded.source,
                                      weight_format=f"{loaded.weight_format}, dequantized to float32 at load",
                                      compute_dtype="float32"),
            workload=Workload(kind="spec", dataset="input-grounded: pydoc_data.topics passages + repeat/quote/extract "
                              f"instructions, chat template ({', '.join(t for t, _, _ in GROUNDED[:a.prompts])})",
                              input_len=round(sum(input_lens) / len(input_lens)), output_len=a.max_tokens,
                              num_prompts=len(prompts), batch=1, concurrency=1, repeats=a.repeats),
            runtime=Runtime(device=str(first.device), kv_dtype=str(first.dtype).removeprefix("torch."),
                            prefix_cache="disabled", max_num_seqs=1, block_size=first.block_size),
            sampling=Sampling(temperature=0.0, max_tokens=a.max_tokens),
            spec=SpecDecode(method=name, num_speculative_tokens=0 if name == "none" else spec.num_speculative_tokens,
                            acceptance_rate=accepted / proposed if proposed else None,
                            mean_accepted_tokens=metric([sum(r["lengths"]) / len(r["lengths"]) for r in rs],
                                                        "x").median),
            quality=Quality(passed=identical, details={"greedy_identical": identical, "drafts_proposed": proposed,
                                                        "drafts_accepted": accepted, "input_lens": input_lens}),
            machine=Machine.current(),
            notes="CPU shared with other jobs: speedups pair methods within a repeat; accepted_length = output tokens "
                  "per target decode step, bonus token included"))
    if a.out:
        append_jsonl(a.out, records)
    print(f"{'method':12} {'tok/s med':>9} {'min':>7} {'max':>7} {'speedup med':>11} {'min':>6} {'max':>6} "
          f"{'acc.len':>7} {'acc.rate':>8} identical")
    for r in records:
        m = r.metrics
        rate = m["spec_acceptance_rate"].median if m["spec_acceptance_rate"] else float("nan")
        print(f"{r.spec.method:12} {m['output_tok_s'].median:9.2f} {m['output_tok_s'].min:7.2f} "
              f"{m['output_tok_s'].max:7.2f} {m['speedup_vs_off'].median:11.2f} {m['speedup_vs_off'].min:6.2f} "
              f"{m['speedup_vs_off'].max:6.2f} {m['accepted_length'].median:7.2f} {rate:8.2f} "
              f"{r.quality.details['greedy_identical']}")


if __name__ == "__main__":
    main()
