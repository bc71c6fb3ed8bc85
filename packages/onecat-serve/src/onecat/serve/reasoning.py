"""Reasoning outputs, as vLLM's `--reasoning-parser`: a thinking model's reply split into its reasoning (between
`<think>` and `</think>`) and its content (after), returned as the message's `reasoning` (and the older name
`reasoning_content`) beside `content`.

The reply is in reasoning from its first token when the rendered prompt leaves a think block open (Qwen3.5 and
DeepSeek-R1 templates write `<think>` into the generation prompt; Qwen3's `enable_thinking=false` writes a closed,
empty block), or when the reply itself begins with `<think>` (Qwen3's older templates). A reply that never closes
its block (cut short by max_tokens) is all reasoning. Streaming sends the same split as it grows: a tail that may
be the start of a tag is held back until the next text shows what it is, and sent at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

PARSERS = {"qwen3": ("<think>", "</think>"), "deepseek_r1": ("<think>", "</think>")}


@dataclass(frozen=True)
class ReasoningParser:
    start: str
    end: str

    @classmethod
    def named(cls, name: str | None) -> ReasoningParser | None:
        if name is None:
            return None
        if name not in PARSERS:
            raise ValueError(f"unknown reasoning parser {name!r}; known: {', '.join(sorted(PARSERS))}")
        return cls(*PARSERS[name])

    def opens_in_prompt(self, prompt_text: str) -> bool:
        """Whether the prompt ends inside a think block (its last start tag after its last end tag)."""
        return prompt_text.rfind(self.start) > prompt_text.rfind(self.end)

    def split(self, text: str, open_at_start: bool, final: bool = True) -> tuple[str | None, str | None]:
        """(reasoning, content) of a reply's text so far; None where a part has not begun. Not `final`: a tail
        that may begin a tag is left out of both, so that growing text only ever extends each part."""
        body = text
        if not open_at_start:
            lead = text.lstrip()
            if lead.startswith(self.start):
                body = lead[len(self.start):]
            elif not final and lead and self.start.startswith(lead):
                return None, None  # maybe "<th" of "<think>": wait for more
            else:
                return None, text
        at = body.find(self.end)
        if at < 0:
            return (body if final else drop_partial_tag(body, self.end)) or None, None
        return body[:at], body[at + len(self.end):] or None


def drop_partial_tag(text: str, tag: str) -> str:
    """text less a tail that is a proper prefix of tag (what a stream holds back until it knows); the tool-call
    parsers' streaming uses it too."""
    for k in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:k]):
            return text[:-k]
    return text


@dataclass(frozen=True)
class ReplySplit:
    """One request's split: its parser, and whether its prompt left a think block open."""
    parser: ReasoningParser
    open_at_start: bool

    def __call__(self, text: str, final: bool = True) -> tuple[str | None, str | None]:
        return self.parser.split(text, self.open_at_start, final)

