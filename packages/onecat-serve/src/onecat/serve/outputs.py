"""What the engine hands back per request, after each step (streaming) or at the end."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Logprob:
    token_id: int
    token: str
    logprob: float | None  # None: a prompt's first token (nothing before it to predict it)


@dataclass
class TokenLogprobs:
    """The chosen token's logprob and the top alternatives at one position."""

    chosen: Logprob
    top: list[Logprob] = field(default_factory=list)


@dataclass
class CompletionOutput:
    index: int
    text: str  # all text so far (stop string excluded unless asked for)
    token_ids: list[int]
    finish_reason: str | None = None  # "stop" | "length" | "abort" | None while running
    stop_reason: str | int | None = None  # the stop string or token id that ended it
    logprobs: list[TokenLogprobs] | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache
    # SamplingParams.prompt_logprobs: per prompt token its logprob given the tokens before it (None for the first),
    # once the prompt has been computed (None before, and when not asked)
    prompt_logprobs: list[TokenLogprobs | None] | None = None
    metrics: dict = field(default_factory=dict)  # arrival/first-token/finish times (time.monotonic)
