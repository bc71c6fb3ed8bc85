"""The engine on the real SmolLM2 GGUF (CPU): batching, prefix caching, preemption, stops, seeds."""

from __future__ import annotations

from pydoc_data.topics import topics

import pytest
import torch

from onecat.serve.config import CacheConfig, EngineConfig, SchedulerConfig
from onecat.serve.engine import LLMEngine
from onecat.serve.model_runner import ModelRunner
from onecat.serve.sampling_params import SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
PROMPTS = [
    "The capital of France is", "My favourite colour is", "1, 2, 3, 4,", "Water boils at",
    "The best way to learn Python is", "Once upon a time, in a land far away,", "SELECT * FROM",
    "import numpy as np\n", "Dear Sir or Madam,", "The sun rises in the", "To be or not to be,",
    "A haiku about autumn:\n", "The chemical symbol for gold is", "In the beginning", "Roses are red,",
    "The largest planet in our solar system is",
]


def all_blocks_free(engine: LLMEngine) -> bool:
    return engine.kv.num_free_blocks == engine.kv.num_blocks and not engine.groups


def test_sixteen_prompts_batched_equal_each_alone(llm):
    together = [o.outputs[0].token_ids for o in llm.generate(PROMPTS, GREEDY)]
    alone = [llm.generate(p, GREEDY)[0].outputs[0].token_ids for p in PROMPTS]
    assert together == alone
    assert all_blocks_free(llm.engine)


def test_prefix_cache_reuses_blocks_and_keeps_output(llm):
    eng = llm.engine
    tok = llm.tokenizer
    prefix = tok.encode(topics["assert"] + topics["pass"], add_special_tokens=False)[:200]
    first = prefix + tok.encode(" Summary:", add_special_tokens=False)
    second = prefix + tok.encode(" In short,", add_special_tokens=False)
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    llm.generate(first, params)
    hits_before = eng.kv.prefix_hits
    out = llm.generate(second, params)[0]
    bs = eng.kv.block_size
    assert out.num_cached_tokens == 200 // bs * bs
    assert eng.kv.prefix_hits - hits_before == 200 // bs * bs
    assert all_blocks_free(eng)
    eng.kv.enable_prefix_caching = False  # safe to flip: allocations evict what they overwrite
    try:
        cold = llm.generate(second, params)[0]
    finally:
        eng.kv.enable_prefix_caching = True
    assert cold.num_cached_tokens == 0
    assert cold.outputs[0].token_ids == out.outputs[0].token_ids


def test_shared_prefix_blocks_are_the_same_physical_blocks(llm):
    eng = llm.engine
    prefix = llm.tokenizer.encode(topics["while"], add_special_tokens=False)[:64]
    eng.add_request("p1", prefix + [11], SamplingParams(max_tokens=4, temperature=0))
    eng.step()
    eng.add_request("p2", prefix + [12], SamplingParams(max_tokens=4, temperature=0))
    eng.step()
    b1, b2 = eng.kv.block_ids("p1"), eng.kv.block_ids("p2")
    assert b1[:4] == b2[:4] and b1[4] != b2[4]
    assert all(eng.kv.pool.blocks[b].ref_cnt == 2 for b in b1[:4])
    eng.abort_request("p1")
    eng.abort_request("p2")
    assert all_blocks_free(eng)


def test_preemption_with_a_small_pool_gives_the_same_outputs(llm):
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    prompts = PROMPTS[:6]
    expected = [o.outputs[0].token_ids for o in llm.generate(prompts, params)]
    cfg = EngineConfig(cache=CacheConfig(num_blocks=10, block_size=8),
                       scheduler=SchedulerConfig(max_num_batched_tokens=64))
    small = LLMEngine(cfg, runner=ModelRunner(cfg, loaded=llm.engine.runner.loaded))
    for i, p in enumerate(prompts):
        small.add_request(str(i), p, params)
    done = {}
    while small.has_unfinished_requests():
        for out in small.step():
            if out.finished:
                done[out.request_id] = out.outputs[0].token_ids
    assert small.scheduler.num_preemptions > 0
    assert [done[str(i)] for i in range(len(prompts))] == expected
    assert all_blocks_free(small)


def test_stop_strings_and_max_tokens(llm):
    base = llm.generate("Count: 1, 2, 3,", SamplingParams(temperature=0, max_tokens=20))[0].outputs[0]
    assert base.finish_reason == "length" and len(base.token_ids) == 20
    stop = base.text[5:8]
    out = llm.generate("Count: 1, 2, 3,", SamplingParams(temperature=0, max_tokens=20, stop=[stop]))[0].outputs[0]
    assert out.finish_reason == "stop" and out.stop_reason == stop
    assert out.text == base.text[: base.text.find(stop)]
    inc = llm.generate("Count: 1, 2, 3,", SamplingParams(temperature=0, max_tokens=20, stop=[stop],
                                                          include_stop_str_in_output=True))[0].outputs[0]
    assert inc.text == base.text[: base.text.find(stop) + len(stop)]
    stop_id = base.token_ids[3]
    out = llm.generate("Count: 1, 2, 3,", SamplingParams(temperature=0, max_tokens=20, stop_token_ids=[stop_id]))[0]
    first = base.token_ids.index(stop_id)
    assert out.outputs[0].token_ids == base.token_ids[:first + 1] and out.outputs[0].stop_reason == stop_id


