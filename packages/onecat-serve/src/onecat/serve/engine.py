"""LLMEngine: step() = schedule -> run -> postprocess.

A request with n > 1 becomes n sequences (ids "<id>#<i>") that share the prompt's KV blocks
through the prefix cache; their outputs are gathered into one RequestOutput.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace

import torch

from onecat.models.loader import load_model
from onecat.spec import NgramProposer, ProposeRequest
from onecat.spec.draft import DraftModelProposer, check_same_vocabulary, truncated_model

from .config import EngineConfig, SpecConfig
from .detokenizer import IncrementalDetokenizer
from .kv_cache_manager import KVCacheManager
from .model_runner import ModelRunner
from .outputs import CompletionOutput, Logprob, RequestOutput, TokenLogprobs
from .request import Request, RequestStatus
from .sampler import draft_chooser, value_free
from .sampling_params import SamplingParams
from .scheduler import Scheduler


def bad_word_token_ids(tokenizer, words: list[str]) -> tuple[tuple[int, ...], ...]:
    """vLLM's bad_words as token sequences: each word as text begins with it and, where a leading space makes
    other tokens (" word" in byte-level BPE), as a word inside the text."""
    seqs: list[tuple[int, ...]] = []
    for word in words:
        for text in (word.lstrip(), " " + word.lstrip()):
            ids = tuple(tokenizer.encode(text, add_special_tokens=False))
            if ids and ids not in seqs:
                seqs.append(ids)
    return tuple(seqs)


@dataclass
class _Group:
    request_id: str
    prompt_token_ids: list[int]
    seqs: list[Request]
    detoks: list[IncrementalDetokenizer]
    arrival_time: float
    prompt_logprobs: list[TokenLogprobs | None] | None = None  # converted once the first sequence's prompt is done


class LLMEngine:
    def __init__(self, config: EngineConfig | None = None, runner: ModelRunner | None = None, progress: bool = True):
        self.config = config or EngineConfig()
        self.runner = runner or ModelRunner(self.config, progress=progress)
        self.tokenizer = self.runner.loaded.tokenizer
        self.spec = self.runner.spec
        self.max_model_len = self.runner.max_model_len
        self.kv = KVCacheManager(self.runner.num_blocks, self.runner.block_size, self.config.cache.enable_prefix_caching)
        self.scheduler = Scheduler(self.config.scheduler, self.kv, self.max_model_len)
        self.groups: dict[str, _Group] = {}
        self.seq_group: dict[str, str] = {}  # sequence id -> request id
        self.eos_token_ids = frozenset(self.tokenizer.eos_token_ids)
        self.model_name = self.config.model.served_model_name or _model_name(self.runner.loaded)
        self.proposer = make_proposer(self.config, self.runner)
        self._inflight = None  # asynchronous scheduling: the launched step whose tokens are not here yet
        self._grammars = None  # structured outputs: a structured.GrammarCompiler, built at the first such request

    # -- requests -----------------------------------------------------------------------------
    def encode_prompt(self, prompt: str | list[int], keep_last: int | None = None) -> list[int]:
        """Tokenize, keep the last `keep_last` tokens if given (vLLM's truncate_prompt_tokens), validate;
        raises ValueError with an API-ready message."""
        keep = slice(-keep_last, None) if keep_last else slice(None)
        if isinstance(prompt, str):
            if not prompt:
                raise ValueError("the prompt is empty")
            ids = self.tokenizer.encode(prompt)[keep]
        else:
            ids = list(prompt)[keep]
            if any(not isinstance(t, int) or isinstance(t, bool) for t in ids):
                raise ValueError("a token-id prompt must be a list of integers")
            bad = [t for t in ids if not 0 <= t < self.spec.vocab_size]
            if bad:
                raise ValueError(f"token id {bad[0]} is out of range [0, {self.spec.vocab_size})")
        if not ids:
            raise ValueError("the prompt is empty")
        if len(ids) + 1 > self.max_model_len:
            raise ValueError(f"the prompt has {len(ids)} tokens; this model's context is {self.max_model_len} "
                             f"tokens and at least one must be left to generate")
        return ids

    def check_request(self, prompt: str | list[int], params: SamplingParams) -> list[int]:
        """Tokenize and validate prompt and limits together; raises ValueError (API-ready)."""
        ids = self.encode_prompt(prompt, params.truncate_prompt_tokens)
        for name, given in (("logit_bias", params.logit_bias or {}), ("allowed_token_ids", params.allowed_token_ids or ())):
            outside = [t for t in given if t >= self.spec.vocab_size]
            if outside:
                raise ValueError(f"{name} token id {outside[0]} is out of range [0, {self.spec.vocab_size})")
        room = self.max_model_len - len(ids)
        if params.max_tokens is not None and params.max_tokens > room:
            raise ValueError(f"max_tokens={params.max_tokens} plus the prompt's {len(ids)} tokens exceeds this "
                             f"model's context of {self.max_model_len} tokens")
        return ids

    def embed(self, prompt: str | list[int], truncate_prompt_tokens: int | None = None) -> tuple[list[float], int]:
        """(embedding, prompt tokens) of a text: the last token's final hidden state, L2-normalized, as vLLM's
        embed runner and llama.cpp's --embeddings pool a decoder-only model. Runs between engine steps on a
        scratch cache (the KV cache and its prefix entries are untouched)."""
        ids = self.encode_prompt(prompt, truncate_prompt_tokens)
        last = self.runner.hidden_states(ids)[-1].float()
        return torch.nn.functional.normalize(last, dim=0).tolist(), len(ids)

    def check_priority(self, priority: int) -> None:
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ValueError(f"priority must be an integer, got {priority!r}")
        if priority and self.config.scheduler.policy != "priority":
            raise ValueError(f"priority {priority} needs priority scheduling: start with scheduler.policy=priority")

    def add_request(self, request_id: str, prompt: str | list[int], params: SamplingParams,
                    arrival_time: float | None = None, priority: int = 0) -> list[int]:
        if request_id in self.groups:
            raise ValueError(f"request id {request_id!r} is already in use")
        self.check_priority(priority)
        ids = self.check_request(prompt, params)
        compiled = self._compile(params.structured_outputs) if params.structured_outputs is not None else None
        bad_ids = bad_word_token_ids(self.tokenizer, params.bad_words)
        max_tokens = params.max_tokens or self.max_model_len - len(ids)
        arrival = arrival_time if arrival_time is not None else time.monotonic()
        seqs, detoks = [], []
        for i in range(params.n):
            p = params
            if params.n > 1:  # (the prompt's logprobs: the first sequence computes them for all)
                p = replace(params, n=1, seed=None if params.seed is None else params.seed + i,
                            prompt_logprobs=params.prompt_logprobs if i == 0 else None)
            sid = request_id if params.n == 1 else f"{request_id}#{i}"
            seqs.append(Request(sid, ids, p, max_tokens, self.eos_token_ids, arrival, priority))
            if compiled is not None:
                seqs[-1].grammar = self._grammars.matcher(compiled)
            seqs[-1].bad_word_ids = bad_ids
            detoks.append(IncrementalDetokenizer(self.tokenizer, ids, p))
        self.groups[request_id] = _Group(request_id, ids, seqs, detoks, arrival)
        self.seq_group.update((s.request_id, request_id) for s in seqs)
        for s in seqs:
            self.scheduler.add(s)
        return ids

    def _compile(self, so):
        """The compiled grammar of a request's structured output (ValueError, API-ready, if it has none)."""
        if self._grammars is None:
            from .structured import GrammarCompiler

            self._grammars = GrammarCompiler(self.tokenizer, self.spec.vocab_size)
        return self._grammars.compile(so)

    def abort_request(self, request_id: str) -> None:
        group = self.groups.pop(request_id, None)
        if group is None:
            return
        for s in group.seqs:
            self.scheduler.finish(s.request_id, RequestStatus.FINISHED_ABORTED)
            self.runner.release(s.request_id)
            if self.proposer is not None:
                self.proposer.release(s.request_id)
            self.seq_group.pop(s.request_id, None)

    def has_unfinished_requests(self) -> bool:
        return bool(self.groups)

    # -- the step -----------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        if self._async_ready():
            return self._step_async()
        outs = self._drain()  # a step still in flight completes first
        return outs + self._step_sync()

    def _async_ready(self) -> bool:
        """Asynchronous scheduling is on and every request can sample without earlier values."""
        return (self.config.scheduler.async_scheduling and self.proposer is None
                and all(value_free(r.params) for r in self.scheduler.requests.values()))

    def _step_async(self) -> list[RequestOutput]:
        """Schedule and launch step n+1, then take step n's tokens (the GPU is busy with n+1 while
        the host resolves, detokenizes and reports n). Outputs trail the GPU by one step."""
        sched = self.scheduler.schedule()
        if sched.is_empty:  # e.g. every running request has its last token in flight
            outs = self._drain()
            if not outs:
                self._check_schedulable()
            return outs
        prev = self._inflight
        self._inflight = self.runner.execute_async(sched, prev)
        self.scheduler.update_provisional(sched)
        outs = self._resolve(prev)
        if not self.groups:  # everything finished: the step in flight holds only dropped rows
            self._drain()
        return outs

    def _drain(self) -> list[RequestOutput]:
        prev, self._inflight = self._inflight, None
        return self._resolve(prev)

    def _resolve(self, inflight) -> list[RequestOutput]:
        if inflight is None:
            return []
        return self._postprocess(self.scheduler.resolve(inflight.out, inflight.wait()))

    def _check_schedulable(self) -> None:
        if self.groups and not self.scheduler.has_unfinished():
            raise RuntimeError("engine has requests but nothing to schedule")
        if self.scheduler.waiting and not self.scheduler.running:
            req = self.scheduler.waiting[0]
            raise RuntimeError(f"request {req.request_id} needs more KV blocks than the cache has "
                               f"({self.kv.num_blocks} blocks of {self.kv.block_size} tokens)")

    def _step_sync(self) -> list[RequestOutput]:
        if self.proposer is not None:
            self._propose()
        sched = self.scheduler.schedule()
        if self.proposer is not None:
            for rid in sched.preempted:  # recomputed from scratch when readmitted: drop draft state
                self.proposer.release(rid)
        if sched.is_empty:
            self._check_schedulable()
            return []
        sampled = self.runner.execute(sched)
        if self.runner.keep_hidden and hasattr(self.proposer, "observe_hidden"):  # MTP: the target's hidden states
            self.proposer.observe_hidden(self.runner.last_hidden)
        updated = self.scheduler.update_from_output(sched, sampled)
        return self._postprocess(updated)

    def _propose(self) -> None:
        k = self.config.spec.num_speculative_tokens
        model_drafter = getattr(self.proposer, "needs_chooser", False)
        reqs, asks = [], []
        for req in self.scheduler.running:
            if req.grammar is None and req.num_computed_tokens == req.num_tokens - 1 and not req.spec_token_ids:
                room = min(k, self.max_model_len - req.num_tokens, req.max_tokens - req.num_output_tokens - 1)
                if room <= 0:
                    continue
                choose = draft_chooser(self.runner.sample_row(req, with_generator=False)) if model_drafter else None
                reqs.append(req)
                asks.append(ProposeRequest(req.request_id, req.all_token_ids, room, choose, req.params.seed))
        if asks:
            for req, prop in zip(reqs, self.proposer.propose_batch(asks)):
                req.spec_token_ids, req.spec_probs = prop.token_ids, prop.probs

    def _postprocess(self, updated: list[Request]) -> list[RequestOutput]:
        touched: dict[str, _Group] = {}
        for req in updated:
            gid = self.seq_group.get(req.request_id)
            group = self.groups.get(gid)
            if group is None:
                continue
            i = group.seqs.index(req)
            detok = group.detoks[i]
            if self.proposer is not None and req.last_spec is not None:
                self.proposer.observe(req.request_id, *req.last_spec)
                req.last_spec = None
            for token in req.output_token_ids[detok.num_added:req.num_known_output_tokens]:
                stop = detok.add(token)
                if stop is not None:
                    self.scheduler.finish(req.request_id, RequestStatus.FINISHED_STOPPED, stop)
                    del req.output_token_ids[detok.num_added:]  # tokens past the stop string
                    del req.output_logprobs[detok.num_added:]
                    break
            if req.status.finished:
                detok.flush()
                self.runner.release(req.request_id)
                if self.proposer is not None:
                    self.proposer.release(req.request_id)
            touched[gid] = group
        outs = []
        for gid, group in touched.items():
            out = self._output(group)
            if out.finished:
                del self.groups[gid]
                for s in group.seqs:
                    self.seq_group.pop(s.request_id, None)
            outs.append(out)
        return outs

    def _output(self, group: _Group) -> RequestOutput:
        comps = []
        for i, (req, detok) in enumerate(zip(group.seqs, group.detoks)):
            done = req.status.finished
            comps.append(CompletionOutput(
                index=i, text=detok.output_text(done), token_ids=req.output_token_ids[:req.num_known_output_tokens],
                finish_reason=req.status.value if done else None, stop_reason=req.stop_reason,
                logprobs=self._logprobs(req) if req.params.logprobs is not None else None))
        first = [r.first_token_time for r in group.seqs if r.first_token_time]
        head = group.seqs[0]  # (with n > 1 the first sequence computes the prompt's logprobs)
        if group.prompt_logprobs is None and head.prompt_logprobs is not None and all(head.prompt_logprobs[1:]):
            group.prompt_logprobs = self._prompt_logprobs(head)
        return RequestOutput(group.request_id, group.prompt_token_ids, comps,
                             finished=all(c.finish_reason for c in comps),
                             num_cached_tokens=head.num_cached_tokens, prompt_logprobs=group.prompt_logprobs,
                             metrics={"arrival_time": group.arrival_time,
                                      "first_token_time": min(first) if first else None})

    def _logprobs(self, req: Request) -> list[TokenLogprobs]:
        return self._token_logprobs(list(zip(req.output_token_ids, req.output_logprobs)))

    def _prompt_logprobs(self, req: Request) -> list[TokenLogprobs | None]:
        return [None] + self._token_logprobs([(lp.token_id, lp) for lp in req.prompt_logprobs[1:]])

    def _token_logprobs(self, entries: list) -> list[TokenLogprobs]:
        """(token id, its SampledToken) per position -> TokenLogprobs, every token's text decoded in one call."""
        ids = [i for token_id, lp in entries for i in (token_id, *(j for j, _ in lp.top or []))]
        texts = iter(self.tokenizer.token_texts(ids))
        res = []
        for token_id, lp in entries:
            chosen = Logprob(token_id, next(texts), lp.logprob)
            res.append(TokenLogprobs(chosen, [Logprob(i, next(texts), v) for i, v in lp.top or []]))
        return res

    def stats(self) -> dict:
        return {
            "num_running": len(self.scheduler.running), "num_waiting": len(self.scheduler.waiting),
            "kv_cache_usage": self.kv.usage, "num_free_blocks": self.kv.num_free_blocks,
            "num_total_blocks": self.kv.num_blocks, "prefix_cache_queries": self.kv.prefix_queries,
            "prefix_cache_hits": self.kv.prefix_hits, "num_preemptions": self.scheduler.num_preemptions,
            "spec_drafts_proposed": self.scheduler.spec_proposed, "spec_drafts_accepted": self.scheduler.spec_accepted,
            "spec_accepted_per_position": dict(sorted(self.scheduler.spec_accepted_at.items())),
            **self._draft_stats(),
        }

    def _draft_stats(self) -> dict:
        kv = getattr(self.proposer, "kv", None)
        if kv is None:
            return {}
        return {"spec_draft_num_free_blocks": kv.num_free_blocks, "spec_draft_num_total_blocks": kv.num_blocks,
                "spec_draft_prefix_cache_hits": kv.prefix_hits}


def make_proposer(config: EngineConfig, runner: ModelRunner):
    spec = config.spec
    if spec.method == "none":
        return None
    if spec.method == "ngram":
        return NgramProposer(spec.num_speculative_tokens, spec.ngram_min, spec.ngram_max)
    if spec.method == "draft":
        return DraftModelProposer(*_draft_runner(config, runner, _draft_model(spec, runner)),
                                  spec.num_speculative_tokens, config.seed)
    if spec.method == "mtp":
        from onecat.spec.mtp import MTPProposer, load_mtp_head

        head = load_mtp_head(spec.mtp_path, runner.loaded, runner.dtype, runner.device)
        mtp_runner, kv = _draft_runner(config, runner, head, prefix_caching=False)
        runner.keep_hidden = True
        return MTPProposer(mtp_runner, kv, runner, spec.num_speculative_tokens, config.seed)
    raise ValueError(f"spec.method must be one of none, ngram, draft, mtp; got {spec.method!r}")


def _draft_model(spec: SpecConfig, runner: ModelRunner):
    if (spec.draft_layers > 0) == bool(spec.draft_model):
        raise ValueError("spec.method=draft needs exactly one of spec.draft_layers (the target's first N blocks) "
                         f"and spec.draft_model (a checkpoint path); got draft_layers={spec.draft_layers}, "
                         f"draft_model={spec.draft_model!r}")
    if spec.draft_layers:
        return truncated_model(runner.loaded, spec.draft_layers)
    loaded = load_model(spec.draft_model, runner.dtype, runner.device, progress=False)
    check_same_vocabulary(runner.loaded, loaded)
    return loaded


def _draft_runner(config: EngineConfig, runner: ModelRunner, loaded,
                  prefix_caching: bool = True) -> tuple[ModelRunner, KVCacheManager]:
    """The drafter's own ModelRunner (its own KV tensors) and KVCacheManager (its own block pool)."""
    cache = replace(config.cache, num_blocks=config.spec.draft_num_blocks or runner.num_blocks)
    # eager: drafters step through last_logits, never through the decode graphs
    model = replace(config.model, max_model_len=runner.max_model_len, enforce_eager=True)
    draft = ModelRunner(replace(config, model=model, cache=cache), loaded=loaded, progress=False)
    caching = prefix_caching and config.cache.enable_prefix_caching
    return draft, KVCacheManager(draft.num_blocks, draft.block_size, caching)


def _model_name(loaded) -> str:
    base = os.path.basename(loaded.source.rstrip("/"))
    return base[:-5] if base.endswith(".gguf") else base
