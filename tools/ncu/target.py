"""The decode workload that tools/ncu/ncu_profile.py runs under Nsight Compute.

Builds the engine's runner (the real GGUF with --model, or a standard shape with generated
weights in a real format: --shape llama3-8b --weights q4_0), runs `batch` requests with
`context`-token prompts through prefill and a few warm-up decode steps, then:

1. times `--timed` decode steps with CUDA events, not profiled (the step's device time, which the
   report sets against the sum of its kernels' ncu durations: the gaps), written to --steps-json;
2. starts the CUDA profiler (`ncu --profile-from-start off` captures only what follows) and runs
   `--profiled` decode steps inside NVTX ranges: `onecat.step.decode.<i>` around each step and
   `onecat.op.<op>.<provider>` around every op dispatch, the provider being the one the kernel
   registry admitted; then stops the profiler.

    python tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 1 --context 512

Runs without ncu too (then it only prints the timed steps).

`--ab-disable OP:PROVIDER,...` instead times an A/B in this one process: the decode graphs captured a second time
with those providers disabled (the registry's syntax, as $ONECAT_DISABLED_PROVIDERS), then `--rounds` rounds of
`--timed` steps of the route and of the other graphs, alternated on the same weights, cache and clocks (separate
processes drift by +-5% on the lent H200: s31-s32). Lists separated by `;` capture one more set of graphs each
(B, C, ...), all alternated with A.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time

import torch

# a variant whose selections equal the route's is refused (a mistyped --ab-disable), unless a wrapper changes what the
# same providers launch (a kernel shape or argument) while that variant's graphs are captured
SAME_ROUTE_OK = False
SHAPES = ("smollm2-135m", "llama3-8b")  # onecat.models.standard_shapes (llama-architecture: the model class here is Llama)


def build_generated(shape: str, weights: str, device: str, dtype: torch.dtype):
    """A Llama of a standard shape with generated weights: dense, or quantized in the layout the
    loader gives the CUDA route (kernels' PackedWeight, made on the GPU: valid planes, finite scales of
    realistic size; the CPU smoke run packs random GGUF blocks on the host)."""
    from onecat.kernels.bench import packed_gpu
    from onecat.kernels.weights import random_packed
    from onecat.models.llama import LlamaForCausalLM
    from onecat.models.loader import LoadedModel
    from onecat.models.standard_shapes import standard_shape

    spec = standard_shape(shape, name=f"{shape} (generated weights)")
    model = LlamaForCausalLM(spec, dtype, torch.device(device))
    g = torch.Generator(device=device).manual_seed(0)

    def quantized(n: int, k: int):
        return packed_gpu(n, k, weights, g) if device == "cuda" else random_packed(n, k, weights, g)

    def fill(t: torch.Tensor, std: float, mean: float = 0.0) -> None:
        t.copy_(torch.randn(t.shape, generator=g, device=device, dtype=torch.float32) * std + mean)

    fill(model.embed, 1.0)
    fill(model.norm, 0.0, 1.0)
    if not spec.tie_word_embeddings:
        fill(model.lm_head, 0.02)
    for layer in model.layers:
        fill(layer.input_norm, 0.0, 1.0)
        fill(layer.post_attn_norm, 0.0, 1.0)
        for name in ("qkv", "o_proj", "gate_up", "down"):
            w = getattr(layer, name)
            if weights == "fp16":
                fill(w, 0.02)
            else:
                setattr(layer, name, quantized(w.shape[0], w.shape[1]))
    if weights != "fp16" and not spec.tie_word_embeddings:
        model.lm_head = quantized(spec.vocab_size, spec.hidden_size)
    return LoadedModel(spec, model, None, "generated", weights)


def nvtx_ops(enabled: bool) -> None:
    """Wrap every op dispatch in an NVTX range named after the op and its admitted provider."""
    from onecat.kernels import ops, registry

    original = ops._dispatch

    def dispatch(op: str, *args):
        provider = registry.select(ops.problem(op, *args)).provider
        torch.cuda.nvtx.range_push(f"onecat.op.{op}.{provider.name}")
        try:
            return provider.fn(*args)
        finally:
            torch.cuda.nvtx.range_pop()

    if enabled:
        ops._dispatch = dispatch
    else:
        ops._dispatch = original


def split_steps(activities: list) -> list[list]:
    """Device activities (sorted by start) -> one list per decode step: a step ends with the copy
    of its sampled ids to the host (Memcpy DtoH)."""
    groups, cur = [], []
    for e in activities:
        cur.append(e)
        if e.name.startswith("Memcpy DtoH"):
            groups.append(cur)
            cur = []
    return groups + ([cur] if cur else [])


def busy_time(group: list) -> float:
    """Microseconds in which at least one of the (start-sorted) activities ran."""
    busy, end = 0.0, group[0].time_range.start
    for e in group:
        s0, e0 = max(e.time_range.start, end), e.time_range.end
        if e0 > s0:
            busy += e0 - s0
            end = e0
    return busy


def end_increments(group: list) -> dict[str, float]:
    """Per kernel name, the step's span charged by end times: each activity (in start order) is charged the
    time by which its end passes the latest end before it. With PDL the next kernel starts before the last
    one ends, so the summed durations overstate; these increments add up to the span (less the first
    start) and charge each kernel what it adds to the step's critical path."""
    out: dict[str, float] = {}
    last = group[0].time_range.start
    for e in group:
        end = e.time_range.end
        if end > last:
            out[e.name] = out.get(e.name, 0.0) + end - last
            last = end
    return out


