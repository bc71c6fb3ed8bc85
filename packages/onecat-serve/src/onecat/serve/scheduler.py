"""Continuous batching with chunked prefill under a token budget, prefix caching and preemption
by recompute. Pure CPU; its one output message to the runner is SchedulerOutput.

There are no prefill/decode phases: each step, every running request gets the tokens it has
not computed yet (its prompt remainder, or the one token sampled last step), as far as the
token budget allows, then waiting requests are admitted. With `prefill_first`, a step in which a
waiting prompt can be admitted, or a running one is still in its prompt, leaves the decode rows out
(prompt chunks only). When the KV pool runs dry, the most recently admitted request is preempted:
its blocks are freed and it recomputes from scratch (its prompt plus what it has generated) when it
is admitted again.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .config import SchedulerConfig
from .kv_cache_manager import KVCacheManager
from .request import Request, RequestStatus


@dataclass
class ScheduledRequest:
    request: Request
    token_ids: list[int]  # the tokens fed this step
    start_pos: int  # position of token_ids[0] (= tokens already in the cache)
    block_ids: list[int]  # the request's whole block table
    sample: bool  # the step reaches the end of the known tokens: sample the next one
    draft_token_ids: list[int] = field(default_factory=list)  # fed after token_ids, to verify


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledRequest] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)

    @property
    def num_batched_tokens(self) -> int:
        return sum(len(s.token_ids) for s in self.scheduled)

    @property
    def is_empty(self) -> bool:
        return not self.scheduled


class Scheduler:
    def __init__(self, config: SchedulerConfig, kv: KVCacheManager, max_model_len: int):
        if config.policy not in ("fcfs", "priority"):
            raise ValueError(f"scheduler.policy must be fcfs or priority, got {config.policy!r}")
        self.config = config
        self.by_priority = config.policy == "priority"
        self.kv = kv
        self.max_model_len = max_model_len
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        self.num_preemptions = 0
        self.spec_proposed = 0  # drafts verified
        self.spec_accepted = 0
        self.spec_accepted_at: dict[int, int] = {}  # draft position -> times accepted

    def add(self, req: Request) -> None:
        self.requests[req.request_id] = req
        self._enqueue(req, front=False)

    @staticmethod
    def _rank(req: Request) -> tuple:
        return req.priority, req.arrival_time

    def _enqueue(self, req: Request, front: bool) -> None:
        """Into the waiting queue: fcfs at the back (new) or the front (preempted); by priority at its rank."""
        if not self.by_priority:
            self.waiting.appendleft(req) if front else self.waiting.append(req)
            return
        at = next((i for i, w in enumerate(self.waiting) if self._rank(req) < self._rank(w)), len(self.waiting))
        self.waiting.insert(at, req)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # -- schedule -----------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        if self.config.prefill_first and (self._can_admit_next() or not all(map(self._decoding, self.running))):
            out = self._schedule(prompts_only=True)
            if not out.is_empty or out.preempted:
                return out
        return self._schedule(prompts_only=False)  # (a prompts-only step that found nothing changed nothing)

    def _can_admit_next(self) -> bool:
        """A seat and the KV blocks of its first chunk are free for the next waiting request (its prefix hits left
        out: this may say no where admission would succeed, never the reverse)."""
        if not self.waiting or len(self.running) >= self.config.max_num_seqs:
            return False
        req, budget = self.waiting[0], self.config.max_num_batched_tokens
        n = min(req.num_tokens, budget) if self.config.enable_chunked_prefill else req.num_tokens
        return n <= budget and -(-n // self.kv.block_size) <= self.kv.num_free_blocks

    @staticmethod
    def _decoding(req: Request) -> bool:
        """Past its prompt and its recompute: the request's next step is one token (and its drafts)."""
        return req.num_computed_tokens >= req.num_prompt_tokens and req.num_tokens - req.num_computed_tokens <= 1

    def _schedule(self, prompts_only: bool) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.config.max_num_batched_tokens
        scheduled: dict[str, int] = {}

        i = 0
        drafts: dict[str, int] = {}
        if self.by_priority:  # the budget goes to the best-ranked first, and the worst-ranked is preempted first
            self.running.sort(key=self._rank)
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = min(req.num_tokens - req.num_computed_tokens, budget)
            if (n <= 0 or (req.num_placeholders and self._length_reached(req, 0))  # done, its last token in flight
                    or (prompts_only and self._decoding(req))):  # prefill_first: decode rows wait for the prompts
                i += 1
                continue
            k = self._num_drafts(req, n, budget)
            while not self.kv.allocate_slots(req, n + k):
                victim = self.running.pop()
                self._preempt(victim)
                out.preempted.append(victim.request_id)
                scheduled.pop(victim.request_id, None)
                if victim is req:
                    break
            else:
                scheduled[req.request_id] = n
                drafts[req.request_id] = k
                budget -= n + k
                i += 1

        while (self.waiting and budget > 0 and not out.preempted
               and len(self.running) < self.config.max_num_seqs):
            req = self.waiting[0]
            hits, num_hit = ([], 0)
            if req.num_computed_tokens == 0 and req.prompt_logprobs is None:  # (prompt logprobs: every position runs)
                hits, num_hit = self.kv.get_computed_blocks(req)
            n = req.num_tokens - num_hit
            if n > budget:
                if not self.config.enable_chunked_prefill:
                    break
                n = budget
            if not self.kv.allocate_slots(req, n, hits):
                break
            self.waiting.popleft()
            req.num_computed_tokens = num_hit
            if req.status == RequestStatus.WAITING:
                req.num_cached_tokens = num_hit
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            scheduled[req.request_id] = n
            budget -= n

        for req in self.running:
            n = scheduled.get(req.request_id)
            if n:
                start = req.num_computed_tokens
                k = drafts.get(req.request_id, 0)
                out.scheduled.append(ScheduledRequest(
                    req, req.all_token_ids[start:start + n], start, self.kv.block_ids(req.request_id),
                    sample=start + n == req.num_tokens, draft_token_ids=req.spec_token_ids[:k]))
        return out

    def _num_drafts(self, req: Request, n: int, budget: int) -> int:
        """Drafts verified this step: only when the step ends at the last known token, within
        the token budget, the context, and the tokens the request may still produce."""
        if not req.spec_token_ids or req.num_computed_tokens + n != req.num_tokens:
            return 0
        room = min(budget - n, self.max_model_len - req.num_tokens, req.max_tokens - req.num_output_tokens - 1)
        return max(0, min(len(req.spec_token_ids), room))

    def _preempt(self, req: Request) -> None:
        self.kv.free(req)
        req.num_computed_tokens = 0
        req.status = RequestStatus.PREEMPTED
        req.num_preemptions += 1
        self.num_preemptions += 1
        self._enqueue(req, front=True)

    # -- after the step -----------------------------------------------------------------------
    def update_from_output(self, out: SchedulerOutput, sampled: dict[str, list[tuple[int, object]]]) -> list[Request]:
        """Advance computed tokens, append sampled tokens (accepted drafts and the token after
        them), apply token-level stops inside the accepted run. Returns the requests that got new
        tokens (finished ones included). Rejected drafts' KV slots are simply recomputed later:
        num_computed_tokens never counts them."""
        updated = []
        for s in out.scheduled:
            req = s.request
            if req.status != RequestStatus.RUNNING:
                continue
            req.num_computed_tokens += len(s.token_ids)
            req.spec_token_ids, req.spec_probs = [], None
            if not s.sample:
                continue
            emitted = sampled[req.request_id]
            accepted = len(emitted) - 1
            if s.draft_token_ids:
                req.last_spec = (len(s.draft_token_ids), accepted)
                self.spec_proposed += len(s.draft_token_ids)
                self.spec_accepted += accepted
                for pos in range(accepted):
                    self.spec_accepted_at[pos] = self.spec_accepted_at.get(pos, 0) + 1
            req.num_computed_tokens += accepted
            for token, logprobs in emitted:
                req.append_output_token(token, logprobs)
                self._check_token_stop(req, token)
                if req.status.finished:
                    break
            updated.append(req)
            if req.status.finished:
                self._free(req)
        return updated

    # -- asynchronous scheduling: step n+1 is scheduled before step n's tokens reach the host -----
    def update_provisional(self, out: SchedulerOutput) -> None:
        """Right after launching `out`: advance computed tokens and give each sampling request a
        placeholder for the token the GPU is drawing, so the next step can be scheduled now (it
        feeds the placeholder, which the runner takes from the device)."""
        for s in out.scheduled:
            req = s.request
            if req.status != RequestStatus.RUNNING:
                continue
            req.num_computed_tokens += len(s.token_ids)
            if s.sample:
                req.append_placeholder()

    def resolve(self, out: SchedulerOutput, tokens: dict[str, int]) -> list[Request]:
        """Step `out`'s sampled tokens have arrived: fill each request's oldest placeholder and apply
        the token-level stops as update_from_output does. A request that stops here drops the
        placeholders scheduled after it (never emitted; their KV slots are freed with it)."""
        updated = []
        for s in out.scheduled:
            req = s.request
            if not s.sample or req.num_placeholders == 0:  # finished meanwhile (stop, abort): dropped
                continue
            token = tokens[req.request_id]
            req.resolve_placeholder(token)  # (a finished request has none left: _free dropped them)
            updated.append(req)
            self._check_token_stop(req, token)
            if req.status.finished:
                self._free(req)
        return updated

    def _length_reached(self, req: Request, pending: int) -> bool:
        """max_tokens or the context reached, not counting the last `pending` tokens."""
        return req.num_output_tokens - pending >= req.max_tokens or req.num_tokens - pending >= self.max_model_len

    def _check_token_stop(self, req: Request, token: int) -> None:
        """Stops at `token`, the request's newest known token (placeholders after it not counted)."""
        p = req.params
        if req.grammar is not None and req.grammar.terminated:  # the structured output is complete
            req.status = RequestStatus.FINISHED_STOPPED
            return
        if req.num_known_output_tokens >= p.min_tokens:
            if token in p.stop_token_ids:
                req.status, req.stop_reason = RequestStatus.FINISHED_STOPPED, token
                return
            if not p.ignore_eos and token in req.eos_token_ids:
                req.status = RequestStatus.FINISHED_STOPPED
                return
        if self._length_reached(req, req.num_placeholders):
            req.status = RequestStatus.FINISHED_LENGTH

    def finish(self, request_id: str, status: RequestStatus, stop_reason=None) -> None:
        """End a request from outside (stop string matched, client gone)."""
        req = self.requests.get(request_id)
        if req is None or req.status.finished:
            return
        req.status, req.stop_reason = status, stop_reason
        self._free(req)

    def _free(self, req: Request) -> None:
        req.drop_placeholders()
        if req in self.running:
            self.running.remove(req)
        else:
            try:
                self.waiting.remove(req)
            except ValueError:
                pass
        self.kv.free(req)
        self.requests.pop(req.request_id, None)
