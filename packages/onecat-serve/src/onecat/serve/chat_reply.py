"""A chat reply's text -> the OpenAI assistant message: its think block apart (serve.reasoning_parser), its tool
calls (tool_choice required / named: the schema-decoded JSON; "auto": serve.tool_call_parser's blocks), the rest
as content; whole (`ReplyRules.message`) or as stream deltas that add up to it (`ChoiceStream`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from . import tool_calls
from .protocol import ChatCompletionRequest, ChatResponseMessage, DeltaMessage, DeltaToolCall, FunctionCall, ToolCall
from .reasoning import ReplySplit


@dataclass(frozen=True)
class ReplyRules:
    req: ChatCompletionRequest
    split: ReplySplit | None = None  # the request's reasoning split, with a reasoning parser
    tool_parser: str | None = None  # serve.tool_call_parser

    @property
    def tool_mode(self) -> str | None:
        return tool_calls.mode(self.req, self.tool_parser)

    @property
    def shapes_stream(self) -> bool:
        """Whether streamed text needs more than passing on (reasoning or tool calls)."""
        return self.split is not None or self.tool_mode is not None

    def message(self, text: str, finish_reason: str | None) -> tuple[ChatResponseMessage, str | None]:
        """A finished choice's message and finish reason."""
        reasoning, content = self.split(text) if self.split is not None else (None, text)
        how, calls = self.tool_mode, None
        if how == "auto":
            content, calls = tool_calls.parse_auto(content, self.tool_parser) if content is not None else (None, [])
        elif how is not None and content is not None:  # required / named: the whole reply is the calls' JSON
            calls = tool_calls.parse(content, self.req, how)  # (None: cut short, stays text)
            if calls is not None:
                content = None
        message = ChatResponseMessage(content=content, reasoning=reasoning, reasoning_content=reasoning)
        if calls:
            message.tool_calls = [ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", function=FunctionCall(name=n, arguments=a))
                                  for n, a in calls]
            if how != "named" and finish_reason == "stop":  # (a named call keeps "stop", as vLLM)
                finish_reason = "tool_calls"
        return message, finish_reason


class ChoiceStream:
    """One streamed choice under ReplyRules: `next` takes the choice's text so far and gives the delta to send
    (None: nothing yet). Reasoning and content go out as they grow; required / named calls whole at the end;
    "auto" streams the content before the first call block and sends the calls at the end."""

    def __init__(self, rules: ReplyRules) -> None:
        self.rules, self.reasoning_sent, self.content_sent = rules, 0, 0

    def next(self, text: str, finish_reason: str | None) -> tuple[DeltaMessage | None, str | None]:
        rules, final, calls = self.rules, finish_reason is not None, None
        how = rules.tool_mode
        if final:
            message, finish_reason = rules.message(text, finish_reason)
            reasoning, content, calls = message.reasoning, message.content, message.tool_calls
        elif how in ("required", "named"):
            return None, None
        else:
            reasoning, content = rules.split(text, final=False) if rules.split is not None else (None, text)
            if how == "auto" and content is not None:
                content = tool_calls.content_before_calls(content, rules.tool_parser)
        r, c = (reasoning or "")[self.reasoning_sent:], (content or "")[self.content_sent:]
        self.reasoning_sent += len(r)
        self.content_sent += len(c)
        if not (r or c or calls or final):
            return None, None
        deltas = [DeltaToolCall(index=i, **t.model_dump()) for i, t in enumerate(calls or [])]
        return DeltaMessage(content=c or None, reasoning=r or None, reasoning_content=r or None,
                            tool_calls=deltas or None), finish_reason
