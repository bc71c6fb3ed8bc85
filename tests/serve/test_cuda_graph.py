"""Decode CUDA graphs: bucket rules (CPU) and, on a GPU, greedy tokens identical with graphs on
and off for ragged batches on a small generated Llama (the real GGUF is CPU-tested elsewhere)."""

from __future__ import annotations

import pytest
import torch

from onecat.kernels.attention_metadata import batch_bucket
from onecat.models.llama import LlamaForCausalLM
from onecat.models.loader import LoadedModel
from onecat.models.spec import ModelSpec
from onecat.serve.config import CacheConfig, EngineConfig, ModelConfig, SchedulerConfig
from onecat.serve.cuda_graph import batch_buckets
from onecat.serve.greedy_ids import greedy_ids
from onecat.serve.model_runner import ModelRunner


def test_buckets_cover_every_batch_with_its_planning_bucket():
    assert [batch_bucket(n) for n in (1, 2, 3, 5, 8, 9, 16, 17, 64, 65)] == [1, 2, 4, 8, 8, 16, 16, 24, 64, 72]
    for max_batch in (1, 3, 8, 20, 64, 100):
        buckets = batch_buckets(max_batch)
        assert buckets == sorted(set(buckets)) and buckets[-1] >= max_batch
        assert all(batch_bucket(n) in buckets for n in range(1, max_batch + 1))


def test_cpu_runner_stays_eager_and_says_why():
    spec = _spec()
    runner = ModelRunner(EngineConfig(model=ModelConfig(device="cpu"), cache=CacheConfig(num_blocks=8)),
                         loaded=_model(spec, "cpu", torch.float32))
    assert runner.graphs is None and runner.graph_status == "eager: not a CUDA device"


def _spec(head_dim: int = 64) -> ModelSpec:
    return ModelSpec(architecture="llama", name="tiny-llama (generated)", num_layers=2, hidden_size=4 * head_dim,
                     intermediate_size=512, num_heads=4, num_kv_heads=2, head_dim=head_dim, vocab_size=512,
                     max_position=1024, rope_theta=10000.0, rope_interleaved=False, tie_word_embeddings=True)


def _model(spec: ModelSpec, device: str, dtype: torch.dtype) -> LoadedModel:
    g = torch.Generator().manual_seed(0)
    model = LlamaForCausalLM(spec, dtype, torch.device(device))
    H = spec.hidden_size
    shapes = {"embed_tokens": (spec.vocab_size, H), "q_proj": (spec.q_size, H), "k_proj": (spec.kv_size, H),
              "v_proj": (spec.kv_size, H), "o_proj": (H, spec.q_size), "gate_proj": (spec.intermediate_size, H),
              "up_proj": (spec.intermediate_size, H), "down_proj": (H, spec.intermediate_size)}
    for name in sorted(model.expected_weights()):
        if "norm" in name:
            t = torch.ones(H)
        else:
            shape = next(v for k, v in shapes.items() if k in name)
            t = torch.randn(shape, generator=g) * (1.0 if "embed" in name else 0.5 / H ** 0.5)
        model.load_weight(name, t.to(device=device, dtype=dtype))
    return LoadedModel(spec, model, None, "generated", "dense")


def _greedy(runner: ModelRunner, prompts: list[list[int]], max_tokens: int) -> list[list[int]]:
    return greedy_ids(runner, prompts, max_tokens)[0]


@pytest.mark.gpu
def test_graphs_change_no_greedy_token():
    spec = _spec()
    loaded = _model(spec, "cuda", torch.float16)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, spec.vocab_size, (n,), generator=g).tolist() for n in (1, 5, 17, 40, 3, 90, 7)]
    outs = {}
    for eager in (True, False):
        cfg = EngineConfig(model=ModelConfig(device="cuda", enforce_eager=eager), cache=CacheConfig(num_blocks=64),
                           scheduler=SchedulerConfig(max_num_seqs=8))
        runner = ModelRunner(cfg, loaded=loaded)
        assert (runner.graphs is None) == eager, runner.graph_status
        outs[eager] = _greedy(runner, prompts, 24)
        if not eager:
            assert runner.graphs.buckets == [1, 2, 4, 8]
    assert outs[True] == outs[False]


@pytest.mark.gpu
def test_graphs_change_no_seeded_sample():
    """Sampled rows go through the `sample` op on CUDA, keyed by (seed, step): graphs on and off
    draw the same tokens, and the draws are not all the argmax."""
    from onecat.serve.sampling_params import SamplingParams

    spec = _spec()
    loaded = _model(spec, "cuda", torch.float16)
    prompts = [[5, 9, 2], list(range(1, 30)), [7] * 11]
    params = SamplingParams(temperature=50.0, top_k=50, top_p=0.95, seed=123, max_tokens=16,  # its logits span ~1e3
                            ignore_eos=True)
    outs = {}
    for eager in (True, False):
        cfg = EngineConfig(model=ModelConfig(device="cuda", enforce_eager=eager), cache=CacheConfig(num_blocks=64),
                           scheduler=SchedulerConfig(max_num_seqs=4))
        outs[eager] = greedy_ids(ModelRunner(cfg, loaded=loaded), prompts, 16, params)[0]
    assert outs[True] == outs[False]
    assert outs[True] != _greedy(ModelRunner(cfg, loaded=loaded), prompts, 16)


@pytest.mark.gpu
def test_capture_refused_where_decode_attention_falls_back_to_the_reference():
    spec = _spec(head_dim=32)  # no CUDA decode kernel for head dim 32: the torch reference loops on the host
    cfg = EngineConfig(model=ModelConfig(device="cuda"), cache=CacheConfig(num_blocks=16),
                       scheduler=SchedulerConfig(max_num_seqs=2))
    runner = ModelRunner(cfg, loaded=_model(spec, "cuda", torch.float16))
    assert runner.graphs is None
    assert runner.graph_status.startswith("eager: ") and "paged_attention" in runner.graph_status
    assert _greedy(runner, [[1, 2, 3]], 4)  # and the eager route still serves