def timeline(step, n: int) -> None:
    """Trace n decode steps (torch.profiler: real kernel start/end times, no replay): per-kernel
    table and, per step, the span from the first kernel's start to the last one's end against the
    time some kernel was running (the rest: launch gaps and host waits inside the step)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            step()
    kernels = sorted((e for e in prof.events() if e.device_type.name == "CUDA" and e.time_range.end > e.time_range.start),
                     key=lambda e: e.time_range.start)
    if not kernels:
        print("timeline: the profiler recorded no CUDA kernels")
        return
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        by_name.setdefault(e.name, []).append(e.time_range.end - e.time_range.start)
    total = sum(sum(v) for v in by_name.values())
    print(f"timeline over {n} decode steps: {len(kernels)} device activities ({len(kernels) / n:.0f} per step)")
    print(f"{'kernel':60s} {'n/step':>7s} {'us/step':>9s} {'mean us':>8s} {'share':>6s}")
    for name, ds in sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:25]:
        print(f"{name[:60]:60s} {len(ds) / n:7.1f} {sum(ds) / n:9.1f} {statistics.mean(ds):8.2f} {sum(ds) / total:6.1%}")
    groups = split_steps(kernels)
    for i, g in enumerate(groups[:n]):
        span = max(e.time_range.end for e in g) - g[0].time_range.start
        busy = busy_time(g)
        print(f"step {i}: {len(g)} activities, span {span:.1f} us (first input copy to the sampled ids' copy), "
              f"busy {busy:.1f} us, idle inside the step {span - busy:.1f} us ({(span - busy) / span:.0%})")
    incs: dict[str, float] = {}
    for g in groups[:n]:
        for name, v in end_increments(g).items():
            incs[name] = incs.get(name, 0.0) + v / min(n, len(groups))
    span = sum(incs.values())
    print(f"span per step charged by end increments (what each kernel adds past the latest earlier end; with "
          f"PDL this is the critical path's share): {span:.1f} us")
    for name, v in sorted(incs.items(), key=lambda kv: -kv[1])[:25]:
        print(f"  {name[:60]:60s} {v:9.1f} us {v / span:6.1%}")
    if len(groups) > 1:
        gaps = [groups[i + 1][0].time_range.start - groups[i][-1].time_range.end for i in range(len(groups) - 1)]
        print(f"device idle between steps (host turn, CUPTI tracing slows the host): median "
              f"{statistics.median(gaps):.1f} us")


def timed_steps(step, n: int, cuda: bool = True) -> list[float]:
    """n decode steps, each timed by CUDA events (us; the host clock without CUDA)."""
    times = []
    for _ in range(n):
        if not cuda:
            t = time.perf_counter()
            step()
            times.append((time.perf_counter() - t) * 1e6)
            continue
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        step()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)
    return times


def ab_variants(spec: str | None) -> list[list[str]]:
    """--ab-disable's lists (`;`-separated, each `op:provider,...`): one set of graphs B, C, ... each."""
    return [[n.strip() for n in v.split(",") if n.strip()] for v in (spec or "").split(";") if v.strip()]


