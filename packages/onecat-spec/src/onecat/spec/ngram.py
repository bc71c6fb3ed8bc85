"""Prompt lookup (n-gram) drafting: find the most recent earlier occurrence of the context's
last n tokens and propose the tokens that followed it. Adaptive per request: n shrinks from
max_n to min_n until a match is found, and k follows recent acceptance (more drafts after full
acceptance, fewer after early rejections)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .proposer import Proposal, ProposeRequest


@dataclass
class _State:
    k: int
    history: list[float] = field(default_factory=list)


class NgramProposer:
    name = "ngram"

    def __init__(self, num_speculative_tokens: int = 5, min_n: int = 2, max_n: int = 4, adaptive: bool = True,
                 min_k: int = 1, window: int = 8):
        if not 1 <= min_n <= max_n:
            raise ValueError(f"need 1 <= min_n <= max_n, got {min_n}, {max_n}")
        if num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        self.max_k, self.min_n, self.max_n = num_speculative_tokens, min_n, max_n
        self.adaptive, self.min_k, self.window = adaptive, min_k, window
        self.states: dict[str, _State] = {}

    def _state(self, rid: str) -> _State:
        return self.states.setdefault(rid, _State(self.max_k))

    def propose(self, request_id: str, token_ids: list[int], max_tokens: int) -> Proposal:
        k = min(self._state(request_id).k, max_tokens)
        if k <= 0:
            return Proposal([])
        n_tokens = len(token_ids)
        for n in range(min(self.max_n, n_tokens - 1), self.min_n - 1, -1):
            tail = token_ids[n_tokens - n:]
            # most recent earlier occurrence (not the tail itself)
            for start in range(n_tokens - n - 1, -1, -1):
                if token_ids[start:start + n] == tail:
                    follow = token_ids[start + n:start + n + k]
                    if follow:
                        return Proposal(list(follow))
                    break
        return Proposal([])

    def propose_batch(self, requests: list[ProposeRequest]) -> list[Proposal]:
        return [self.propose(r.request_id, r.token_ids, r.max_tokens) for r in requests]

    def observe(self, request_id: str, proposed: int, accepted: int) -> None:
        if not self.adaptive or proposed == 0:
            return
        st = self._state(request_id)
        st.history = (st.history + [accepted / proposed])[-self.window:]
        rate = sum(st.history) / len(st.history)
        if accepted == proposed and rate > 0.6:
            st.k = min(self.max_k, st.k + 1)
        elif rate < 0.3:
            st.k = max(self.min_k, st.k - 1)

    def release(self, request_id: str) -> None:
        self.states.pop(request_id, None)
