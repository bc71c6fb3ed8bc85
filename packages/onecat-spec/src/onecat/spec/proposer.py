"""Proposers suggest up to k next tokens per request from its context (and optionally from
the target's hidden states, for MTP heads and block drafters)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass
class Proposal:
    token_ids: list[int]
    probs: torch.Tensor | None = None  # [len(token_ids), V] draft distribution; None = deterministic


class Proposer(Protocol):
    name: str

    def propose(self, request_id: str, token_ids: list[int], max_tokens: int) -> Proposal:
        """Up to max_tokens draft tokens continuing token_ids (may be empty)."""

    def observe(self, request_id: str, proposed: int, accepted: int) -> None:
        """Feedback after verification, for adaptive proposers."""

    def release(self, request_id: str) -> None:
        """The request finished: drop its state."""
