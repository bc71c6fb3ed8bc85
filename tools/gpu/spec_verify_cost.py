"""What a speculative verify step costs next to a plain decode step, for the llama3-8b shape with
generated FP16 weights on one GPU (the verify cost bounds the speedup speculative decoding can give).

Runs the real ModelRunner (forward, logits, sampling; for verify steps the greedy verifier too)
on sequences whose first `--context` tokens are already in the paged KV cache, and times with
CUDA events: a decode step (each sequence feeds 1 token) and a verify step (each feeds its last
token + q drafted tokens, scored at q + 1 positions), for batch 1 and 8 and q = 8 and 16.
Median/min/max over `--steps` timed steps after `--warmup` untimed ones. Decode steps replay
the runner's CUDA graphs when it captured them (verify steps are eager); `--eager` compares
eager with eager. Weight values do not
change the time of a dense model (acceptance, which does depend on them, is not measured here).

    python3 tools/gpu/spec_verify_cost.py            # llama3-8b shape, CUDA, FP16
    python3 tools/gpu/spec_verify_cost.py --tiny     # a tiny shape (CPU works): checks the script runs

Prints a table last; writes spec_verify_cost.json to $OUT (or the current directory).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from onecat.models.llama import LlamaForCausalLM
from onecat.models.loader import LoadedModel
from onecat.models.spec import ModelSpec
from onecat.models.standard_shapes import standard_shape
from onecat.serve.config import CacheConfig, EngineConfig, ModelConfig, SchedulerConfig
from onecat.serve.model_runner import ModelRunner
from onecat.serve.request import Request
from onecat.serve.sampling_params import SamplingParams
from onecat.serve.scheduler import ScheduledRequest, SchedulerOutput

LLAMA3_8B = standard_shape("llama3-8b", name="llama3-8b shape (generated FP16 weights)")
TINY = ModelSpec(architecture="llama", name="tiny llama (generated weights)", num_layers=2, hidden_size=128,
                 intermediate_size=256, num_heads=4, num_kv_heads=2, head_dim=32, vocab_size=1000,
                 max_position=4096, rope_theta=10000.0)


def build(spec: ModelSpec, device: torch.device, dtype: torch.dtype) -> LoadedModel:
    """Every weight generated on the device: N(0, 0.02) linears and embedding, norms at 1."""
    g = torch.Generator(device=device).manual_seed(0)
    model = LlamaForCausalLM(spec, dtype, device)
    H, I = spec.hidden_size, spec.intermediate_size
    shapes = {"model.embed_tokens.weight": (spec.vocab_size, H), "lm_head.weight": (spec.vocab_size, H),
              "model.norm.weight": (H,), "input_layernorm.weight": (H,), "post_attention_layernorm.weight": (H,),
              "self_attn.q_proj.weight": (spec.q_size, H), "self_attn.k_proj.weight": (spec.kv_size, H),
              "self_attn.v_proj.weight": (spec.kv_size, H), "self_attn.o_proj.weight": (H, spec.q_size),
              "mlp.gate_proj.weight": (I, H), "mlp.up_proj.weight": (I, H), "mlp.down_proj.weight": (H, I)}
    for name in sorted(model.expected_weights()):
        shape = shapes.get(name) or shapes[name.split(".", 3)[3]]
        if "norm" in name:
            t = torch.ones(shape, dtype=dtype, device=device)
        else:
            t = (torch.randn(shape, generator=g, device=device, dtype=torch.float32) * 0.02).to(dtype)
        model.load_weight(name, t)
    if hasattr(model, "finish_loading"):
        model.finish_loading()
    return LoadedModel(spec, model, None, "generated", str(dtype).removeprefix("torch."))


class Timer:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __call__(self, fn) -> float:
        """Milliseconds for one call of fn."""
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="a tiny shape and few steps (runs on CPU): a smoke check")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--qs", default="8,16", help="drafted tokens scored per verify step")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--eager", action="store_true", help="no decode CUDA graphs (verify steps are always eager)")
    a = ap.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda" and not a.tiny:
        print("no CUDA device: run with --tiny for a CPU smoke check")
        return 2
    spec = TINY if a.tiny else LLAMA3_8B
    dtype = torch.float32 if device.type == "cpu" else torch.float16
    if a.tiny:
        a.context, a.steps, a.warmup = min(a.context, 64), min(a.steps, 20), min(a.warmup, 2)
    batches = [int(x) for x in a.batches.split(",")]
    qs = [int(x) for x in a.qs.split(",")]
    block = 16
    per_seq = -(-(a.context + max(qs) + 1) // block)
    model_cfg = ModelConfig(device=str(device), dtype=str(dtype).removeprefix("torch."))
    if a.eager and hasattr(model_cfg, "enforce_eager"):
        model_cfg.enforce_eager = True
    cfg = EngineConfig(model=model_cfg,
                       cache=CacheConfig(block_size=block, num_blocks=per_seq * max(batches)),
                       scheduler=SchedulerConfig(max_num_seqs=max(batches), max_num_batched_tokens=a.context * 8))
    t0 = time.perf_counter()
    runner = ModelRunner(cfg, loaded=build(spec, device, dtype), progress=False)
    print(f"built {spec.name} on {device} in {time.perf_counter() - t0:.1f} s", flush=True)

    g = torch.Generator().manual_seed(1)
    seqs = []
    for b in range(max(batches)):  # prefill each sequence's context into its own blocks
        ids = torch.randint(0, spec.vocab_size, (a.context + max(qs) + 1,), generator=g).tolist()
        req = Request(f"s{b}", ids[:a.context + 1], SamplingParams(temperature=0, ignore_eos=True), 1 << 20)
        blocks = list(range(b * per_seq, (b + 1) * per_seq))
        runner.execute(SchedulerOutput([ScheduledRequest(req, ids[:a.context], 0, blocks, sample=False)]))
        seqs.append((req, blocks, ids))
    timer = Timer(device)

    def step(batch: int, q: int) -> SchedulerOutput:
        """Each sequence feeds its token at position `context` (+ q drafted tokens after it)."""
        return SchedulerOutput([ScheduledRequest(req, [ids[a.context]], a.context, blocks, sample=True,
                                                 draft_token_ids=ids[a.context + 1:a.context + 1 + q])
                                for req, blocks, ids in seqs[:batch]])

    rows = []
    for batch in batches:
        base_ms = None
        for q in [0] + qs:
            out = step(batch, q)
            for _ in range(a.warmup):
                runner.execute(out)
            ms = [timer(lambda: runner.execute(out)) for _ in range(a.steps)]
            med = statistics.median(ms)
            base_ms = med if q == 0 else base_ms
            rows.append({"batch": batch, "q": q, "phase": "decode" if q == 0 else "verify",
                         "tokens_per_seq": q + 1, "median_ms": med, "min_ms": min(ms), "max_ms": max(ms),
                         "steps": len(ms), "relative_to_decode": med / base_ms})
            print(f"batch {batch} q {q:2}: median {med:.3f} ms", flush=True)

    result = {"shape": spec.name, "spec": {k: getattr(spec, k) for k in ("num_layers", "hidden_size",
              "intermediate_size", "num_heads", "num_kv_heads", "head_dim", "vocab_size")},
              "dtype": str(dtype), "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "context": a.context, "warmup": a.warmup, "timer": "cuda events"
              if device.type == "cuda" else "perf_counter",
              "measured": "ModelRunner.execute: forward + logits + sampling (verify: greedy verifier)",
              "decode_mode": getattr(runner, "graph_status", "eager"), "verify_mode": "eager",
              "route": sorted({(r["op"], r["provider"]) for r in runner.route_report()}), "rows": rows}
    out_dir = os.environ.get("OUT") or "."
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "spec_verify_cost.json")
    with open(path, "w") as fh:
        json.dump(result, fh, indent=2)
    print(f"\nwrote {path}; route: " + ", ".join(f"{op}={p}" for op, p in result["route"]))
    print(f"{spec.name}, context {a.context}, {result['device']}, {result['timer']}, "
          f"{a.steps} steps after {a.warmup} warm-up; decode: {result['decode_mode']}; verify: eager")
    print(f"{'batch':>5} {'phase':>7} {'q':>3} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x decode':>9}")
    for r in rows:
        print(f"{r['batch']:5} {r['phase']:>7} {r['q']:3} {r['median_ms']:10.3f} {r['min_ms']:8.3f} {r['max_ms']:8.3f} "
              f"{r['relative_to_decode']:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
