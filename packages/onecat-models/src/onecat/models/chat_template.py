"""Chat templates rendered exactly as transformers' `apply_chat_template` renders them.

Same Jinja setup as transformers: an immutable sandbox with `trim_blocks`, `lstrip_blocks` and loop
controls; globals `raise_exception`, `strftime_now`, `namespace` (no underscore attributes) and `dict`;
a `tojson` filter that does not HTML-escape and takes `indent`/`separators`/`sort_keys`; `{% generation %}`
blocks are accepted (rendered as their body). Template variables: `messages`, `add_generation_prompt`,
`tools`, `documents`, the named special tokens and any extra keyword.

Every failure (bad syntax, `raise_exception`, a runtime error inside the template, malformed messages)
is a `ChatTemplateError`, a `ValueError`, whose message says what went wrong.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Names a message's reasoning may arrive under; templates read `reasoning_content` (gpt-oss: `thinking`).
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


class ChatTemplateError(ValueError):
    """The chat template cannot be compiled or rendered for these messages."""


class _GenerationBlock(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (marks assistant text for training masks): renders its body."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller: Any) -> str:
        return caller()


class _Namespace(jinja2.utils.Namespace):
    """Jinja's `namespace()` that refuses underscore-prefixed attributes (no route to CPython internals)."""

    def __init__(*args: Any, **kwargs: Any):  # same signature trick as jinja2.utils.Namespace
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"a namespace attribute may not start with '_' (got {name!r})")


class _DictFactory:
    """`dict(...)` and `dict.fromkeys(...)` for templates, without exposing the `dict` type itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


@lru_cache(maxsize=32)
def compile_chat_template(template: str) -> jinja2.Template:
    """The compiled template (cached per template text); a syntax error is a ChatTemplateError."""
    if not isinstance(template, str):
        raise ChatTemplateError(f"a chat template must be a str, not {type(template).__name__}")
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now,
                       dict=_DictFactory(), namespace=_Namespace)
    try:
        return env.from_string(template)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise ChatTemplateError(f"chat template has a Jinja syntax error at line {e.lineno}: {e.message}") from e


def _plain(value: Any) -> Any:
    """Template input rebuilt from plain JSON-like types (pydantic models and dataclasses become dicts),
    so the sandbox never sees methods of richer objects; anything else becomes '<TypeName>'."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):  # pydantic models
        return _plain(value.model_dump())
    if type(value).__module__ == "numpy" and callable(getattr(value, "item", None)):  # numpy scalars
        return _plain(value.item())
    return f"<{type(value).__name__}>"


def _prepare_messages(messages: Any) -> list[dict]:
    messages = _plain(getattr(messages, "messages", messages))
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ChatTemplateError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    prepared = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ChatTemplateError(f"message {index} must be a dict, not {type(message).__name__}")
        # As transformers: drop None values (APIs send content=None with tool calls) and copy reasoning
        # to `reasoning_content` (and `thinking`) from whichever name it came under.
        message = {k: v for k, v in message.items() if v is not None}
        reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        prepared.append(message)
    return prepared


def render_chat_template(template: str | None, messages: Any, *, add_generation_prompt: bool = False,
                         tools: list[dict] | None = None, documents: list[dict] | None = None,
                         continue_final_message: bool | str = False, **kwargs: Any) -> str:
    """Render `messages` (a list of dicts) with `template`, as transformers' `apply_chat_template(...,
    tokenize=False)`. Extra keywords (`bos_token`, `eos_token`, `enable_thinking`, ...) become template
    variables. `continue_final_message` leaves the last message open for the model to continue."""
    if template is None:
        raise ChatTemplateError("this model has no chat template; send a plain prompt or configure a chat template")
    if continue_final_message and add_generation_prompt:
        raise ChatTemplateError("continue_final_message and add_generation_prompt cannot be used together")
    compiled = compile_chat_template(template)
    chat = _prepare_messages(messages)
    if tools is not None:
        if not isinstance(tools, (list, tuple)) or not all(isinstance(t, Mapping) for t in tools):
            raise ChatTemplateError("tools must be a list of JSON-schema dicts")
        tools = _plain(list(tools))
    if documents is not None:
        if not isinstance(documents, (list, tuple)) or not all(isinstance(d, Mapping) for d in documents):
            raise ChatTemplateError("documents must be a list of dicts with 'title' and 'text' keys")
        documents = _plain(list(documents))

    final_text = None
    if continue_final_message:
        field = continue_final_message if isinstance(continue_final_message, str) else "content"
        final = chat[-1].get(field)
        if isinstance(final, str):
            final_text = final
            chat[-1] = {**chat[-1], field: final + _CONTINUE_TAG}
        elif isinstance(final, (list, tuple)):  # content blocks: continue the last text block
            for block in reversed(final):
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    final_text = block["text"]
                    block["text"] = final_text + _CONTINUE_TAG  # `chat` is a fresh copy (see _plain)
                    break
        if final_text is None:
            raise ChatTemplateError(f"continue_final_message: the final message has no text {field!r} to continue")

    try:
        rendered = compiled.render(messages=chat, tools=tools, documents=documents,
                                   add_generation_prompt=add_generation_prompt, **_plain(kwargs))
    except jinja2.exceptions.TemplateError as e:  # raise_exception(), undefined values, sandbox refusals
        raise ChatTemplateError(f"chat template error: {e.message or e}") from e
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError) as e:
        raise ChatTemplateError(f"chat template failed on these messages ({type(e).__name__}: {e})") from e

    if final_text is not None:
        tag = _CONTINUE_TAG.strip()
        if final_text.strip() not in rendered or tag not in rendered:
            raise ChatTemplateError("continue_final_message: the template does not reproduce the final message")
        at = rendered.rindex(tag)
        # If the template trimmed the message's trailing space the tag lost its space too: trim the same way.
        rendered = rendered[:at] if rendered[at:at + len(_CONTINUE_TAG)] == _CONTINUE_TAG else rendered[:at].rstrip()
    return rendered