def ab_rounds(runner, step, a) -> int:
    """The in-process A/B (--ab-disable): A = the route's graphs; B (C, ...) = graphs captured with each `;`-separated
    list of providers disabled."""
    from onecat.kernels import ops
    if runner.graphs is None:
        print(f"--ab-disable needs CUDA graphs ({runner.graph_status})", file=sys.stderr)
        return 2
    lists = ab_variants(a.ab_disable)
    labels = ["A"] + [chr(ord("B") + i) for i in range(len(lists))]
    routes = {"A": {r["problem"]: r["provider"] for r in runner.route_report()}}
    graphs, changed, base = {"A": runner.graphs}, {}, set(ops.registry.disabled)
    for v, names in zip(labels[1:], lists):
        ops.registry.configure(disabled=sorted(base | set(names)))
        graphs[v], status = runner._capture_graphs()
        routes[v] = {r["problem"]: r["provider"] for r in runner.route_report()}
        ops.registry.configure(disabled=sorted(base))
        if graphs[v] is None:
            print(f"{v}'s graphs: {status}", file=sys.stderr)
            return 2
        changed[v] = sorted(k for k in routes[v] if routes["A"].get(k) != routes[v][k])
        print(f"A: the route; {v}: disabled {names}; {v}'s selections that differ from A's: {len(changed[v])}")
        for k in changed[v]:
            print(f"  {k}: A {routes['A'].get(k, '(not asked)')} -> {v} {routes[v][k]}")
        if not changed[v] and not SAME_ROUTE_OK:
            print(f"{v} selects what A does: nothing to compare", file=sys.stderr)
            return 2
    steps: dict[str, list[list[float]]] = {v: [] for v in labels}
    for r in range(a.rounds):
        for v in labels:
            runner.graphs = graphs[v]
            steps[v].append(timed_steps(step, a.timed))
        print(f"round {r + 1}: " + ", ".join(f"{v} {statistics.median(steps[v][-1]):.1f} us" for v in labels)
              + f" (medians of {a.timed} steps)")
    runner.graphs = graphs["A"]
    med = {v: statistics.median(t for rnd in steps[v] for t in rnd) for v in steps}
    mins = {v: min(t for rnd in steps[v] for t in rnd) for v in steps}
    print(f"decode step, batch {a.batch}, context {a.context}+, KV {runner.kv_dtype}, CUDA graphs, CUDA events, "
          f"{a.rounds} x {a.timed} steps each: " + ", ".join(f"{v} median {med[v]:.1f} us (min {mins[v]:.1f})"
                                                             for v in labels)
          + "; " + ", ".join(f"A / {v} - 1 = {med['A'] / med[v] - 1:+.2%}" for v in labels[1:]))
    if a.steps_json:
        with open(a.steps_json, "w") as f:
            json.dump({"ab_disable": dict(zip(labels[1:], lists)), "rounds": steps, "median_step_us": med,
                       "batch": a.batch, "context": a.context, "model": a.model or f"{a.shape} generated {a.weights}",
                       "route_a": routes["A"], "changed": {v: {k: routes[v][k] for k in changed[v]} for v in changed},
                       "device": torch.cuda.get_device_name(0)}, f, indent=1)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a GGUF file (default: generated weights of --shape)")
    ap.add_argument("--shape", choices=SHAPES, default="llama3-8b")
    ap.add_argument("--weights", choices=["fp16", "q4_0", "q4_1", "q8_0", "q4_k", "q6_k", "awq"], default="q4_0")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--max-model-len", type=int, default=None,
                    help="the engine's max_model_len (default: the checkpoint's context length; the peers' runs "
                         "set the prompt + output + 16): the decode graphs' attention plans its split for it")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--timed", type=int, default=20)
    ap.add_argument("--profiled", type=int, default=2)
    ap.add_argument("--steps-json", default=None, help="write the timed steps and the route here")
    ap.add_argument("--timeline", type=int, default=0,
                    help="trace this many decode steps with torch.profiler (CUPTI; graph kernels included) and "
                         "print their kernel table and the idle gaps between kernels, without ncu")
    ap.add_argument("--ab-disable", default=None,
                    help="op:provider,...[;op:provider,...]: alternate the route's decode graphs with graphs captured "
                         "with these disabled (each ;-separated list: one more set of graphs)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="--ab-disable's rounds (each: --timed steps of A, then of each variant)")
    ap.add_argument("--device", default="cuda", help="cuda (profiling) or cpu (a smoke run of this script)")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--kv", default="auto", help="the paged cache's dtype (CacheConfig.dtype: auto, float16, "
                    "float8_e4m3fn, float8_e5m2, ...)")
    a = ap.parse_args(argv)
    cuda = a.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    dtype = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}[a.dtype]
    from onecat.serve.config import CacheConfig, EngineConfig, ModelConfig, SchedulerConfig
    from onecat.serve.kv_cache_manager import KVCacheManager
    from onecat.serve.model_runner import ModelRunner
    from onecat.serve.request import Request
    from onecat.serve.sampling_params import SamplingParams
    from onecat.serve.scheduler import Scheduler

    total = a.warmup + a.timed * ((1 + len(ab_variants(a.ab_disable))) * a.rounds if a.ab_disable else 1) \
        + a.timeline + a.profiled + 2
    blocks = a.batch * (-(-(a.context + total) // 16) + 1) + 8
    cfg = EngineConfig(model=ModelConfig(path=a.model, device=a.device, dtype=a.dtype, max_model_len=a.max_model_len),
                       cache=CacheConfig(num_blocks=blocks, enable_prefix_caching=False, dtype=a.kv),
                       scheduler=SchedulerConfig(max_num_seqs=max(a.batch, 1),
                                                 max_num_batched_tokens=max(2048, a.batch * a.context)))
    loaded = None if a.model else build_generated(a.shape, a.weights, a.device, dtype)
    runner = ModelRunner(cfg, loaded=loaded, progress=False)
    kv = KVCacheManager(runner.num_blocks, runner.block_size, False)
    sched = Scheduler(cfg.scheduler, kv, runner.max_model_len)
    g = torch.Generator().manual_seed(0)
    params = SamplingParams(temperature=0, max_tokens=total, ignore_eos=True)
    for i in range(a.batch):
        prompt = torch.randint(0, runner.spec.vocab_size, (a.context,), generator=g).tolist()
        sched.add(Request(str(i), prompt, params, total))

    def step() -> bool:
        out = sched.schedule()
        sampled = runner.execute(out)
        sched.update_from_output(out, sampled)
        return all(len(s.token_ids) == 1 for s in out.scheduled)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    while not step():  # prefill (possibly chunked)
        pass
    for _ in range(a.warmup):
        step()
    sync()
    if a.ab_disable:
        return ab_rounds(runner, step, a)
    times = timed_steps(step, a.timed, cuda)
    med = statistics.median(times)
    print(f"decode step, batch {a.batch}, context {a.context}, KV {runner.kv_dtype}: median {med:.1f} us "
          f"(min {min(times):.1f}, max {max(times):.1f}) over {len(times)} steps, "
          f"{'CUDA events' if cuda else 'host clock'}, not profiled")
    if cuda and a.timeline:
        timeline(step, a.timeline)
    route = {r["problem"]: r["provider"] for r in runner.route_report()}
    if a.steps_json:
        with open(a.steps_json, "w") as f:
            json.dump({"step_us": times, "median_step_us": med, "batch": a.batch, "context": a.context,
                       "model": a.model or f"{a.shape} generated {a.weights}", "route": route,
                       "device": torch.cuda.get_device_name(0) if cuda else "cpu"}, f, indent=1)
    if not cuda:
        for _ in range(a.profiled):
            step()
        return 0
    nvtx_ops(True)
    torch.cuda.synchronize()
    with contextlib.suppress(Exception):
        torch.cuda.cudart().cudaProfilerStart()
    for i in range(a.profiled):
        torch.cuda.nvtx.range_push(f"onecat.step.decode.{i}")
        step()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    with contextlib.suppress(Exception):
        torch.cuda.cudart().cudaProfilerStop()
    nvtx_ops(False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
