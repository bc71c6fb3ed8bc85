"""Tool calling on /v1/chat/completions (onecat.serve.tool_calls) through the OpenAI client, on the embedded
SmolLM2 (CPU): tool_choice required / a named function decode valid calls, streamed and not; "none" is text;
"auto" reads <tool_call> blocks with serve.tool_call_parser=hermes and is a 400 that says why without a parser, as
malformed choices are."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from onecat.serve.api_server import build_app
from onecat.serve.config import ServerConfig
from onecat.serve.tool_calls import content_before_calls, parse_auto

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
                   "properties": {"city": {"enum": ["Paris", "Rome"]}, "unit": {"enum": ["c", "f"]}}}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "additionalProperties": False, "required": ["tz"],
                                       "properties": {"tz": {"enum": ["UTC", "CET"]}}}}}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]


def ask(api_client, api_llm, **kw):
    args = dict(model=api_llm.model_name, messages=ASK, temperature=0, max_tokens=64, tools=[WEATHER, TIME])
    return api_client.chat.completions.create(**(args | kw))


def valid(call) -> bool:
    args = json.loads(call.function.arguments)
    if call.function.name == "get_weather":
        return args in ({"city": c, "unit": u} for c in ("Paris", "Rome") for u in ("c", "f"))
    return call.function.name == "get_time" and args in ({"tz": "UTC"}, {"tz": "CET"})


def test_named_function(api_client, api_llm):
    r = ask(api_client, api_llm, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    m = r.choices[0].message
    assert m.content is None and len(m.tool_calls) == 1 and r.choices[0].finish_reason == "stop"
    assert m.tool_calls[0].function.name == "get_weather" and valid(m.tool_calls[0])
    assert m.tool_calls[0].id.startswith("call_") and m.tool_calls[0].type == "function"


def test_required_streamed_and_not(api_client, api_llm):
    r = ask(api_client, api_llm, tool_choice="required")
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and calls and all(valid(c) for c in calls)
    chunks = [c for c in ask(api_client, api_llm, tool_choice="required", stream=True) if c.choices]
    streamed = [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]
    assert [(t.function.name, t.function.arguments) for t in streamed] == [
        (c.function.name, c.function.arguments) for c in calls]
    assert [t.index for t in streamed] == list(range(len(calls)))
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    one = ask(api_client, api_llm, tool_choice="required", parallel_tool_calls=False, temperature=1.0, seed=4, n=3)
    assert all(len(c.message.tool_calls) == 1 and valid(c.message.tool_calls[0]) for c in one.choices)


def test_none_is_text_and_history_with_calls_is_taken(api_client, api_llm):
    r = ask(api_client, api_llm, tool_choice="none")
    assert r.choices[0].message.content and not r.choices[0].message.tool_calls
    history = ASK + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                          "arguments": '{"city": "Paris", "unit": "c"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees, sunny"}]
    r = ask(api_client, api_llm, messages=history, tool_choice="none")
    assert r.choices[0].message.content


BAD = {
    "auto": ({"tool_choice": "auto"}, 'tool_choice "auto"'),
    "tools without a choice (OpenAI's default: auto)": ({}, 'tool_choice "auto"'),
    "unknown function": ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "not among the tools"),
    "a choice without tools": ({"tools": None, "tool_choice": "required"}, "tool_choice needs tools"),
    "with response_format": ({"tool_choice": "required", "response_format": {"type": "json_object"}},
                             "drop response_format"),
    "tool type": ({"tools": [{"type": "retrieval", "function": WEATHER["function"]}], "tool_choice": "none"},
                  "tools.0.type"),
}


@pytest.mark.parametrize("extra, msg", BAD.values(), ids=BAD.keys())
def test_bad_tool_requests(api_server, api_llm, extra, msg):
    body = {"messages": ASK, "max_tokens": 4, "tools": [WEATHER, TIME]} | extra
    r = httpx.post(api_server.url + "/v1/chat/completions", json={k: v for k, v in body.items() if v is not None},
                   timeout=60)
    assert r.status_code == 400 and msg in r.json()["error"]["message"], r.text


# -- tool_choice "auto" with the hermes parser ---------------------------------------------------------------
@pytest.mark.parametrize("text, want", [
    ('Let me look.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>',
     ("Let me look.", [("f", '{"a": 1}')])),
    ('<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "g", "arguments": "{}"}</tool_call>',
     (None, [("f", "{}"), ("g", "{}")])),
    ("no calls here", ("no calls here", [])),
    ("<tool_call>not json</tool_call>", ("<tool_call>not json</tool_call>", [])),
    ('<tool_call>{"name": "f", "arguments": {}}', ('<tool_call>{"name": "f", "arguments": {}}', [])),  # unclosed
    ('x <tool_call>{"arguments": {}}</tool_call> <tool_call>{"name": "f"}</tool_call>',
     ('x <tool_call>{"arguments": {}}</tool_call>', [("f", "{}")])),
])
def test_parse_auto(text, want):
    assert parse_auto(text, "hermes") == want


@pytest.mark.parametrize("text, want", [
    ('{"name": "f", "parameters": {"a": 1}}', (None, [("f", '{"a": 1}')])),
    ('<|python_tag|>{"name": "f", "parameters": {}}; {"name": "g", "arguments": {"b": "x"}}',
     (None, [("f", "{}"), ("g", '{"b": "x"}')])),
    ("The capital is Paris.", ("The capital is Paris.", [])),
    ('{"name": "f", "parameters": {}} and then text', ('{"name": "f", "parameters": {}} and then text', [])),
    ('{"not": "a call"}', ('{"not": "a call"}', [])),
    ('{"name": "f", "parameters": {', ('{"name": "f", "parameters": {', [])),  # cut short
])
def test_parse_auto_llama3_json(text, want):
    assert parse_auto(text, "llama3_json") == want


@pytest.mark.parametrize("parser, text", [
    ("hermes", 'Sure, one moment.\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'),
    ("hermes", "Plain text, <tool_ but never a call."),
    ("llama3_json", '{"name": "f", "parameters": {}}'),
    ("llama3_json", "<|python_tag|>not json after all"),
    ("llama3_json", "Just an answer."),
])
def test_streamed_content_is_a_prefix_of_the_final_content(parser, text):
    final, _ = parse_auto(text, parser)
    for cut in range(len(text) + 1):
        assert (final or "").startswith(content_before_calls(text[:cut], parser)), cut
    assert content_before_calls("abc <tool_c", "hermes") == "abc"


CALL = ('Let me check\\.\n<tool_call>\n\\{"name": "get_weather", "arguments": \\{"city": "(Paris|Rome)", '
        '"unit": "(c|f)"\\}\\}\n</tool_call>')


@pytest.fixture(scope="module")
def hermes_client(api_llm, api_server, serve_app):
    with serve_app(build_app(api_llm, ServerConfig(tool_call_parser="hermes")), lifespan="off") as s:
        yield openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_auto_reads_hermes_calls_streamed_and_not(hermes_client, api_llm):
    # A regex makes the model write a Hermes call block (SmolLM2 was not trained to): the parse is the server's.
    r = ask(hermes_client, api_llm, max_tokens=128, extra_body={"structured_outputs": {"regex": CALL}})
    m, choice = r.choices[0].message, r.choices[0]
    assert m.content == "Let me check." and len(m.tool_calls) == 1 and valid(m.tool_calls[0])
    assert choice.finish_reason == "tool_calls"
    chunks = ask(hermes_client, api_llm, stream=True, max_tokens=128, extra_body={"structured_outputs": {"regex": CALL}})
    chunks = [c for c in chunks if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Let me check."
    streamed = [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]
    assert [(t.function.name, t.function.arguments) for t in streamed] == [
        (m.tool_calls[0].function.name, m.tool_calls[0].function.arguments)]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_auto_without_a_call_is_text(hermes_client, api_llm):
    r = ask(hermes_client, api_llm, max_tokens=12)  # (no tool_choice: OpenAI's default once tools are given)
    assert r.choices[0].message.content and not r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason in ("stop", "length")
    streamed = "".join(c.choices[0].delta.content or "" for c in ask(hermes_client, api_llm, max_tokens=12,
                                                                     stream=True) if c.choices)
    assert streamed == r.choices[0].message.content


def test_auto_reads_llama3_json_calls(api_llm, api_server, serve_app):
    with serve_app(build_app(api_llm, ServerConfig(tool_call_parser="llama3_json")), lifespan="off") as s:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        regex = '\\{"name": "get_weather", "parameters": \\{"city": "(Paris|Rome)", "unit": "(c|f)"\\}\\}'
        r = ask(client, api_llm, max_tokens=96, extra_body={"structured_outputs": {"regex": regex}})
        m = r.choices[0].message
        assert m.content is None and len(m.tool_calls) == 1 and valid(m.tool_calls[0])
        assert r.choices[0].finish_reason == "tool_calls"
        chunks = [c for c in ask(client, api_llm, stream=True, max_tokens=96,
                                 extra_body={"structured_outputs": {"regex": regex}}) if c.choices]
        assert not "".join(c.choices[0].delta.content or "" for c in chunks)
        streamed = [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]
        assert [(t.function.name, t.function.arguments) for t in streamed] == [
            (m.tool_calls[0].function.name, m.tool_calls[0].function.arguments)]


def test_unknown_tool_parser_fails_at_startup(api_llm):
    with pytest.raises(ValueError, match="unknown tool-call parser"):
        build_app(api_llm, ServerConfig(tool_call_parser="mistral9"))
