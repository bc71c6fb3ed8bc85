"""Offline benchmark: the in-process engine (`onecat.serve.llm.LLM`), driven step by step.

    onecat-bench offline --input-len 128 512 --output-len 64 --concurrency 1 4 16 --repeats 3 \
        --out results.jsonl --report report.md --plots plots/

Requests are added to the engine as they arrive (all at once, or Poisson at --request-rate),
never more than --concurrency in flight; every engine step is timestamped, so each request gets
TTFT, inter-token latencies and E2E exactly as a streaming client would see them (minus HTTP).
Each repeat draws fresh prompts (seed + repeat), so the prefix cache starts cold except for a
deliberately shared prefix; the hit rate is recorded from the engine's own counters.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections import deque

from .contract import MEASURED, Machine, Metric, ModelInfo, Record, Runtime, Sampling, SpecDecode, Workload
from .results import RequestResult, aggregate
from .workloads import Corpus, WorkloadSpec, add_sweep_args, arrival_offsets, make_prompts, sweep_points


def _progress(total: int, desc: str, disable: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="req", disable=True if disable else None, leave=False)


def run_offline(llm, prompts: list[list[int]], params, concurrency: int | None = None,
                request_rate: float | None = None, seed: int = 0, progress: bool = False,
                desc: str = "offline") -> tuple[list[RequestResult], float]:
    """Run `prompts` through `llm.engine`; returns per-request results and the wall time (s)."""
    eng = llm.engine
    if eng.has_unfinished_requests():
        raise RuntimeError("the engine has unfinished requests; the benchmark needs it idle")
    offsets = arrival_offsets(len(prompts), request_rate, seed)
    results = [RequestResult(i, prompt_tokens=len(p)) for i, p in enumerate(prompts)]
    pending = deque(range(len(prompts)))
    tag = uuid.uuid4().hex[:8]
    live: dict[str, int] = {}  # engine request id -> index
    seen = [0] * len(prompts)
    last = [0.0] * len(prompts)
    limit = concurrency or len(prompts)
    bar = _progress(len(prompts), desc, not progress)
    t0 = time.perf_counter()
    try:
        while pending or live:
            now = time.perf_counter() - t0
            while pending and len(live) < limit and offsets[pending[0]] <= now:
                i = pending.popleft()
                rid = f"bench-{tag}-{i}"
                results[i].start = time.perf_counter() - t0
                try:
                    eng.add_request(rid, prompts[i], params)
                    live[rid] = i
                except Exception as e:  # the engine refused it: record and go on
                    results[i].error, results[i].error_kind = f"{type(e).__name__}: {e}", "refused"
                    bar.update(1)
            if not live:
                if pending:
                    time.sleep(max(0.0, min(offsets[pending[0]] - (time.perf_counter() - t0), 0.05)))
                continue
            try:
                outs = eng.step()
            except Exception as e:  # a failed step fails the requests in flight, not the run
                for rid, i in list(live.items()):
                    eng.abort_request(rid)
                    results[i].error, results[i].error_kind = f"engine step failed: {type(e).__name__}: {e}", "engine"
                    bar.update(1)
                live.clear()
                continue
            t = time.perf_counter() - t0
            for out in outs:
                i = live.get(out.request_id)
                if i is None:
                    continue
                r, n = results[i], len(out.outputs[0].token_ids)
                if n > seen[i]:
                    if r.ttft is None:
                        r.ttft = t - r.start
                    else:
                        r.itl.append(t - last[i])
                    last[i], seen[i] = t, n
                if out.finished:
                    r.e2e, r.output_tokens = t - r.start, n
                    r.finish_reason = out.outputs[0].finish_reason
                    r.cached_tokens = out.num_cached_tokens
                    del live[out.request_id]
                    bar.update(1)
    finally:
        for rid in list(live):
            eng.abort_request(rid)
        bar.close()
    return results, time.perf_counter() - t0


def model_info(llm) -> ModelInfo:
    runner = llm.engine.runner
    loaded = runner.loaded
    fmt = loaded.weight_format
    if getattr(loaded, "dense", True):  # loaders without the flag always dequantized
        if loaded.source.endswith(".gguf"):
            fmt += ", dequantized to " + str(runner.dtype).removeprefix("torch.") + " at load"
    else:
        fmt += ", projections kept quantized (prepared for the device at load)"
    return ModelInfo.from_spec(loaded.spec, name=llm.engine.model_name, source=loaded.source, weight_format=fmt,
                               compute_dtype=str(runner.dtype).removeprefix("torch."))


def runtime_info(llm, prefix_state: str) -> Runtime:
    runner, cfg = llm.engine.runner, llm.engine.config
    route: dict[str, set] = {}
    for row in runner.route_report():
        route.setdefault(row["op"], set()).add(row["provider"])
    kv = runner.kv_caches[0][0].dtype if runner.kv_caches else runner.dtype
    # graph_mode: e.g. "CUDA graphs for decode batches [1, 2, 4]" or "eager: not a CUDA device"
    return Runtime(device=str(runner.device), kv_dtype=str(kv).removeprefix("torch."), graph_mode=runner.graph_status,
                   prefix_cache=prefix_state if cfg.cache.enable_prefix_caching else "disabled",
                   max_num_seqs=cfg.scheduler.max_num_seqs, block_size=runner.block_size,
                   route={k: ",".join(sorted(v)) for k, v in sorted(route.items())})


def bench_point(llm, point: WorkloadSpec, repeats: int = 3, ignore_eos: bool = True, progress: bool = False,
                corpus: Corpus | None = None, engine_label: str = "onecat (in-process)",
                requests_out: list | None = None) -> Record:
    from onecat.serve.sampling_params import SamplingParams

    corpus = corpus or Corpus(llm.tokenizer)
    params = SamplingParams(temperature=0.0, max_tokens=point.output_len, ignore_eos=ignore_eos)
    machine = Machine.current()  # clocks as found, before the run
    eng = llm.engine
    before = eng.stats()
    runs = []
    for rep in range(repeats):
        prompts = make_prompts(corpus, point.num_prompts, point.input_len, seed=point.prompt_seed(rep),
                               shared_prefix_len=point.shared_prefix_len)
        res, wall = run_offline(llm, prompts, params, point.concurrency, point.request_rate,
                                seed=point.prompt_seed(rep), progress=progress,
                                desc=f"in {point.input_len} out {point.output_len} conc {point.concurrency}")
        runs.append((res, wall))
        if requests_out is not None:
            requests_out.extend(dict(r.to_dict(), repeat=rep) for r in res)
    after = eng.stats()
    metrics, errors = aggregate(runs)
    queries = after["prefix_cache_queries"] - before["prefix_cache_queries"]
    hits = after["prefix_cache_hits"] - before["prefix_cache_hits"]
    if queries:
        rate = hits / queries
        metrics["prefix_cache_hit_rate"] = Metric("fraction", rate, rate, rate, queries, over="prompt tokens")
    state = "enabled, cold per repeat" + (f" (shared prefix {point.shared_prefix_len})" if point.shared_prefix_len else "")
    spec = spec_info(llm, before, after)
    if spec.acceptance_rate is not None:
        a = spec.acceptance_rate
        metrics["spec_acceptance_rate"] = Metric("fraction", a, a, a, int(after.get("spec_drafts_proposed", 0)
                                                                         - before.get("spec_drafts_proposed", 0)),
                                                 over="drafted tokens")
    return Record(
        engine=engine_label, kind=MEASURED, metrics=metrics, model=model_info(llm),
        workload=Workload(kind="offline", dataset="pydoc_data.topics", input_len=point.input_len,
                          output_len=point.output_len, num_prompts=point.num_prompts, batch=None,
                          concurrency=point.concurrency or point.num_prompts, request_rate=point.request_rate,
                          shared_prefix_len=point.shared_prefix_len, repeats=repeats),
        runtime=runtime_info(llm, state),
        sampling=Sampling(temperature=0.0, seed=None, workload_seed=point.seed, ignore_eos=ignore_eos,
                          max_tokens=point.output_len),
        spec=spec, machine=machine, errors=errors)


def spec_info(llm, before: dict, after: dict) -> SpecDecode:
    """The engine's speculative method and, from its counters, the run's draft acceptance."""
    cfg = getattr(llm.engine.config, "spec", None)
    method = getattr(cfg, "method", "none") if cfg is not None else "none"
    if method == "none":
        return SpecDecode()
    proposed = after.get("spec_drafts_proposed", 0) - before.get("spec_drafts_proposed", 0)
    accepted = after.get("spec_drafts_accepted", 0) - before.get("spec_drafts_accepted", 0)
    return SpecDecode(method=method, num_speculative_tokens=getattr(cfg, "num_speculative_tokens", 0),
                      acceptance_rate=accepted / proposed if proposed else None)


def warm_up(llm) -> None:
    from onecat.serve.sampling_params import SamplingParams

    llm.generate(llm.tokenizer.encode("Hello")[:4] or [0], SamplingParams(temperature=0, max_tokens=2))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="onecat-bench offline", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF file or HF directory (default: the embedded SmolLM2)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 is fastest on a busy machine)")
    ap.add_argument("--spec-method", default=None, help="the engine's speculative method (e.g. ngram)")
    ap.add_argument("--num-speculative-tokens", type=int, default=None)
    ap.add_argument("--no-prefix-caching", action="store_true")
    add_sweep_args(ap)
    a = ap.parse_args(argv)
    import torch

    from onecat.serve import config as serve_config
    from onecat.serve.llm import LLM

    if a.threads:
        torch.set_num_threads(a.threads)
    cfg = serve_config.EngineConfig(model=serve_config.ModelConfig(path=a.model, device=a.device, dtype=a.dtype))
    cfg.cache.enable_prefix_caching = not a.no_prefix_caching
    if a.spec_method or a.num_speculative_tokens:
        if not hasattr(serve_config, "SpecConfig"):
            raise SystemExit("this onecat-serve has no speculative decoding config")
        cfg.spec = serve_config.SpecConfig(method=a.spec_method or "none")
        if a.num_speculative_tokens:
            cfg.spec.num_speculative_tokens = a.num_speculative_tokens
    llm = LLM(config=cfg, progress=not a.no_progress)
    warm_up(llm)
    corpus = Corpus(llm.tokenizer)
    records, reqs = [], []
    for point in sweep_points(a):
        rec = bench_point(llm, point, a.repeats, ignore_eos=not a.no_ignore_eos, progress=not a.no_progress,
                          corpus=corpus, requests_out=reqs)
        records.append(rec)
        print(one_line(rec), flush=True)
    from .report import emit

    emit(records, a.out, a.report, a.plots, requests=reqs, requests_out=a.requests_out)


def one_line(rec: Record) -> str:
    m = rec.metrics

    def g(name: str, fmt: str = "{:.1f}") -> str:
        x = m.get(name)
        return fmt.format(x.median) if x else "-"

    return (f"{rec.label():48} out {g('output_throughput')} tok/s  req {g('request_throughput', '{:.2f}')}/s  "
            f"TTFT {g('ttft')} ms  TPOT {g('tpot')} ms  ITL {g('itl')} ms  failed {int(m['failed_requests'].median)}")


if __name__ == "__main__":
    main()
