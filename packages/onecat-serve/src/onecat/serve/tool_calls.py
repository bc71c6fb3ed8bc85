"""Tool calling on /v1/chat/completions, as vLLM does it without a model-specific tool-call parser: with
tool_choice "required" or a named function, the reply is decoded under a JSON schema (structured.py), so it
is a call whatever the model: a named function's arguments object, or "required"'s list of
{"name", "parameters"} (one at most without parallel_tool_calls), then returned as the message's tool_calls.
tool_choice "auto" (OpenAI's default once tools are given) needs a parser for the model's own tool-call
syntax (serve.tool_call_parser, as vLLM's --tool-call-parser): "hermes" reads the <tool_call>{"name": ...,
"arguments": {...}}</tool_call> blocks that Qwen2.5 / Qwen3 / Hermes models write, the text before them being
the message's content; "llama3_json" reads Llama 3.x's replies that are JSON calls ({"name": ..., "parameters":
{...}}, several separated by ';', after an optional <|python_tag|>). Without a parser "auto" is refused with a
400 that says what works, as vLLM refuses it.
"none" (or no tools) generates text; the tools still reach the chat template, which may show them to the model.
"""

from __future__ import annotations

import copy
import json
import re

from .reasoning import drop_partial_tag
from .structured import StructuredOutputs

EMPTY_OBJECT = {"type": "object", "properties": {}}
PARSERS = ("hermes", "llama3_json")
HERMES_TAGS = ("<tool_call>", "</tool_call>")  # around each call block
LLAMA3_TAG = "<|python_tag|>"  # Llama 3.x may open its calls with it (a special token: kept only when not skipped)


def check_parser(name: str | None) -> str | None:
    if name is not None and name not in PARSERS:
        raise ValueError(f"unknown tool-call parser {name!r}; known: {', '.join(sorted(PARSERS))}")
    return name


def mode(req, parser: str | None = None) -> str | None:
    """'named', 'required', 'auto' (with a parser) or None (text) for a ChatCompletionRequest; ValueError for
    what cannot be served."""
    choice = req.tool_choice
    if not req.tools:
        if choice not in (None, "none"):
            raise ValueError("tool_choice needs tools")
        return None
    if (choice is None or choice == "auto") and parser is not None:
        return "auto"
    if choice is None or choice == "auto":
        raise ValueError('tool_choice "auto" (the default when tools are given) needs a parser of this model\'s '
                         'tool-call syntax: start the server with serve.tool_call_parser=hermes for models that '
                         'write <tool_call> blocks, or pass tool_choice "required", '
                         '{"type": "function", "function": {"name": ...}} or "none"')
    if choice == "none":
        return None
    if choice == "required":
        return "required"
    names = [t.function.name for t in req.tools]
    if choice.function.name not in names:
        raise ValueError(f"tool_choice names {choice.function.name!r}, which is not among the tools {names}")
    return "named"


def constraint(req, parser: str | None = None) -> StructuredOutputs | None:
    """The JSON schema the reply must follow for the request's tool_choice, or None (free text)."""
    how = mode(req, parser)
    if how in (None, "auto"):
        return None
    if how == "named":
        tool = next(t for t in req.tools if t.function.name == req.tool_choice.function.name)
        return StructuredOutputs(json=tool.function.parameters or EMPTY_OBJECT)
    defs, alternatives = {}, []
    for t in req.tools:
        params = copy.deepcopy(t.function.parameters or EMPTY_OBJECT)
        defs.update(params.pop("$defs", {}))  # (refs are "#/$defs/...": hoisted to the top, as vLLM does)
        alternatives.append({"properties": {"name": {"type": "string", "enum": [t.function.name]},
                                            "parameters": params}, "required": ["name", "parameters"]})
    schema = {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": alternatives}}
    if not req.parallel_tool_calls:
        schema["maxItems"] = 1
    if defs:
        schema["$defs"] = defs
    return StructuredOutputs(json=schema)


def parse(text: str, req, how: str) -> list[tuple[str, str]] | None:
    """(name, arguments JSON) of each call in a reply decoded under constraint(req), whose mode(req) is `how`; None
    if the reply is not complete JSON (cut by max_tokens)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if how == "named":
        return [(req.tool_choice.function.name, json.dumps(value, ensure_ascii=False))]
    return [(c["name"], json.dumps(c["parameters"], ensure_ascii=False)) for c in value]


def _call(value) -> tuple[str, str] | None:
    """(name, arguments JSON) of a decoded call object ({"name", "arguments" or "parameters"}), else None."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    args = value.get("arguments", value.get("parameters", {}))
    return value["name"], args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def parse_auto(text: str, parser: str) -> tuple[str | None, list[tuple[str, str]]]:
    """(content, calls) of a free reply (name, arguments JSON per call). hermes: each complete, valid block in
    order, the text before the first as content (less trailing space; None if blank). llama3_json: a reply that is
    (after an optional <|python_tag|>) one or more call objects separated by ';' is all calls. Anything else, a
    malformed block included, stays text."""
    if parser == "llama3_json":
        body = text.strip().removeprefix(LLAMA3_TAG).lstrip()
        calls, at, dec = [], 0, json.JSONDecoder()
        while body.startswith("{"):
            try:
                value, end = dec.raw_decode(body, at)
            except ValueError:
                return text, []
            if (call := _call(value)) is None:
                return text, []
            calls.append(call)
            rest = body[end:].lstrip()
            if not rest:
                return None, calls
            if not rest.startswith(";"):
                return text, []
            body, at = rest[1:].lstrip(), 0
        return text, []
    start, end = HERMES_TAGS
    calls, first = [], None
    for m in re.finditer(re.escape(start) + r"(.*?)" + re.escape(end), text, re.S):
        try:
            call = _call(json.loads(m.group(1)))
        except ValueError:
            continue
        if call is not None:
            calls.append(call)
            first = m.start() if first is None else first
    if not calls:
        return text, []
    return text[:first].rstrip() or None, calls


def content_before_calls(text: str, parser: str) -> str:
    """What a streamed "auto" reply can send as content before it ends, always a prefix of the final content.
    hermes: the text before its first call block, less a tail that may begin the block's tag and less trailing
    space (which parse_auto drops before a call). llama3_json: nothing while the reply may be calls (it begins
    with '{' or the tag, or is still a prefix of the tag), else all of it."""
    if parser == "llama3_json":
        lead = text.lstrip()
        if lead.startswith(("{", LLAMA3_TAG)) or LLAMA3_TAG.startswith(lead):
            return ""
        return text
    start = HERMES_TAGS[0]
    at = text.find(start)
    return (text[:at] if at >= 0 else drop_partial_tag(text, start)).rstrip()
