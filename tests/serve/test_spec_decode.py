"""Speculative decoding in the engine on the real SmolLM2 (CPU): greedy output identical with spec
off and with n-gram drafts; blocks all returned; prefix cache still hits; stops honoured inside an
accepted run."""

from __future__ import annotations

from pydoc_data.topics import topics

import pytest

from onecat.serve.config import EngineConfig, SpecConfig
from onecat.serve.engine import LLMEngine
from onecat.serve.llm import LLM
from onecat.serve.model_runner import ModelRunner
from onecat.serve.sampling_params import SamplingParams

TEXT = topics["assert"][:400]
PROMPTS = [
    f"<|im_start|>user\nRepeat this text exactly:\n{TEXT}<|im_end|>\n<|im_start|>assistant\n",
    "1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3,",
    "The capital of France is",
]


@pytest.fixture(scope="module")
def spec_engine(llm):
    # its own runner (own KV tensors) over the shared weights: two block managers over one set of KV
    # tensors would overwrite each other's cached prefixes
    cfg = EngineConfig(spec=SpecConfig(method="ngram", num_speculative_tokens=4))
    return LLMEngine(cfg, runner=ModelRunner(cfg, loaded=llm.engine.runner.loaded, progress=False))


def run(engine, prompts, params):
    return [o.outputs[0] for o in LLM.from_engine(engine).generate(prompts, params)]


def test_greedy_identical_with_ngram_drafts(llm, spec_engine):
    params = SamplingParams(temperature=0, max_tokens=40)
    base = [o.outputs[0] for o in llm.generate(PROMPTS, params)]
    spec = run(spec_engine, PROMPTS, params)
    assert [o.token_ids for o in spec] == [o.token_ids for o in base]
    assert [o.text for o in spec] == [o.text for o in base]
    st = spec_engine.stats()
    assert st["spec_drafts_proposed"] > 0 and st["spec_drafts_accepted"] > 0
    assert st["num_free_blocks"] == st["num_total_blocks"]


def test_acceptance_reaches_prometheus(spec_engine):
    from prometheus_client import generate_latest

    from onecat.serve.metrics import ServerMetrics

    st = spec_engine.stats()
    text = generate_latest(ServerMetrics(spec_engine.stats, "m").registry).decode()
    assert f'onecat:spec_decode_num_draft_tokens_total{{model_name="m"}} {float(st["spec_drafts_proposed"])}' in text
    assert f'onecat:spec_decode_num_accepted_tokens_total{{model_name="m"}} {float(st["spec_drafts_accepted"])}' in text
    assert 'onecat:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="0"}' in text


def test_prefix_cache_hits_after_speculative_steps(spec_engine):
    params = SamplingParams(temperature=0, max_tokens=24)
    first = run(spec_engine, PROMPTS[:1], params)[0]
    hits = spec_engine.kv.prefix_hits
    again = run(spec_engine, PROMPTS[:1], params)[0]
    assert spec_engine.kv.prefix_hits - hits >= 16 * ((len(spec_engine.tokenizer.encode(PROMPTS[0])) - 1) // 16)
    assert again.token_ids == first.token_ids
    assert spec_engine.kv.num_free_blocks == spec_engine.kv.num_blocks


def test_stops_inside_an_accepted_run(llm, spec_engine):
    base = llm.generate(PROMPTS[1], SamplingParams(temperature=0, max_tokens=30))[0].outputs[0]
    stop = base.text[10:13]
    params = SamplingParams(temperature=0, max_tokens=30, stop=[stop])
    out = run(spec_engine, [PROMPTS[1]], params)[0]
    assert out.finish_reason == "stop" and out.text == base.text[: base.text.find(stop)]
    capped = run(spec_engine, [PROMPTS[1]], SamplingParams(temperature=0, max_tokens=7))[0]
    assert capped.token_ids == base.token_ids[:7] and capped.finish_reason == "length"
    assert spec_engine.kv.num_free_blocks == spec_engine.kv.num_blocks


def test_sampled_requests_run_with_drafts_and_reproduce(spec_engine):
    params = SamplingParams(temperature=0.7, max_tokens=24, seed=5, ignore_eos=True)
    a = run(spec_engine, PROMPTS[1:2], params)[0].token_ids
    b = run(spec_engine, PROMPTS[1:2], params)[0].token_ids
    assert a == b and len(a) == 24
