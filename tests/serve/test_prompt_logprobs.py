"""SamplingParams.prompt_logprobs on the real SmolLM2 GGUF (CPU): each prompt token's logprob given the tokens
before it, computed by the prefill itself (chunked, sliced through the LM head, preempted and recomputed), equal
to the model's own scores; the prefix cache is not used to skip the positions they need."""

from __future__ import annotations

from pydoc_data.topics import topics

import pytest
import torch

from onecat.serve import model_runner
from onecat.serve.config import CacheConfig, EngineConfig, SchedulerConfig
from onecat.serve.engine import LLMEngine
from onecat.serve.model_runner import ModelRunner
from onecat.serve.sampling_params import SamplingParams


def prompt_ids(llm, n: int = 150) -> list[int]:
    return llm.tokenizer.encode(topics["assert"] + topics["pass"])[:n]


def expected(llm, ids: list[int]) -> torch.Tensor:
    """log p(ids[p] | ids[:p]) for p >= 1, from ModelRunner.score on a scratch cache."""
    lp = torch.log_softmax(llm.engine.runner.score(ids).float(), dim=-1)
    return lp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]


def run(engine: LLMEngine, prompts: list[list[int]], params: SamplingParams) -> list:
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, params)
    done = {}
    while engine.has_unfinished_requests():
        done.update({o.request_id: o for o in engine.step() if o.finished})
    return [done[str(i)] for i in range(len(prompts))]


def check(out, llm, ids: list[int], k: int) -> None:
    lps = out.prompt_logprobs
    assert lps is not None and len(lps) == len(ids) and lps[0] is None
    assert [t.chosen.token_id for t in lps[1:]] == ids[1:]
    got = torch.tensor([t.chosen.logprob for t in lps[1:]])
    torch.testing.assert_close(got, expected(llm, ids), rtol=1e-4, atol=1e-4)
    for t in lps[1:]:
        assert len(t.top) == k and all(a.logprob >= b.logprob for a, b in zip(t.top, t.top[1:]))
        assert not t.top or t.top[0].logprob >= t.chosen.logprob - 1e-5  # the best is at least as likely
        assert t.chosen.token == llm.tokenizer.decode([t.chosen.token_id])


def test_prompt_logprobs_are_the_models_scores(llm):
    ids = prompt_ids(llm)
    out = llm.generate(ids, SamplingParams(temperature=0, max_tokens=2, prompt_logprobs=3))[0]
    check(out, llm, ids, 3)
    assert llm.generate(ids, SamplingParams(temperature=0, max_tokens=2))[0].prompt_logprobs is None  # not asked
    one = llm.generate(ids[:1], SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=0))[0]
    assert one.prompt_logprobs == [None]  # nothing comes before a one-token prompt's token


def test_chunked_prefill_sliced_head_and_preemption(llm, monkeypatch):
    """Prompts split over 48-token steps, the LM head run 16 positions at a time, and a pool so small that
    requests are preempted and recompute their prompts: the same logprobs, every block freed."""
    monkeypatch.setattr(model_runner, "PROMPT_LOGPROBS_ROWS", 16)
    cfg = EngineConfig(cache=CacheConfig(num_blocks=40, block_size=8),
                       scheduler=SchedulerConfig(max_num_batched_tokens=48))
    small = LLMEngine(cfg, runner=ModelRunner(cfg, loaded=llm.engine.runner.loaded))
    prompts = [prompt_ids(llm, 100), prompt_ids(llm, 140)[40:], prompt_ids(llm, 90)[7:]]
    outs = run(small, prompts, SamplingParams(temperature=0, max_tokens=40, ignore_eos=True, prompt_logprobs=1))
    assert small.scheduler.num_preemptions > 0
    for out, ids in zip(outs, prompts):
        check(out, llm, ids, 1)
    assert small.kv.num_free_blocks == small.kv.num_blocks


def test_prefix_cache_does_not_skip_the_positions(llm):
    """A prompt already in the prefix cache is computed again when its logprobs are asked (and the cache is
    used again once they are not); with n > 1 the choices share one set of prompt logprobs."""
    ids = prompt_ids(llm, 120)
    plain = SamplingParams(temperature=0, max_tokens=1)
    llm.generate(ids, plain)
    assert llm.generate(ids, plain)[0].num_cached_tokens > 0
    out = llm.generate(ids, SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=0))[0]
    assert out.num_cached_tokens == 0
    check(out, llm, ids, 0)
    fan = llm.generate(ids, SamplingParams(temperature=0.8, seed=5, n=3, max_tokens=4, prompt_logprobs=2))[0]
    assert len(fan.outputs) == 3
    check(fan, llm, ids, 2)


@pytest.mark.parametrize("bad", [-1, 21])
def test_prompt_logprobs_out_of_range_are_refused(bad):
    with pytest.raises(ValueError, match=rf"prompt_logprobs must be in \[0, 20\], got {bad}"):
        SamplingParams(prompt_logprobs=bad)