def test_chat_stops_at_end_of_turn(llm):
    out = llm.chat([{"role": "user", "content": "What is the capital of France?"}],
                   SamplingParams(temperature=0, max_tokens=40))[0].outputs[0]
    assert "Paris" in out.text and out.finish_reason == "stop"
    assert out.token_ids[-1] in llm.tokenizer.eos_token_ids and "<|im_end|>" not in out.text


def test_chat_continues_a_final_message_and_takes_template_kwargs(llm):
    turns = [{"role": "user", "content": "What is the capital of France?"},
             {"role": "assistant", "content": "The capital of France is"}]
    out = llm.chat(turns, SamplingParams(temperature=0, max_tokens=4), add_generation_prompt=False,
                   continue_final_message=True)[0]
    assert "Paris" in out.outputs[0].text
    assert llm.tokenizer.decode(out.prompt_token_ids).endswith("<|im_start|>assistant\nThe capital of France is")
    persona = "{% for m in messages %}{{ who }}: {{ m['content'] }}\n{% endfor %}"
    out = llm.chat(turns[:1], SamplingParams(temperature=0, max_tokens=1), chat_template=persona,
                   chat_template_kwargs={"who": "Zorblax"})[0]
    assert llm.tokenizer.decode(out.prompt_token_ids) == "Zorblax: What is the capital of France?\n"


def test_seeds_reproduce_and_n_fans_out(llm):
    p = SamplingParams(temperature=0.9, top_p=0.95, max_tokens=12, seed=1234, ignore_eos=True)
    a = llm.generate("Tell me a story:", p)[0].outputs[0].token_ids
    b = llm.generate("Tell me a story:", p)[0].outputs[0].token_ids
    assert a == b
    two = llm.generate("Tell me a story:", SamplingParams(temperature=0.9, max_tokens=12, n=2, seed=1234,
                                                          ignore_eos=True))[0]
    assert [c.index for c in two.outputs] == [0, 1]
    assert two.outputs[0].token_ids != two.outputs[1].token_ids
    assert all_blocks_free(llm.engine)


def test_logprobs_are_the_models(llm):
    out = llm.generate("The capital of France is", SamplingParams(temperature=0, max_tokens=3, logprobs=3))[0]
    c = out.outputs[0]
    assert len(c.logprobs) == 3
    for tid, lp in zip(c.token_ids, c.logprobs):
        assert lp.chosen.token_id == tid and lp.chosen.logprob <= 0
        assert [t.token_id for t in lp.top][0] == tid  # greedy: the chosen token is the top one
        assert lp.top[0].logprob >= lp.top[1].logprob >= lp.top[2].logprob


@pytest.mark.parametrize("prompt,msg", [("", "empty"), ([], "empty"), ([10**9], "out of range")])
def test_bad_prompts_are_refused(llm, prompt, msg):
    with pytest.raises(ValueError, match=msg):
        llm.engine.add_request("bad", prompt, SamplingParams())
    assert "bad" not in llm.engine.groups


def test_prompt_longer_than_context_is_refused(llm):
    with pytest.raises(ValueError, match="context"):
        llm.engine.add_request("long", [1] * llm.engine.max_model_len, SamplingParams())


def test_max_tokens_beyond_the_context_is_refused(llm):
    with pytest.raises(ValueError, match="max_tokens"):
        llm.engine.add_request("huge", "Hello", SamplingParams(max_tokens=llm.engine.max_model_len))
    assert "huge" not in llm.engine.groups


def test_allowed_token_ids_bad_words_and_prompt_truncation(llm):
    """vLLM's allowed_token_ids, bad_words (as a word's start and inside text) and truncate_prompt_tokens on the
    real model: each changes the greedy output as asked and the model still answers."""
    prompt = "The capital of France is"
    base = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=8))[0].outputs[0]
    assert "Paris" in base.text
    allowed = sorted(set(base.token_ids[1:]) | set(llm.tokenizer.encode(" Lyon", add_special_tokens=False)))
    only = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=8, allowed_token_ids=allowed))[0].outputs[0]
    assert set(only.token_ids) <= set(allowed) and only.token_ids[0] != base.token_ids[0]
    banned = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=8, bad_words=["Paris"]))[0].outputs[0]
    assert "Paris" not in banned.text and banned.token_ids != base.token_ids
    assert llm.engine.groups == {} and all_blocks_free(llm.engine)
    ids = llm.tokenizer.encode("Lorem ipsum dolor sit amet. " * 20 + prompt)
    cut = llm.generate(ids, SamplingParams(temperature=0, max_tokens=8, truncate_prompt_tokens=6))[0]
    assert cut.prompt_token_ids == ids[-6:]
    assert cut.outputs[0].token_ids == llm.generate(ids[-6:], SamplingParams(temperature=0, max_tokens=8))[0] \
        .outputs[0].token_ids
    text_cut = llm.generate("x " * (llm.engine.max_model_len + 10), SamplingParams(max_tokens=2, truncate_prompt_tokens=8))
    assert len(text_cut[0].prompt_token_ids) == 8  # a prompt past the context, kept to its end
    with pytest.raises(ValueError, match="allowed_token_ids token id"):
        llm.engine.add_request("big", prompt, SamplingParams(allowed_token_ids=[10**9]))
    assert "big" not in llm.engine.groups


