"""Tool calling on /v1/chat/completions, as vLLM does it without a model-specific tool-call parser: with
tool_choice "required" or a named function, the reply is decoded under a JSON schema (structured.py), so it
is a call whatever the model: a named function's arguments object, or "required"'s list of
{"name", "parameters"} (one at most without parallel_tool_calls), then returned as the message's tool_calls.
tool_choice "auto" (OpenAI's default once tools are given) needs a parser for the model's own tool-call
syntax, which onecat does not have: it is refused with a 400 that says what works, as vLLM refuses it when
started without --tool-call-parser. "none" (or no tools) generates text; the tools still reach the chat
template, which may show them to the model.
"""

from __future__ import annotations

import copy
import json

from .structured import StructuredOutputs

EMPTY_OBJECT = {"type": "object", "properties": {}}


def mode(req) -> str | None:
    """'named', 'required' or None (text) for a ChatCompletionRequest; ValueError for what cannot be served."""
    choice = req.tool_choice
    if not req.tools:
        if choice not in (None, "none"):
            raise ValueError("tool_choice needs tools")
        return None
    if choice is None or choice == "auto":
        raise ValueError('tool_choice "auto" (the default when tools are given) needs a parser of this model\'s '
                         'tool-call syntax, which onecat does not have; pass tool_choice "required", '
                         '{"type": "function", "function": {"name": ...}} or "none"')
    if choice == "none":
        return None
    if choice == "required":
        return "required"
    names = [t.function.name for t in req.tools]
    if choice.function.name not in names:
        raise ValueError(f"tool_choice names {choice.function.name!r}, which is not among the tools {names}")
    return "named"


def constraint(req) -> StructuredOutputs | None:
    """The JSON schema the reply must follow for the request's tool_choice, or None (free text)."""
    how = mode(req)
    if how is None:
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
