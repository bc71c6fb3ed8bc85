"""One sequence being generated (a request with n > 1 fans out into n of these)."""

from __future__ import annotations

import enum
import time

from .sampling_params import SamplingParams


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED_STOPPED = "stop"
    FINISHED_LENGTH = "length"
    FINISHED_ABORTED = "abort"

    @property
    def finished(self) -> bool:
        return self in (RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH, RequestStatus.FINISHED_ABORTED)


PLACEHOLDER = -1  # a sampled token the host does not know yet (async scheduling): it lives on the GPU


class Request:
    def __init__(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams,
                 max_tokens: int, eos_token_ids: frozenset[int] = frozenset(), arrival_time: float | None = None,
                 priority: int = 0):
        self.request_id = request_id
        self.priority = priority  # scheduler.policy=priority: lower values are served first
        self.prompt_token_ids = list(prompt_token_ids)
        self.params = params
        self.max_tokens = max_tokens  # resolved: never beyond the context
        self.eos_token_ids = eos_token_ids
        self.all_token_ids = list(prompt_token_ids)
        self.output_token_ids: list[int] = []
        self.output_logprobs: list = []
        # params.prompt_logprobs: per prompt position p, the logprob of prompt token p given those before it (a
        # SampledToken, set by the runner when the prefill computes position p - 1); position 0 stays None
        self.prompt_logprobs: list | None = None if params.prompt_logprobs is None else [None] * len(prompt_token_ids)
        self.num_computed_tokens = 0  # tokens whose KV is in the cache
        self.num_cached_tokens = 0  # prompt tokens found in the prefix cache at first schedule
        self.status = RequestStatus.WAITING
        self.stop_reason: str | int | None = None
        self.arrival_time = arrival_time if arrival_time is not None else time.monotonic()
        self.first_token_time: float | None = None
        self.num_preemptions = 0
        self.spec_token_ids: list[int] = []  # drafts proposed for the next step
        self.spec_probs = None  # their draft distribution [k, V], None for deterministic drafters
        self.last_spec: tuple[int, int] | None = None  # (drafts verified, accepted) in the last step
        self.num_placeholders = 0  # trailing tokens sampled on the GPU whose values are not here yet
        self.grammar = None  # params.structured_outputs: its structured.Grammar (the engine sets it)
        self.bad_word_ids: tuple[tuple[int, ...], ...] = ()  # params.bad_words tokenized (the engine sets them)

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    def append_output_token(self, token_id: int, logprobs=None) -> None:
        self.output_token_ids.append(token_id)
        self.all_token_ids.append(token_id)
        if self.grammar is not None:
            self.grammar.accept(token_id)
        if logprobs is not None:
            self.output_logprobs.append(logprobs)
        if self.first_token_time is None:
            self.first_token_time = time.monotonic()

    @property
    def num_known_output_tokens(self) -> int:
        return len(self.output_token_ids) - self.num_placeholders

    def append_placeholder(self) -> None:
        """A token sampled on the GPU this step; its value arrives with resolve_placeholder."""
        self.output_token_ids.append(PLACEHOLDER)
        self.all_token_ids.append(PLACEHOLDER)
        self.num_placeholders += 1

    def resolve_placeholder(self, token_id: int) -> None:
        """The oldest placeholder's value."""
        k = self.num_placeholders
        self.output_token_ids[-k] = token_id
        self.all_token_ids[-k] = token_id
        self.num_placeholders = k - 1
        if self.first_token_time is None:
            self.first_token_time = time.monotonic()

    def drop_placeholders(self) -> None:
        """Tokens a finished request had been scheduled to sample past its end: never emitted."""
        if self.num_placeholders:
            del self.output_token_ids[-self.num_placeholders:]
            del self.all_token_ids[-self.num_placeholders:]
            self.num_placeholders = 0

    def __repr__(self) -> str:
        return (f"Request({self.request_id!r}, prompt={self.num_prompt_tokens}, out={self.num_output_tokens}, "
                f"computed={self.num_computed_tokens}, {self.status.value})")
