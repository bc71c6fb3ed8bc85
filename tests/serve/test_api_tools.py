"""Tool calling on /v1/chat/completions (onecat.serve.tool_calls) through the OpenAI client, on the embedded
SmolLM2 (CPU): tool_choice required / a named function decode valid calls, streamed and not; "none" is text;
"auto", which needs a model-specific parser, and malformed choices are 400s that say why."""

from __future__ import annotations

import json

import httpx
import pytest

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
