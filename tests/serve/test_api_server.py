"""The OpenAI-compatible server, end to end: a real uvicorn server on 127.0.0.1 in a background
thread, the embedded SmolLM2-135M (loaded once for the module), the official `openai` client and
raw httpx for the bodies a client library would never send."""

from __future__ import annotations

import json
import re
import time

import httpx
import openai
import pytest

from onecat.serve.api_server import build_app
from onecat.serve.config import ServerConfig

KEY = "sekret-key"
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def llm(api_llm):  # (tests/serve/conftest.py)
    return api_llm


@pytest.fixture(scope="module")
def server(api_server):
    return api_server


@pytest.fixture(scope="module")
def keyed_server(llm, server, serve_app):
    # Same engine, a second app that requires a key; the first server's lifespan owns the engine.
    with serve_app(build_app(llm, ServerConfig(api_key=KEY)), lifespan="off") as s:
        yield s


@pytest.fixture(scope="module")
def client(api_client):
    return api_client


def chat(client, llm, **kw):
    args = dict(model=llm.model_name, messages=FRANCE, temperature=0, max_tokens=16)
    return client.chat.completions.create(**(args | kw))


def wait_idle(llm, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = llm.stats()
        if s["num_running"] == 0 and s["num_waiting"] == 0 and s["num_free_blocks"] == s["num_total_blocks"]:
            return s
        assert time.monotonic() < deadline, f"the engine did not go idle: {s}"
        time.sleep(0.1)


# -- the happy paths -------------------------------------------------------------------------------
def test_health(server):
    assert httpx.get(server.url + "/health").status_code == 200


def test_list_models(client, llm):
    models = client.models.list().data
    assert [m.id for m in models] == [llm.model_name]


def test_chat_greedy(client, llm):
    r = chat(client, llm, max_tokens=24)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion"
    assert r.model == llm.model_name
    assert len(r.choices) == 1 and r.choices[0].message.role == "assistant"
    assert "Paris" in r.choices[0].message.content
    assert r.choices[0].finish_reason in ("stop", "length")


def test_chat_streaming_equals_non_streaming(client, llm):
    full = chat(client, llm, max_tokens=24)
    chunks = list(chat(client, llm, max_tokens=24, stream=True, stream_options={"include_usage": True}))
    assert all(c.id == chunks[0].id and c.id.startswith("chatcmpl-") for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert reasons == [full.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage == full.usage  # include_usage: a last usage chunk


def test_usage_counts(client, llm):
    r = chat(client, llm, max_tokens=6, logprobs=True, extra_body={"ignore_eos": True})
    rendered = llm.tokenizer.apply_chat_template(FRANCE, add_generation_prompt=True)
    assert r.usage.prompt_tokens == len(llm.tokenizer.encode(rendered, add_special_tokens=False))
    assert r.usage.completion_tokens == 6 == len(r.choices[0].logprobs.content)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.choices[0].finish_reason == "length"


def test_cached_prompt_tokens_and_continuous_usage(client, llm):
    """usage.prompt_tokens_details.cached_tokens (OpenAI's field) counts the prefix-cache hit of a repeated
    prompt; vLLM's stream_options.continuous_usage_stats puts the usage so far in every chunk."""
    prompt = "A note on caching, told at length so that it fills several blocks: " + "cache me please, " * 40
    first = client.completions.create(model=llm.model_name, prompt=prompt, max_tokens=4, temperature=0)
    again = client.completions.create(model=llm.model_name, prompt=prompt, max_tokens=4, temperature=0)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    hit = again.usage.prompt_tokens_details.cached_tokens
    assert 0 < hit < again.usage.prompt_tokens and hit % llm.engine.kv.block_size == 0
    chunks = list(chat(client, llm, max_tokens=8, stream=True, extra_body={"ignore_eos": True},
                       stream_options={"include_usage": True, "continuous_usage_stats": True}))
    done = [c.usage.completion_tokens for c in chunks if c.choices and c.usage is not None]
    assert done == sorted(done) and done[-1] == 8 and chunks[-1].usage.completion_tokens == 8


def test_completions(client, llm):
    prompt = "The capital of France is"
    r = client.completions.create(model=llm.model_name, prompt=prompt, max_tokens=8, temperature=0)
    assert r.id.startswith("cmpl-") and r.object == "text_completion"
    assert len(r.choices) == 1 and r.choices[0].text
    assert r.usage.prompt_tokens == len(llm.tokenizer.encode(prompt))
    # a list of token ids is one prompt, and the same one
    ids = client.completions.create(model=llm.model_name, prompt=llm.tokenizer.encode(prompt), max_tokens=8,
                                     temperature=0)
    assert ids.choices[0].text == r.choices[0].text
    # streamed deltas join to the same text; echo puts the prompt first
    stream = list(client.completions.create(model=llm.model_name, prompt=prompt, max_tokens=8, temperature=0,
                                            stream=True, echo=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in stream if c.choices) == prompt + r.choices[0].text
    assert stream[-1].choices == [] and stream[-1].usage == r.usage


def test_completions_batch_and_logprobs(client, llm):
    r = client.completions.create(model=llm.model_name, prompt=["Once upon a time", "1, 2, 3,"], max_tokens=5,
                                  temperature=0, logprobs=2, extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1]
    assert r.usage.completion_tokens == 10
    for c in r.choices:
        lp = c.logprobs
        assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 5
        assert all(x <= 0 for x in lp.token_logprobs) and all(1 <= len(t) <= 2 for t in lp.top_logprobs)
        assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0


def test_completions_echo_with_logprobs(client, llm):
    """echo with logprobs (how lm-evaluation-harness scores a continuation): the prompt's tokens come first, the
    first without a logprob, each other with its logprob given the tokens before it (the model's: the engine's
    prompt_logprobs), then the generated tokens'; streamed chunks join to the same lists."""
    prompt = "The capital of France is Paris. The capital of Italy is"
    ids = llm.tokenizer.encode(prompt)
    args = dict(model=llm.model_name, prompt=prompt, max_tokens=3, temperature=0, logprobs=2, echo=True,
                extra_body={"ignore_eos": True})
    r = client.completions.create(**args)
    lp = r.choices[0].logprobs
    assert r.choices[0].text.startswith(prompt) and r.usage.prompt_tokens == len(ids)
    assert len(lp.tokens) == len(ids) + 3 and lp.tokens[:len(ids)] == llm.tokenizer.token_texts(ids)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None and lp.text_offset[0] == 0
    assert all(x <= 0 for x in lp.token_logprobs[1:]) and all(1 <= len(t) <= 3 for t in lp.top_logprobs[1:])
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[len(ids)] == len(prompt)
    plain = client.completions.create(**(args | {"echo": False}))  # the generated part is the same
    assert lp.token_logprobs[len(ids):] == plain.choices[0].logprobs.token_logprobs
    stream = [c for c in client.completions.create(**args, stream=True) if c.choices]
    joined = [t for c in stream for t in c.choices[0].logprobs.token_logprobs]
    assert "".join(c.choices[0].text for c in stream) == r.choices[0].text
    assert joined == lp.token_logprobs
    assert [t for c in stream for t in c.choices[0].logprobs.text_offset] == lp.text_offset


def test_structured_outputs(client, llm):
    """response_format json_object / json_schema (OpenAI) and structured_outputs (vLLM's) hold the output to them,
    streamed or not."""
    population = {"type": "integer", "minimum": 0, "maximum": 10**8}
    schema = {"type": "object", "additionalProperties": False, "required": ["city", "population"],
              "properties": {"city": {"enum": ["Paris", "Lyon"]}, "population": population}}
    r = chat(client, llm, max_tokens=64, response_format={"type": "json_schema",
                                                          "json_schema": {"name": "city", "schema": schema}})
    v = json.loads(r.choices[0].message.content)
    assert r.choices[0].finish_reason == "stop" and v["city"] in ("Paris", "Lyon") and isinstance(v["population"], int)
    person = [{"role": "user", "content": "Describe a person as JSON with a name, an age and a city."}]
    obj = chat(client, llm, messages=person, max_tokens=200, response_format={"type": "json_object"})
    assert obj.choices[0].finish_reason == "stop" and isinstance(json.loads(obj.choices[0].message.content), dict)
    form = {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}
    streamed = chat(client, llm, max_tokens=64, stream=True, response_format=form)
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == r.choices[0].message.content
    c = client.completions.create(model=llm.model_name, prompt="Is the sky blue? Answer:", max_tokens=8,
                                  temperature=0, extra_body={"structured_outputs": {"choice": [" yes", " no"]}})
    assert c.choices[0].text in (" yes", " no") and c.choices[0].finish_reason == "stop"


def test_logit_bias(client, llm):
    banana = llm.tokenizer.encode(" banana", add_special_tokens=False)
    assert len(banana) == 1
    r = client.completions.create(model=llm.model_name, prompt="The capital of France is", max_tokens=3,
                                  temperature=0, logit_bias={str(banana[0]): 100})
    assert r.choices[0].text == " banana" * 3


def test_bad_words_allowed_ids_and_truncation(client, llm):
    """vLLM's extra sampling fields through the API: each reaches the engine (the output changes as asked)."""
    base = client.completions.create(model=llm.model_name, prompt="The capital of France is", max_tokens=6,
                                     temperature=0)
    assert "Paris" in base.choices[0].text
    r = client.completions.create(model=llm.model_name, prompt="The capital of France is", max_tokens=6,
                                  temperature=0, extra_body={"bad_words": ["Paris"]})
    assert "Paris" not in r.choices[0].text
    yes = llm.tokenizer.encode(" yes", add_special_tokens=False)
    r = client.completions.create(model=llm.model_name, prompt="The capital of France is", max_tokens=2,
                                  temperature=0, extra_body={"allowed_token_ids": yes})
    assert r.choices[0].text == " yes" * 2
    long = "Lorem ipsum dolor sit amet. " * 40 + "The capital of France is"
    r = client.completions.create(model=llm.model_name, prompt=long, max_tokens=1, temperature=0,
                                  extra_body={"truncate_prompt_tokens": 5})
    assert r.usage.prompt_tokens == 5


def test_chat_logprobs(client, llm):
    r = chat(client, llm, max_tokens=4, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for t in content:
        assert t.logprob <= 0 and isinstance(t.token, str) and isinstance(t.bytes, list)
        assert len(t.top_logprobs) == 3 and all(x.logprob <= 0 for x in t.top_logprobs)


def test_n_choices(client, llm):
    r = chat(client, llm, n=2, temperature=0.8, seed=3, max_tokens=8, logprobs=True)
    assert sorted(c.index for c in r.choices) == [0, 1]
    assert r.usage.completion_tokens == sum(len(c.logprobs.content) for c in r.choices)
    stream = list(chat(client, llm, n=2, temperature=0.8, seed=3, max_tokens=8, stream=True))
    texts = {0: "", 1: ""}
    for c in stream:
        for ch in c.choices:
            texts[ch.index] += ch.delta.content or ""
    assert texts == {c.index: c.message.content for c in r.choices}  # same seed, same texts
    c = client.completions.create(model=llm.model_name, prompt="Hello", n=2, max_tokens=4, temperature=0.8, seed=1)
    assert sorted(ch.index for ch in c.choices) == [0, 1]


def test_stop_string(client, llm):
    base = chat(client, llm, max_tokens=24).choices[0].message.content
    words = [w for w in re.findall(r"[A-Za-z]{3,}", base)]
    assert len(words) >= 2, base
    stop = words[1]
    r = chat(client, llm, max_tokens=24, stop=[stop, "zzzz-never"])
    text = r.choices[0].message.content
    assert stop not in text and r.choices[0].finish_reason == "stop"
    assert text == base[:base.index(stop)]
    c = client.completions.create(model=llm.model_name, prompt="One, two, three, four,", max_tokens=16,
                                  temperature=0, stop=" five")
    assert " five" not in c.choices[0].text and c.choices[0].finish_reason in ("stop", "length")


def test_seed_reproducible(client, llm):
    story = [{"role": "user", "content": "Tell me a story about a dragon."}]  # an open question

    def sample(seed):
        return chat(client, llm, messages=story, temperature=0.8, seed=seed, max_tokens=10).choices[0].message.content

    assert sample(1234) == sample(1234)
    assert len({sample(s) for s in (1, 2, 3)}) > 1


def scrape(url: str, headers: dict | None = None) -> dict[str, float]:
    r = httpx.get(url + "/metrics", headers=headers)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    values = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def metric(values: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in values.items() if k.startswith(prefix + "{") or k == prefix)


def test_metrics_move(client, llm, server):
    before = scrape(server.url)
    for name in ("onecat:num_requests_running", "onecat:num_requests_waiting", "onecat:kv_cache_usage_perc",
                 "onecat:prefix_cache_queries_total", "onecat:num_preemptions_total",
                 "onecat:spec_decode_num_draft_tokens_total", "onecat:spec_decode_num_accepted_tokens_total"):
        assert any(k.startswith(name) for k in before), name
    chat(client, llm, max_tokens=5, extra_body={"ignore_eos": True})
    after = scrape(server.url)
    assert metric(after, "onecat:generation_tokens_total") >= metric(before, "onecat:generation_tokens_total") + 5
    assert metric(after, "onecat:prompt_tokens_total") > metric(before, "onecat:prompt_tokens_total")
    assert metric(after, "onecat:request_success_total") == metric(before, "onecat:request_success_total") + 1
    for h in ("time_to_first_token_seconds", "time_per_output_token_seconds", "e2e_request_latency_seconds"):
        assert metric(after, f"onecat:{h}_count") == metric(before, f"onecat:{h}_count") + 1
    assert metric(after, "onecat:prefix_cache_queries_total") > metric(before, "onecat:prefix_cache_queries_total")


# -- bad input: always a 400 with OpenAI's error object ------------------------------------------------
def msgs(**kw) -> bytes:
    return json.dumps({"messages": FRANCE, "max_tokens": 4} | kw).encode()


BAD_CHAT = {
    "invalid json": b'{"messages": [',
    "not utf-8": b'{"messages": [{"role": "user", "content": "caf\xe9"}]}',
    "not an object": b'[1, 2]',
    "NaN": b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
    "messages missing": b'{"max_tokens": 4}',
    "messages not a list": msgs(messages="hi"),
    "empty messages": msgs(messages=[]),
    "unknown role": msgs(messages=[{"role": "wizard", "content": "hi"}]),
    "content wrong type": msgs(messages=[{"role": "user", "content": 5}]),
    "image part": msgs(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
    "max_tokens as string": msgs(max_tokens="5"),
    "max_tokens 0": msgs(max_tokens=0),
    "max_tokens negative": msgs(max_tokens=-3),
    "max_completion_tokens 0": msgs(max_completion_tokens=0),
    "n as float": msgs(n=1.5),
    "n 0": msgs(n=0),
    "temperature negative": msgs(temperature=-0.5),
    "temperature string": msgs(temperature="hot"),
    "top_p 0": msgs(top_p=0),
    "top_p above 1": msgs(top_p=1.5),
    "stream not bool": msgs(stream="yes"),
    "stop wrong type": msgs(stop=5),
    "seed beyond int64": msgs(seed=2**70),
    "top_logprobs without logprobs": msgs(top_logprobs=2),
    "response_format unknown type": msgs(response_format={"type": "xml"}),
    "json_schema without a schema": msgs(response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
    "json_schema xgrammar refuses": msgs(response_format={"type": "json_schema",
                                                          "json_schema": {"name": "x", "schema": {"type": "nope"}}}),
    "response_format and structured_outputs": msgs(response_format={"type": "json_object"},
                                                   structured_outputs={"regex": "a+"}),
    "structured_outputs with two": msgs(structured_outputs={"regex": "a+", "choice": ["a"]}),
    "unknown model": msgs(model="gpt-4o"),
    "prompt longer than the context": msgs(messages=[{"role": "user", "content": "hello " * 9000}]),
    "too long, streaming": msgs(messages=[{"role": "user", "content": "hello " * 9000}], stream=True),
}

BAD_COMPLETION = {
    "prompt missing": {"max_tokens": 4},
    "empty prompt": {"prompt": ""},
    "empty prompt list": {"prompt": []},
    "mixed prompt list": {"prompt": [1, "a"]},
    "token id out of range": {"prompt": [10 ** 9]},
    "prompt longer than the context": {"prompt": [1] * 9000},
    "logprobs as bool": {"prompt": "hi", "logprobs": True},
    "logprobs over 20": {"prompt": "hi", "echo": True, "logprobs": 21},
    "unknown model": {"prompt": "hi", "model": "nope"},
    "max_tokens 0": {"prompt": "hi", "max_tokens": 0},
    "suffix": {"prompt": "def f(", "suffix": "    return x"},
    "best_of above n": {"prompt": "hi", "best_of": 3},
    "logit_bias key not an id": {"prompt": "hi", "logit_bias": {"hi": 5}},
    "logit_bias beyond 100": {"prompt": "hi", "logit_bias": {"5": 101}},
    "logit_bias id out of range": {"prompt": "hi", "logit_bias": {str(10**9): 5}},
    "allowed_token_ids empty": {"prompt": "hi", "allowed_token_ids": []},
    "allowed_token_ids out of range": {"prompt": "hi", "allowed_token_ids": [10**9]},
    "bad_words not a list": {"prompt": "hi", "bad_words": "Paris"},
    "truncate_prompt_tokens 0": {"prompt": "hi", "truncate_prompt_tokens": 0},
    "priority under fcfs": {"prompt": "hi", "priority": 3},
}


def assert_openai_error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert isinstance(err["message"], str) and err["message"]
    assert {"message", "type", "param", "code"} <= set(err)
    return err


@pytest.mark.parametrize("body", BAD_CHAT.values(), ids=BAD_CHAT.keys())
def test_bad_chat_request(server, body):
    r = httpx.post(server.url + "/v1/chat/completions", content=body,
                   headers={"content-type": "application/json"}, timeout=60)
    assert_openai_error(r, 400)


@pytest.mark.parametrize("body", BAD_COMPLETION.values(), ids=BAD_COMPLETION.keys())
def test_bad_completion_request(server, body):
    r = httpx.post(server.url + "/v1/completions", json=body, timeout=60)
    assert_openai_error(r, 400)


def test_tokenize_and_detokenize(server, llm):
    """vLLM's /tokenize (a prompt, or messages through the chat template) and /detokenize."""
    prompt = "The capital of France is"
    r = httpx.post(server.url + "/tokenize", json={"prompt": prompt}).json()
    assert r == {"count": len(r["tokens"]), "max_model_len": llm.max_model_len, "tokens": llm.tokenizer.encode(prompt)}
    chat = httpx.post(server.url + "/tokenize", json={"messages": FRANCE}).json()
    assert chat["tokens"] == llm.tokenizer.apply_chat_template(FRANCE, add_generation_prompt=True, tokenize=True)
    back = httpx.post(server.url + "/detokenize", json={"tokens": chat["tokens"]}).json()
    assert back == {"prompt": llm.tokenizer.decode(chat["tokens"])}
    for route, body in (("/tokenize", {}), ("/tokenize", {"prompt": "a", "messages": FRANCE}),
                        ("/detokenize", {"tokens": [10**9]}), ("/detokenize", {"tokens": "abc"}),
                        ("/tokenize", {"prompt": "a", "model": "other"})):
        assert_openai_error(httpx.post(server.url + route, json=body), 400)


def test_unknown_model_names_param(server):
    err = assert_openai_error(httpx.post(server.url + "/v1/chat/completions", content=msgs(model="x")), 400)
    assert err["param"] == "model" and err["code"] == "model_not_found"


def test_unknown_route_is_openai_error(server):
    assert_openai_error(httpx.get(server.url + "/v1/nope"), 404)


def test_bad_requests_leave_engine_idle(server, llm):
    wait_idle(llm, timeout=5)


# -- auth --------------------------------------------------------------------------------------------
def test_api_key(keyed_server, llm):
    url = keyed_server.url
    assert httpx.get(url + "/health").status_code == 200  # no key needed
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        assert_openai_error(httpx.get(url + "/v1/models", headers=headers), 401)
        assert_openai_error(httpx.get(url + "/metrics", headers=headers), 401)
        assert_openai_error(httpx.post(url + "/v1/chat/completions", content=msgs(), headers=headers), 401)
    good = {"Authorization": f"Bearer {KEY}"}
    assert httpx.get(url + "/v1/models", headers=good).status_code == 200
    scrape(url, good)
    keyed = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
    assert keyed.chat.completions.create(model=llm.model_name, messages=FRANCE, max_tokens=2).choices
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0).models.list()


# -- disconnects abort the request ---------------------------------------------------------------------
LONG = {"prompt": "Tell me a very long story.", "max_tokens": 4000, "ignore_eos": True, "temperature": 0}


def test_disconnect_mid_stream_aborts(server, llm):
    wait_idle(llm)
    with httpx.Client(base_url=server.url, timeout=60) as http:
        with http.stream("POST", "/v1/completions", json=LONG | {"stream": True}) as r:
            assert r.status_code == 200
            chunks = 0
            for line in r.iter_lines():
                chunks += line.startswith("data: ")
                if chunks == 3:
                    break
            assert llm.stats()["num_running"] == 1
        # leaving the blocks closes the connection mid-stream
    wait_idle(llm, timeout=30)


def test_disconnect_non_streaming_aborts(server, llm):
    wait_idle(llm)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/v1/completions", json=LONG, timeout=httpx.Timeout(60, read=2.0))
    wait_idle(llm, timeout=30)
