"""The engine's CUDA route against its CPU reference route, on a SmolLM2- or llama3-8b-shaped
Llama with generated weights (the real GGUF is too large to carry to the GPU machine).

Runs the real Scheduler + KVCacheManager + ModelRunner (no tokenizer: token ids in, token ids
out) for a few greedy requests on CUDA/float16 with whatever kernels the registry admits, then
scores the same sequences on the CPU/float32 reference route and checks that every generated
token equals the reference argmax wherever the reference's top-2 gap exceeds 0.5. The CUDA run
is made twice, eagerly and with decode CUDA graphs: their greedy tokens must be identical. Prints
the decode step times of both and the admitted route last.

    python3 tools/gpu/engine_check.py [--shape smollm2-135m|llama3-8b] [--weights q4_0|q4_k|q6_k|awq] [--layers 2] [--prompts 32]

--weights q4_0 / q4_k / q6_k / awq: the four projections of every layer as generated PackedWeights of
that format (q4_k_m: Q4_K_M's mix: every qkv a RowParts of q4_k [q | k] and q6_k v, down q6_k in even layers,
the rest q4_k) (the GPU route's packed GEMV / GEMM kernels, the register-direct ones at 3..64 decode rows
on sm_80+; the CPU route holds the same planes' float32 decode), embedding and LM head dense. --prompts N:
N concurrent requests (the decode batch); --layers L: the shape with L layers (the CPU float32 scoring
of an 8B-wide model).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import torch

from onecat.models.llama import LlamaForCausalLM
from onecat.models.loader import LoadedModel
from onecat.models.standard_shapes import standard_shape
from onecat.serve.config import CacheConfig, EngineConfig, ModelConfig
from onecat.serve.greedy_ids import greedy_ids
from onecat.serve.model_runner import ModelRunner

SPECS = {name: standard_shape(name, name=f"{name}-shape (generated weights)") for name in ("smollm2-135m", "llama3-8b")}
SPEC = SPECS["smollm2-135m"]
GAP = 0.5


def build(device: str, dtype: torch.dtype) -> LoadedModel:
    """Weights drawn on the GPU when there is one (fast for 8B), the same values on every route."""
    gen_dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(gen_dev).manual_seed(0)
    model = LlamaForCausalLM(SPEC, dtype, torch.device(device))
    for name in sorted(model.expected_weights()):
        shape = _shape(name)
        # embedding and (untied) LM head at std 1: logits spread by ~sqrt(H), so most positions have
        # a top-2 gap over GAP (at 0.5/sqrt(H) the 8B shape's 128256 logits sat within ~0.1 of each other)
        std = 1.0 if ("embed" in name or "lm_head" in name) else (0.0 if "norm" in name else 0.5 / SPEC.hidden_size ** 0.5)
        t = torch.randn(shape, generator=g, device=gen_dev) * std + (1.0 if "norm" in name else 0.0)
        model.load_weight(name, t.to(device=device, dtype=dtype))
        del t
    return LoadedModel(SPEC, model, None, "generated", "dense")


def build_packed(kind: str, gpu: str = "cuda") -> tuple[LoadedModel, LoadedModel]:
    """(`gpu` float16, CPU float32) models sharing values: norms / embedding / LM head as build()
    draws them, the projections as one set of generated `kind` PackedWeights (made on the GPU, the
    CPU model holding their float32 decode, `dequantize`; gpu="cpu" draws them on the CPU: a host-only
    check)."""
    from onecat.kernels.bench import packed_gpu
    from onecat.kernels.weights import RowParts, random_packed

    g = torch.Generator(gpu).manual_seed(0)
    # block scales for build()'s projection spread, 0.5 / sqrt(H): q4_0 weights d (q - 8) with |d| uniform
    # in [scale / 4, 1.25 scale] have an RMS of 3.73 scale. At GGUFWeight.random's default (0.02: RMS 0.075,
    # 9x build()'s at H = 4096) two llama3-8b layers pushed the logits to ~280 where the FP16 route and
    # the FP32 reference parted at four clear positions (H200, s12), with and without the register-direct
    # GEMM alike: the size of the values, not a kernel.
    # weight RMS per unit of packed_gpu's `scale`: q4_0 3.73; awq 0.85 (|q - z| RMS 6.52, s ~ 0.13 scale);
    # q6_k 18.0 (d ~ 0.0132 scale RMS, sc RMS 73.9, q - 32 RMS 18.5); q4_k 5.13 (its rows near zero-mean)
    rms = {"q4_0": 3.73, "q4_k": 5.13, "awq": 0.85, "q6_k": 18.0}

    def packed(n: int, k: int, fmt: str):
        scale = 0.5 / SPEC.hidden_size ** 0.5 / rms[fmt]
        return packed_gpu(n, k, fmt, g, scale) if gpu == "cuda" else random_packed(n, k, fmt, g, scale=scale)

    # dense buffers first (embedding, norms, LM head keep them), the projections replaced below
    fast = LlamaForCausalLM(SPEC, torch.float16, torch.device(gpu))
    ref = LlamaForCausalLM(SPEC, torch.float32, torch.device("cpu"))
    dense = build("cpu", torch.float32).model
    for model in (fast, ref):
        for attr in ("embed", "norm") + (() if SPEC.tie_word_embeddings else ("lm_head",)):
            getattr(model, attr).copy_(getattr(dense, attr))
        for layer, dl in zip(model.layers, dense.layers):
            layer.input_norm.copy_(dl.input_norm)
            layer.post_attn_norm.copy_(dl.post_attn_norm)
    for i, (layer, ref_layer) in enumerate(zip(fast.layers, ref.layers)):
        for name in LlamaForCausalLM.MATRICES:
            n, k = getattr(dense.layers[i], name).shape
            if kind != "q4_k_m":
                w = packed(n, k, kind)
            elif name == "qkv":  # Q4_K_M's mixed layers: [q | k] q4_k, v q6_k (one weights.RowParts)
                w = RowParts((packed(SPEC.q_size + SPEC.kv_size, k, "q4_k"), packed(SPEC.kv_size, k, "q6_k")))
            else:  # down q6_k in even layers, q4_k in odd ones: both joined to the next (mixed) qkv
                w = packed(n, k, "q6_k" if name == "down" and i % 2 == 0 else "q4_k")
            setattr(layer, name, w)
            # the CPU route's float32 weights, decoded once: the reference decodes a PackedWeight on every
            # call (its linear), which made the 32-request scoring outrun the check's limit (s19 call 7)
            setattr(ref_layer, name, w.to("cpu").dequantize(torch.float32))
    del dense
    return (LoadedModel(SPEC, fast, None, "generated", kind), LoadedModel(SPEC, ref, None, "generated", kind))


def _shape(name: str) -> tuple[int, ...]:
    s, H = SPEC, SPEC.hidden_size
    table = {"model.embed_tokens.weight": (s.vocab_size, H), "model.norm.weight": (H,),
             "input_layernorm.weight": (H,), "post_attention_layernorm.weight": (H,),
             "self_attn.q_proj.weight": (s.q_size, H), "self_attn.k_proj.weight": (s.kv_size, H),
             "self_attn.v_proj.weight": (s.kv_size, H), "self_attn.o_proj.weight": (H, s.q_size),
             "mlp.gate_proj.weight": (s.intermediate_size, H), "mlp.up_proj.weight": (s.intermediate_size, H),
             "mlp.down_proj.weight": (H, s.intermediate_size), "lm_head.weight": (s.vocab_size, H)}
    return table.get(name) or table[name.split(".", 3)[3]]


def main() -> int:
    global SPEC
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=sorted(SPECS), default="smollm2-135m")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--weights", choices=("dense", "q4_0", "q4_k", "q6_k", "awq", "q4_k_m"), default="dense")
    ap.add_argument("--layers", type=int, default=0, help="override the shape's layer count")
    ap.add_argument("--prompts", type=int, default=4, help="concurrent requests (prompt lengths cycle 7, 33, 130, 300)")
    ap.add_argument("--kv", default="auto", help="the paged cache's dtype (CacheConfig.dtype; the CPU reference keeps "
                    "the same cache dtype)")
    args = ap.parse_args()
    SPEC = SPECS[args.shape] if not args.layers else replace(SPECS[args.shape], num_layers=args.layers,
                                                                  layer_types=(), layer_sliding_window=())
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 2
    g = torch.Generator().manual_seed(1)
    lens = [(7, 33, 130, 300)[i % 4] + i // 4 for i in range(args.prompts)]
    prompts = [torch.randint(0, SPEC.vocab_size, (n,), generator=g).tolist() for n in lens]
    loaded, cpu_loaded = build_packed(args.weights) if args.weights != "dense" else (build("cuda", torch.float16), None)
    runs = {}
    for mode, eager in (("eager", True), ("graphs", False)):
        cfg = EngineConfig(model=ModelConfig(device="cuda", enforce_eager=eager),
                           cache=CacheConfig(num_blocks=256, dtype=args.kv))
        runner = ModelRunner(cfg, loaded=loaded)
        print(f"{mode}: {runner.graph_status}")
        runs[mode] = greedy_ids(runner, prompts, args.max_tokens) + (runner,)
        one = greedy_ids(runner, prompts[:1], 64)[1]  # batch-1 decode steps
        one.sort()
        runs[mode] += (one,)
    outs, gpu = runs["graphs"][0], runs["graphs"][2]
    same = outs == runs["eager"][0]
    for mode, (_, steps, _, one) in runs.items():
        steps = sorted(steps)
        print(f"{mode}: decode step batch {len(prompts)} median {1e3 * steps[len(steps) // 2]:.3f} ms, batch 1 median "
              f"{1e3 * one[len(one) // 2]:.3f} ms (min {1e3 * one[0]:.3f}) -- host-timed smoke figures, "
              f"scheduler not included, not a benchmark")
    del runs, loaded
    torch.cuda.empty_cache()
    cpu = ModelRunner(EngineConfig(model=ModelConfig(device="cpu"), cache=CacheConfig(num_blocks=4, dtype=args.kv)),
                      loaded=cpu_loaded or build("cpu", torch.float32))
    checked = mismatched = 0
    for i, (p, o) in enumerate(zip(prompts, outs)):  # teacher-forced on the GPU's tokens: every position scores
        logits = cpu.score(p + o, first=len(p) - 1)[:len(o)]
        top2 = logits.topk(2, dim=-1)
        clear = (top2.values[:, 0] - top2.values[:, 1]) > GAP
        agree = top2.indices[:, 0] == torch.tensor(o)
        checked += int(clear.sum())
        mismatched += int((clear & ~agree).sum())
        for j in (clear & ~agree).nonzero().flatten().tolist():
            top, got = top2.values[j, 0].item(), logits[j, o[j]].item()
            print(f"  mismatch: request {i} (prompt {len(p)}) token {j}: reference top-2 gap "
                  f"{top - top2.values[j, 1].item():.3f}, the GPU's token {top - got:.3f} below the top "
                  f"(logit scale {logits[j].abs().max().item():.1f})")
    print(f"shape {args.shape} ({SPEC.num_layers} layers, {args.weights} projections, {len(prompts)} requests, "
          f"KV cache {args.kv}): "
          f"greedy tokens (CUDA graphs) vs CPU float32 reference: {checked} clear positions "
          f"checked, {mismatched} mismatched")
    print(f"greedy tokens with CUDA graphs == eager: {same}")
    print("admitted route on", torch.cuda.get_device_name(0))
    for row in gpu.route_report():
        print(f"  {row['problem']} -> {row['provider']}")
    return 0 if mismatched == 0 and checked > 0 and same else 1


if __name__ == "__main__":
    sys.exit(main())
