"""MTP drafting plumbing on the real SmolLM2 (CPU) with a generated-weight MTP head (no real MTP
checkpoint is reachable; the head's acceptance here is meaningless, only losslessness and the
bookkeeping are tested): the target's hidden states reach the head, greedy output is identical to
spec off, both block pools are whole after finishing and aborting, and the head loads under the
DeepSeek-V3 and the Qwen3-Next tensor names."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from onecat.models.gguf_file import CheckpointError
from onecat.serve.config import CacheConfig, EngineConfig, SpecConfig
from onecat.serve.engine import LLMEngine
from onecat.serve.llm import LLM
from onecat.serve.model_runner import ModelRunner
from onecat.serve.sampling_params import SamplingParams
from onecat.spec.mtp import load_mtp_head

PROMPTS = ["1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3,", "The capital of France is"]
GREEDY = SamplingParams(temperature=0, max_tokens=10)


def generated_head(spec, prefix: str) -> dict[str, torch.Tensor]:
    """A Qwen3-Next-named (prefix "mtp.") or DeepSeek-V3-named (prefix "model.layers.{N}.") MTP layer."""
    g = torch.Generator().manual_seed(0)
    H, I, q, kv = spec.hidden_size, spec.intermediate_size, spec.q_size, spec.kv_size
    rnd = lambda *s: torch.randn(*s, generator=g) * 0.02  # noqa: E731
    block = {"input_layernorm.weight": torch.ones(H), "post_attention_layernorm.weight": torch.ones(H),
             "self_attn.q_proj.weight": rnd(q, H), "self_attn.k_proj.weight": rnd(kv, H),
             "self_attn.v_proj.weight": rnd(kv, H), "self_attn.o_proj.weight": rnd(H, q),
             "mlp.gate_proj.weight": rnd(I, H), "mlp.up_proj.weight": rnd(I, H), "mlp.down_proj.weight": rnd(H, I)}
    if prefix == "mtp.":
        own = {"mtp.pre_fc_norm_embedding.weight": torch.ones(H), "mtp.pre_fc_norm_hidden.weight": torch.ones(H),
               "mtp.fc.weight": rnd(H, 2 * H), "mtp.norm.weight": torch.ones(H)}
        return own | {f"mtp.layers.0.{n}": t for n, t in block.items()}
    own = {"enorm.weight": torch.ones(H), "hnorm.weight": torch.ones(H), "eh_proj.weight": rnd(H, 2 * H),
           "shared_head.norm.weight": torch.ones(H)}
    return {f"{prefix}{n}": t for n, t in (own | block).items()}


@pytest.fixture(scope="module")
def head_file(llm, tmp_path_factory):
    path = tmp_path_factory.mktemp("mtp") / "mtp.safetensors"
    save_file(generated_head(llm.engine.runner.spec, "mtp."), str(path))
    return str(path)


def own_engine(llm, spec: SpecConfig) -> LLMEngine:
    cfg = EngineConfig(cache=CacheConfig(num_blocks=32), spec=spec)
    return LLMEngine(cfg, runner=ModelRunner(cfg, loaded=llm.engine.runner.loaded, progress=False))


def run(engine, prompts, params):
    return [o.outputs[0] for o in LLM.from_engine(engine).generate(prompts, params)]


def test_mtp_drafts_are_lossless_and_pools_whole(llm, head_file):
    base = [o.token_ids for o in run(own_engine(llm, SpecConfig()), PROMPTS, GREEDY)]
    engine = own_engine(llm, SpecConfig(method="mtp", num_speculative_tokens=3, mtp_path=head_file,
                                        draft_num_blocks=32))
    assert engine.runner.keep_hidden and engine.proposer.runner.spec.num_layers == 1
    assert not engine.proposer.kv.enable_prefix_caching
    outs = run(engine, PROMPTS, GREEDY)
    assert [o.token_ids for o in outs] == base
    st = engine.stats()
    assert st["spec_drafts_proposed"] >= 10, st  # the head drafted from the target's hidden states
    assert st["spec_draft_num_free_blocks"] == st["spec_draft_num_total_blocks"]
    assert engine.kv.num_free_blocks == engine.kv.num_blocks and not engine.proposer.seqs
    engine.add_request("a", PROMPTS[1], SamplingParams(temperature=0.8, max_tokens=20, seed=1))
    for _ in range(3):
        engine.step()
    assert engine.proposer.kv.num_free_blocks < engine.proposer.kv.num_blocks
    engine.abort_request("a")
    assert engine.proposer.kv.num_free_blocks == engine.proposer.kv.num_blocks and not engine.proposer.seqs


def test_head_loads_under_both_checkpoint_namings(llm, tmp_path):
    loaded, spec = llm.engine.runner.loaded, llm.engine.runner.spec
    qwen, deepseek = tmp_path / "qwen.safetensors", tmp_path / "ds.safetensors"
    save_file(generated_head(spec, "mtp."), str(qwen))
    save_file(generated_head(spec, f"model.layers.{spec.num_layers}."), str(deepseek))
    a = load_mtp_head(str(qwen), loaded, torch.float32, "cpu").model
    b = load_mtp_head(str(deepseek), loaded, torch.float32, "cpu").model
    assert torch.equal(a.eh_proj, b.eh_proj) and torch.equal(a.qkv, b.qkv) and torch.equal(a.down, b.down)
    assert a.target is loaded.model  # embedding and LM head are the target's
    bad = generated_head(spec, "mtp.")
    bad["mtp.fc.weight"] = bad["mtp.fc.weight"][:, :spec.hidden_size].contiguous()
    save_file(bad, str(tmp_path / "bad.safetensors"))
    with pytest.raises(CheckpointError, match="mtp.fc.weight.*shape"):
        load_mtp_head(str(tmp_path / "bad.safetensors"), loaded, torch.float32, "cpu")
    partial = {n: t for n, t in generated_head(spec, "mtp.").items() if "down_proj" not in n}
    save_file(partial, str(tmp_path / "partial.safetensors"))
    with pytest.raises(CheckpointError, match="misses 1 tensors.*down_proj"):
        load_mtp_head(str(tmp_path / "partial.safetensors"), loaded, torch.float32, "cpu")
