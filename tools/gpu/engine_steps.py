"""Where an offline `generate` spends its time, step by step: the peers bench's onecat workload
(`batch` prompts of random token ids, greedy, `gen` tokens each, EOS ignored) with every engine
step classified and timed. The bench's batch-64 rate implies 28 ms per decode step where the
graphed step itself takes 11.5 ms (benchmarks/results/h200-2026-11-29-s4/README.md): this says
which steps the difference is in.

Kinds: `graph` (plain decode replayed from a CUDA graph), `decode` (plain decode, eager), `mixed`
(prefill chunks and decode rows), `prefill`. Per kind: steps, median and total wall time, and the
part spent inside runner.execute (device work waited for through the sampled ids' copy) vs the
host rest (scheduling, postprocessing, detokenization).

    python tools/gpu/engine_steps.py --model X.gguf --batch 64 --prompt-len 512 --gen 128
    python tools/gpu/engine_steps.py --batch 8 --prompt-len 16 --gen 8 --device cpu   # smoke run
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="a GGUF file (default: the embedded SmolLM2)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--scheduling", choices=["async", "sync"], default=None, help="default: the engine's")
    ap.add_argument("--prefill-first", action="store_true", help="scheduler.prefill_first (prompts before decode rows)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also cProfile the timed generate: the N functions of most own time")
    a = ap.parse_args()

    from onecat.serve import config as serve_config
    from onecat.serve.llm import LLM
    from onecat.serve.sampling_params import SamplingParams

    cfg = serve_config.EngineConfig(model=serve_config.ModelConfig(
        path=a.model, device=a.device, dtype="auto", max_model_len=a.prompt_len + a.gen + 16))
    cfg.cache.enable_prefix_caching = False
    cfg.scheduler.max_num_seqs = max(a.batch, cfg.scheduler.max_num_seqs)
    if a.scheduling:
        cfg.scheduler.async_scheduling = a.scheduling == "async"
    cfg.scheduler.prefill_first = a.prefill_first
    llm = LLM(config=cfg, progress=False)
    eng, runner = llm.engine, llm.engine.runner
    vocab = runner.spec.vocab_size
    seen: dict = {}

    def wrap(name: str):
        fn = getattr(runner, name)

        def timed(out, *rest):
            t = time.perf_counter()
            r = fn(out, *rest)
            seen["exec"] = seen.get("exec", 0.0) + time.perf_counter() - t
            seen["sched"] = out
            return r
        setattr(runner, name, timed)

    wrap("execute")
    wrap("execute_async")
    from onecat.serve import model_runner

    real_wait = model_runner.InFlight.wait

    def timed_wait(self):  # asynchronous scheduling: the host blocked on the step in flight
        t = time.perf_counter()
        r = real_wait(self)
        seen["wait"] = seen.get("wait", 0.0) + time.perf_counter() - t
        return r
    model_runner.InFlight.wait = timed_wait
    graph_fn = runner._decode_by_graph

    def by_graph(out):
        r = graph_fn(out)
        seen["graph"] = r is not None
        return r
    runner._decode_by_graph = by_graph

    def kind() -> str:
        rows = seen["sched"].scheduled
        decode = sum(1 for s in rows if len(s.token_ids) == 1 and s.sample)
        if decode == len(rows):
            return "graph" if seen.get("graph") or (runner.graphs is not None and cfg.scheduler.async_scheduling) else "decode"
        return "mixed" if decode else "prefill"

    def generate(n: int) -> tuple[float, dict]:
        rng = random.Random(n)
        for i in range(a.batch):
            eng.add_request(f"{n}-{i}", [rng.randrange(vocab) for _ in range(a.prompt_len)],
                            SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True))
        steps: dict[str, list[tuple[float, float]]] = defaultdict(list)
        t0 = time.perf_counter()
        while eng.has_unfinished_requests():
            seen.clear()
            t = time.perf_counter()
            eng.step()
            dt = time.perf_counter() - t
            if "sched" in seen:
                steps[kind()].append((dt, seen.get("exec", 0.0), seen.get("wait", 0.0)))
        return time.perf_counter() - t0, steps

    generate(a.gen)  # warm-up at full length, as the peers bench (_timed_rates): every eager shape seen once
    t1, _ = generate(1)
    if a.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        tn, steps = generate(a.gen)
        prof.disable()
    else:
        tn, steps = generate(a.gen)
    print(f"{runner.device} {runner.graph_status}; batch {a.batch}, prompt {a.prompt_len}, gen {a.gen}, "
          f"{'async' if cfg.scheduler.async_scheduling else 'sync'} scheduling"
          f"{', prompts first' if cfg.scheduler.prefill_first else ''}")
    print(f"t(generate 1) {t1:.3f} s, t(generate {a.gen}) {tn:.3f} s -> decode rate "
          f"{a.batch * (a.gen - 1) / (tn - t1):,.1f} tok/s, {(tn - t1) / (a.gen - 1) * 1e3:.2f} ms per token step")
    # waiting: blocked on the step in flight (asynchronous scheduling), inside the host rest; near 0 means
    # the host, not the GPU, sets the pace
    print(f"{'kind':8} {'steps':>6} {'median ms':>10} {'total ms':>10} {'in execute':>11} {'host rest':>10} "
          f"{'waiting':>8}")
    for k in ("prefill", "mixed", "decode", "graph"):
        v = steps.get(k)
        if v:
            total, ex, w = (sum(x[i] for x in v) for i in range(3))
            print(f"{k:8} {len(v):6d} {statistics.median(x[0] for x in v) * 1e3:10.2f} {total * 1e3:10.1f} "
                  f"{ex * 1e3:11.1f} {(total - ex) * 1e3:10.1f} {w * 1e3:8.1f}")
    if a.profile:
        pstats.Stats(prof).sort_stats("tottime").print_stats(a.profile)


if __name__ == "__main__":
    main()
