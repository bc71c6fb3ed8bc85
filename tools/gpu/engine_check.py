"""The engine's CUDA route against its CPU reference route, on a SmolLM2-shaped Llama with
generated weights (the real GGUF is too large to carry to the GPU machine).

Runs the real Scheduler + KVCacheManager + ModelRunner (no tokenizer: token ids in, token ids
out) for a few greedy requests on CUDA/float16 with whatever kernels the registry admits, then
scores the same sequences on the CPU/float32 reference route and checks that every generated
token equals the reference argmax wherever the reference's top-2 gap exceeds 0.5. Prints the
admitted route last.

    python3 tools/gpu/engine_check.py
"""

from __future__ import annotations

import sys
import time

import torch

from onecat.models.llama import LlamaForCausalLM
from onecat.models.loader import LoadedModel
from onecat.models.spec import ModelSpec
from onecat.serve.config import CacheConfig, EngineConfig, ModelConfig
from onecat.serve.kv_cache_manager import KVCacheManager
from onecat.serve.model_runner import ModelRunner
from onecat.serve.request import Request, RequestStatus
from onecat.serve.sampling_params import SamplingParams
from onecat.serve.scheduler import Scheduler

SPEC = ModelSpec(architecture="llama", name="smollm2-135m-shape (generated weights)", num_layers=30,
                 hidden_size=576, intermediate_size=1536, num_heads=9, num_kv_heads=3, head_dim=64,
                 vocab_size=49152, max_position=8192, rope_theta=100000.0, rope_interleaved=True,
                 tie_word_embeddings=True)
GAP = 0.5


def build(device: str, dtype: torch.dtype) -> LoadedModel:
    g = torch.Generator().manual_seed(0)
    model = LlamaForCausalLM(SPEC, dtype, torch.device(device))
    for name in sorted(model.expected_weights()):
        shape = _shape(name)
        std = 1.0 if "embed" in name else (0.0 if "norm" in name else 0.04)
        t = torch.randn(shape, generator=g) * std + (1.0 if "norm" in name else 0.0)
        model.load_weight(name, t.to(device=device, dtype=dtype))
    return LoadedModel(SPEC, model, None, "generated", "dense")


def _shape(name: str) -> tuple[int, ...]:
    s, H = SPEC, SPEC.hidden_size
    table = {"model.embed_tokens.weight": (s.vocab_size, H), "model.norm.weight": (H,),
             "input_layernorm.weight": (H,), "post_attention_layernorm.weight": (H,),
             "self_attn.q_proj.weight": (s.q_size, H), "self_attn.k_proj.weight": (s.kv_size, H),
             "self_attn.v_proj.weight": (s.kv_size, H), "self_attn.o_proj.weight": (H, s.q_size),
             "mlp.gate_proj.weight": (s.intermediate_size, H), "mlp.up_proj.weight": (s.intermediate_size, H),
             "mlp.down_proj.weight": (H, s.intermediate_size)}
    return table.get(name) or table[name.split(".", 3)[3]]


def generate(runner: ModelRunner, prompts: list[list[int]], max_tokens: int) -> tuple[list[list[int]], list[float]]:
    kv = KVCacheManager(runner.num_blocks, runner.block_size)
    sched = Scheduler(runner.config.scheduler, kv, runner.max_model_len)
    reqs = [Request(str(i), p, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True), max_tokens)
            for i, p in enumerate(prompts)]
    for r in reqs:
        sched.add(r)
    step_times = []
    while sched.has_unfinished():
        out = sched.schedule()
        torch.cuda.synchronize()
        t = time.perf_counter()
        sampled = runner.execute(out)
        torch.cuda.synchronize()
        if all(len(s.token_ids) == 1 for s in out.scheduled):
            step_times.append(time.perf_counter() - t)
        sched.update_from_output(out, sampled)
    assert all(r.status == RequestStatus.FINISHED_LENGTH for r in reqs)
    assert kv.num_free_blocks == kv.num_blocks
    return [r.output_token_ids for r in reqs], step_times


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 2
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, SPEC.vocab_size, (n,), generator=g).tolist() for n in (7, 33, 130, 300)]
    cfg = EngineConfig(model=ModelConfig(device="cuda"), cache=CacheConfig(num_blocks=256))
    gpu = ModelRunner(cfg, loaded=build("cuda", torch.float16))
    outs, steps = generate(gpu, prompts, 32)
    cpu = ModelRunner(EngineConfig(model=ModelConfig(device="cpu"), cache=CacheConfig(num_blocks=4)),
                      loaded=build("cpu", torch.float32))
    checked = mismatched = 0
    for p, o in zip(prompts, outs):
        logits = cpu.score(p + o)[len(p) - 1: len(p) - 1 + len(o)]
        top2 = logits.topk(2, dim=-1)
        clear = (top2.values[:, 0] - top2.values[:, 1]) > GAP
        agree = top2.indices[:, 0] == torch.tensor(o)
        checked += int(clear.sum())
        mismatched += int((clear & ~agree).sum())
        if (clear & ~agree).any():
            break  # after a clear mismatch the sequences legitimately part
    steps.sort()
    print(f"greedy tokens vs CPU float32 reference: {checked} clear positions checked, {mismatched} mismatched")
    print(f"decode step (batch <= 4, eager, reference attention) median {steps[len(steps) // 2] * 1e3:.2f} ms "
          f"(a smoke figure, not a benchmark)")
    print("admitted route on", torch.cuda.get_device_name(0))
    for row in gpu.route_report():
        print(f"  {row['problem']} -> {row['provider']}")
    return 0 if mismatched == 0 and checked > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
