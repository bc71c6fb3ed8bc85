"""DraftModelProposer's KV bookkeeping, on a small generated-weight Llama run by the real
ModelRunner and KVCacheManager: after any pattern of accepted and rejected drafts, a drafter with
history proposes exactly what a fresh drafter proposes from the same tokens (its rolled-back KV
holds nothing stale), and its blocks all return on release."""

from __future__ import annotations

import random

import pytest
import torch

from onecat.models.llama import LlamaForCausalLM
from onecat.models.loader import LoadedModel
from onecat.models.spec import ModelSpec
from onecat.serve.config import CacheConfig, EngineConfig
from onecat.serve.kv_cache_manager import KVCacheManager
from onecat.serve.model_runner import ModelRunner
from onecat.spec import ProposeRequest
from onecat.spec.draft import DraftModelProposer, common_prefix_len, truncated_model

SPEC = ModelSpec(architecture="llama", name="small generated llama", num_layers=3, hidden_size=64,
                 intermediate_size=128, num_heads=4, num_kv_heads=2, head_dim=16, vocab_size=50,
                 max_position=512, tie_word_embeddings=True)


@pytest.fixture(scope="module")
def small() -> LoadedModel:
    g = torch.Generator().manual_seed(0)
    model = LlamaForCausalLM(SPEC, torch.float32, torch.device("cpu"))
    H, I, q, kv = SPEC.hidden_size, SPEC.intermediate_size, SPEC.q_size, SPEC.kv_size
    shapes = {"model.embed_tokens.weight": (SPEC.vocab_size, H), "model.norm.weight": (H,),
              "input_layernorm.weight": (H,), "post_attention_layernorm.weight": (H,),
              "self_attn.q_proj.weight": (q, H), "self_attn.k_proj.weight": (kv, H), "self_attn.v_proj.weight": (kv, H),
              "self_attn.o_proj.weight": (H, q), "mlp.gate_proj.weight": (I, H), "mlp.up_proj.weight": (I, H),
              "mlp.down_proj.weight": (H, I)}
    for name in sorted(model.expected_weights()):
        shape = shapes.get(name) or shapes[name.split(".", 3)[3]]
        model.load_weight(name, torch.ones(shape) if "norm" in name else torch.randn(shape, generator=g) * 0.5)
    if hasattr(model, "finish_loading"):
        model.finish_loading()
    return LoadedModel(SPEC, model, None, "generated", "float32")


def drafter(loaded: LoadedModel, k: int = 4, prefix_caching: bool = True) -> DraftModelProposer:
    runner = ModelRunner(EngineConfig(cache=CacheConfig(block_size=4, num_blocks=64)), loaded=loaded, progress=False)
    return DraftModelProposer(runner, KVCacheManager(64, 4, prefix_caching), k)


def test_rolled_back_kv_proposes_like_a_fresh_drafter(small):
    rng = random.Random(0)
    kept = drafter(small)
    tokens = [rng.randrange(SPEC.vocab_size) for _ in range(9)]
    for _ in range(8):
        drafts = kept.propose_batch([ProposeRequest("r", tokens, 4)])[0].token_ids
        fresh = drafter(small, prefix_caching=False).propose_batch([ProposeRequest("r", tokens, 4)])[0].token_ids
        assert drafts == fresh and len(drafts) == 4
        accepted = rng.randrange(len(drafts) + 1)  # accept a prefix, then the target's own token
        tokens = tokens + drafts[:accepted] + [rng.randrange(SPEC.vocab_size)]
    kept.release("r")
    assert kept.kv.num_free_blocks == kept.kv.num_blocks and not kept.seqs


def test_batched_requests_and_prefix_hits(small):
    d = drafter(small, k=3)
    a = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    b = [11, 12, 13]
    props = d.propose_batch([ProposeRequest("a", a, 3), ProposeRequest("b", b, 2), ProposeRequest("c", a, 0)])
    assert [len(p.token_ids) for p in props] == [3, 2, 0]
    d.release("a")
    hits = d.kv.prefix_hits
    again = d.propose_batch([ProposeRequest("a2", a, 3)])[0]
    assert again.token_ids == props[0].token_ids and d.kv.prefix_hits - hits == 8  # two full blocks of 4
    for rid in ("a2", "b"):
        d.release(rid)
    assert d.kv.num_free_blocks == d.kv.num_blocks


def test_full_pool_gives_no_drafts_and_holds_nothing(small):
    runner = ModelRunner(EngineConfig(cache=CacheConfig(block_size=4, num_blocks=3)), loaded=small, progress=False)
    d = DraftModelProposer(runner, KVCacheManager(3, 4), 4)
    assert d.propose_batch([ProposeRequest("r", list(range(20)), 4)])[0].token_ids == []
    assert d.kv.num_free_blocks == 3 and not d.seqs


def test_truncated_model_shares_the_targets_weights(small):
    t = truncated_model(small, 2)
    assert t.spec.num_layers == 2 and len(t.model.layers) == 2 and len(small.model.layers) == 3
    assert t.model.layers[0] is small.model.layers[0] and t.model.norm is small.model.norm
    with pytest.raises(ValueError, match="draft_layers=4"):
        truncated_model(small, 4)
    assert common_prefix_len([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix_len([], [1]) == 0