def test_priority_needs_the_priority_policy(llm):
    with pytest.raises(ValueError, match="scheduler.policy=priority"):
        llm.engine.add_request("prio", "Hello", SamplingParams(max_tokens=2), priority=1)
    assert "prio" not in llm.engine.groups
    with pytest.raises(ValueError, match="1 priorities for 2 prompts"):
        llm.generate(["a", "b"], SamplingParams(max_tokens=1), priority=[0])


def test_priority_policy_serves_the_same_tokens(llm):
    """Under scheduler.policy=priority (one sequence at a time, so the order is the priority's) every prompt
    still gets the tokens it gets alone."""
    from onecat.serve.llm import LLM

    prio = LLM(config=EngineConfig(scheduler=SchedulerConfig(policy="priority", max_num_seqs=1)), progress=False)
    outs = prio.generate(PROMPTS[:4], GREEDY, priority=[3, -2, 0, 1])
    assert [o.outputs[0].token_ids for o in outs] == [o.outputs[0].token_ids for o in llm.generate(PROMPTS[:4], GREEDY)]
    eng = prio.engine
    for rid, rank in (("later", 2), ("first", -5), ("next", 0)):
        eng.add_request(rid, "Hello there", SamplingParams(max_tokens=2), priority=rank)
    eng.step()
    assert [r.request_id for r in eng.scheduler.running] == ["first"]
    while eng.has_unfinished_requests():
        eng.step()


def test_seed_must_fit_64_bits():
    with pytest.raises(ValueError, match="64-bit"):
        SamplingParams(seed=2**70)


def test_score_from_a_position_is_the_tail_of_the_full_score(llm):
    """ModelRunner.score(ids, first) runs the LM head on positions first.. only (engine_check's
    reference scoring): the same logits as the full score's tail; a first outside the sequence is refused."""
    runner = llm.engine.runner
    ids = list(range(200, 240))
    full, tail = runner.score(ids), runner.score(ids, first=30)
    assert tail.shape == (10, full.shape[1])
    torch.testing.assert_close(tail, full[30:], rtol=1e-5, atol=1e-4)
    for bad in (-1, 40):
        with pytest.raises(ValueError, match=f"first={bad}"):
            runner.score(ids, first=bad)


@pytest.mark.parametrize("kv", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_kv_cache(llm, kv):
    """CacheConfig.dtype reaches the paged caches: FP8 K / V tensors (one byte an element, so 4x the float32
    cache's blocks in the same memory), written and read through the FP8 route (scale 1); the scores of a
    sequence stay near the float32 cache's (top-1 on >= 90% of positions), and the engine generates with it and
    frees every block. An unknown dtype, or one that is neither the compute dtype nor FP8, is refused by name."""
    base = llm.engine.runner
    mem = CacheConfig(kv_cache_memory_gib=0.02)
    runner = ModelRunner(EngineConfig(cache=CacheConfig(kv_cache_memory_gib=0.02, dtype=kv)), loaded=base.loaded)
    assert all(k.dtype == getattr(torch, kv) and v.dtype == k.dtype for k, v in runner.kv_caches)
    assert runner.num_blocks == 4 * base._num_blocks(mem)
    ids = llm.tokenizer.encode(PROMPTS[5] + " " + topics["assert"][:600])
    ref, got = base.score(ids), runner.score(ids)
    agree = (ref.argmax(-1) == got.argmax(-1)).float().mean().item()
    assert agree >= 0.9, f"{kv}: top-1 agrees with the float32 cache on {agree:.1%} of {len(ids)} positions"
    assert not torch.equal(ref, got)  # the FP8 rounding is there
    eng = LLMEngine(EngineConfig(cache=CacheConfig(kv_cache_memory_gib=0.02, dtype=kv)), runner=runner)
    for i, p in enumerate(PROMPTS[:3]):
        eng.add_request(str(i), p, GREEDY)
    done = {}
    while eng.has_unfinished_requests():
        done.update({o.request_id: o.outputs[0].token_ids for o in eng.step() if o.finished})
    assert sorted(done) == ["0", "1", "2"] and all(len(t) == GREEDY.max_tokens for t in done.values())
    assert all_blocks_free(eng)
    with pytest.raises(ValueError, match="cache dtype must be one of auto, .*float8_e4m3fn.*; got 'fp8'"):
        ModelRunner(EngineConfig(cache=CacheConfig(num_blocks=4, dtype="fp8")), loaded=base.loaded)
    with pytest.raises(ValueError, match="cache dtype float16 with float32 compute: the caches are kept in"):
        ModelRunner(EngineConfig(cache=CacheConfig(num_blocks=4, dtype="float16")), loaded=base.loaded)
