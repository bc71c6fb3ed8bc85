"""What a request asks of sampling and stopping. Validated on construction: bad values raise
ValueError with a message fit for an API error."""

from __future__ import annotations

from dataclasses import dataclass, field

from .structured import StructuredOutputs


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: off
    min_p: float = 0.0
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    max_tokens: int | None = 16  # None: up to the context length
    min_tokens: int = 0
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    include_stop_str_in_output: bool = False
    logprobs: int | None = None  # number of top logprobs per generated token (0: only the chosen one)
    prompt_logprobs: int | None = None  # logprob of every prompt token given the ones before it, and this many top
    skip_special_tokens: bool = True
    structured_outputs: StructuredOutputs | None = None  # the output must match a JSON schema, regex, ... (xgrammar)
    logit_bias: dict[int, float] | None = None  # token id -> added to its logit (OpenAI's, in [-100, 100])
    allowed_token_ids: list[int] | None = None  # only these may be generated (vLLM's)
    bad_words: list[str] = field(default_factory=list)  # words never generated, at a word's start or inside text
    truncate_prompt_tokens: int | None = None  # keep only the prompt's last k tokens

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = [s for s in (self.stop or [])]
        self.stop_token_ids = list(self.stop_token_ids or [])
        if isinstance(self.bad_words, str):
            self.bad_words = [self.bad_words]
        self.bad_words = list(self.bad_words or [])
        if self.top_k == -1:
            self.top_k = 0
        self.validate()

    def validate(self) -> None:
        def bad(msg: str) -> None:
            raise ValueError(msg)

        if not isinstance(self.n, int) or self.n < 1:
            bad(f"n must be an integer >= 1, got {self.n!r}")
        if self.seed is not None and not -(2**63) <= self.seed < 2**63:
            bad(f"seed must fit in a signed 64-bit integer, got {self.seed}")
        if self.temperature < 0:
            bad(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            bad(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            bad(f"top_k must be >= 0 (or -1 for off), got {self.top_k}")
        if not 0.0 <= self.min_p <= 1.0:
            bad(f"min_p must be in [0, 1], got {self.min_p}")
        if not -2.0 <= self.presence_penalty <= 2.0:
            bad(f"presence_penalty must be in [-2, 2], got {self.presence_penalty}")
        if not -2.0 <= self.frequency_penalty <= 2.0:
            bad(f"frequency_penalty must be in [-2, 2], got {self.frequency_penalty}")
        if self.repetition_penalty <= 0:
            bad(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.max_tokens is not None and self.max_tokens < 1:
            bad(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.min_tokens < 0 or (self.max_tokens is not None and self.min_tokens > self.max_tokens):
            bad(f"min_tokens must be in [0, max_tokens], got {self.min_tokens}")
        if self.logprobs is not None and not 0 <= self.logprobs <= 20:
            bad(f"logprobs must be in [0, 20], got {self.logprobs}")
        if self.prompt_logprobs is not None and not 0 <= self.prompt_logprobs <= 20:
            bad(f"prompt_logprobs must be in [0, 20], got {self.prompt_logprobs}")
        for tid, bias in (self.logit_bias or {}).items():
            if not isinstance(tid, int) or isinstance(tid, bool) or tid < 0:
                bad(f"logit_bias keys must be token ids (integers >= 0), got {tid!r}")
            if not isinstance(bias, (int, float)) or isinstance(bias, bool) or not -100 <= bias <= 100:
                bad(f"logit_bias values must be numbers in [-100, 100], got {bias!r} for token {tid}")
        if self.allowed_token_ids is not None:
            if not self.allowed_token_ids:
                bad("allowed_token_ids must not be empty (leave it out to allow every token)")
            if any(not isinstance(t, int) or isinstance(t, bool) or t < 0 for t in self.allowed_token_ids):
                bad("allowed_token_ids must be token ids (integers >= 0)")
        if any(not isinstance(w, str) or not w.strip() for w in self.bad_words):
            bad("bad_words must be non-blank strings")
        if self.truncate_prompt_tokens is not None and (
                not isinstance(self.truncate_prompt_tokens, int) or self.truncate_prompt_tokens < 1):
            bad(f"truncate_prompt_tokens must be an integer >= 1, got {self.truncate_prompt_tokens!r}")
        if any(not isinstance(s, str) or not s for s in self.stop):
            bad("stop must be a non-empty string or a list of non-empty strings")
        if len(self.stop) > 16:
            bad("at most 16 stop strings")

    @property
    def greedy(self) -> bool:
        return self.temperature < 1e-5
