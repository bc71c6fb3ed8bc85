"""Proposers suggest up to k next tokens per request from its context (and optionally from
the target's hidden states, for MTP heads and block drafters).

The engine calls `propose_batch` once per step with every request that is decoding, then
`observe` with what the verifier accepted, and `release` when a request finishes, is aborted or
preempted (a proposer with its own KV cache frees its blocks there)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch

# (draft logits [V] float32, drafts chosen so far this step, the request's draft generator)
#   -> (token, its draft distribution q [V], or None when the choice is deterministic)
Chooser = Callable[[torch.Tensor, list[int], "torch.Generator | None"], tuple[int, "torch.Tensor | None"]]


@dataclass
class Proposal:
    token_ids: list[int]
    probs: torch.Tensor | None = None  # [len(token_ids), V] draft distribution; None = deterministic


@dataclass
class ProposeRequest:
    """One decoding request as a proposer sees it."""

    request_id: str
    token_ids: list[int]  # every confirmed token (prompt + output)
    max_tokens: int  # drafts allowed this step
    choose: Chooser | None = None  # model drafters: how to pick a token (None: argmax, deterministic)
    seed: int | None = None  # the request's seed (model drafters seed their own generator from it)


def argmax_choice(logits: torch.Tensor, drafted: list[int], generator) -> tuple[int, None]:
    return int(torch.argmax(logits)), None


class Proposer(Protocol):
    name: str

    def propose_batch(self, requests: list[ProposeRequest]) -> list[Proposal]:
        """Up to r.max_tokens draft tokens continuing each r.token_ids (may be empty)."""

    def observe(self, request_id: str, proposed: int, accepted: int) -> None:
        """Feedback after verification, for adaptive proposers."""

    def release(self, request_id: str) -> None:
        """The request finished, was aborted or preempted: drop its state (and its KV blocks)."""
