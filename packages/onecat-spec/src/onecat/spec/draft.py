"""Draft-model speculation: a smaller model with the target's vocabulary proposes k tokens per
step from its own paged KV cache.

The drafter runs through the serving engine's own classes, handed in by the engine (onecat.spec
sits below onecat.serve and imports none of it): a `ModelRunner` built on the draft model (its
own KV tensors) and a `KVCacheManager` (its own block pool, with prefix caching). Per request it
remembers which tokens its KV holds (`fed`: the confirmed tokens and the drafts it fed). Each
step it:

1. rolls back: its valid KV is the longest common prefix of `fed` and the target's confirmed
   tokens (accepted drafts are reused, rejected ones are overwritten when recomputed);
2. catches up: feeds the confirmed tokens after that prefix (at least the last one) in one
   batched pass and picks draft 1 from the logits at the last token;
3. feeds each draft to get the next, k - 1 more single-token passes, batched over requests.

Blocks are allocated once per step for the catch-up plus the k - 1 drafts fed; only confirmed
full blocks enter the draft's prefix cache. `release` frees everything a request holds.

Two drafts are supported: any checkpoint whose vocabulary equals the target's
(`check_same_vocabulary`), and the target's own first N blocks + final norm + LM head
(`truncated_model`: LayerSkip-style self-speculation, sharing the target's weight tensors).
"""

from __future__ import annotations

import copy
import dataclasses

import torch

from onecat.models.loader import LoadedModel

from .proposer import Proposal, ProposeRequest, argmax_choice


def truncated_model(loaded: LoadedModel, num_layers: int) -> LoadedModel:
    """The target's first `num_layers` blocks, its final norm and its LM head, as a model of its
    own. Weight tensors are shared with the target (no copy); the KV cache is not."""
    spec = loaded.spec
    if not 1 <= num_layers <= spec.num_layers:
        raise ValueError(f"draft_layers={num_layers}: must be between 1 and the target's {spec.num_layers} layers")
    model = copy.copy(loaded.model)
    model.layers = loaded.model.layers[:num_layers]
    model.spec = dataclasses.replace(spec, num_layers=num_layers, layer_types=spec.layer_types[:num_layers],
                                     layer_sliding_window=spec.layer_sliding_window[:num_layers])
    return LoadedModel(model.spec, model, loaded.tokenizer,
                       f"{loaded.source} (first {num_layers} of {spec.num_layers} layers)", loaded.weight_format)


def check_same_vocabulary(target: LoadedModel, draft: LoadedModel) -> None:
    """Raise ValueError unless the draft scores the same token ids as the target."""
    if draft.spec.vocab_size != target.spec.vocab_size:
        raise ValueError(f"draft model {draft.source}: vocabulary of {draft.spec.vocab_size} tokens, the target "
                         f"{target.source} has {target.spec.vocab_size}; a draft must share the target's tokenizer")
    if target.tokenizer is None or draft.tokenizer is None:
        return
    tv = target.tokenizer.backend.get_vocab(with_added_tokens=True)
    dv = draft.tokenizer.backend.get_vocab(with_added_tokens=True)
    if tv != dv:
        t_by_id = {i: t for t, i in tv.items()}
        d_by_id = {i: t for t, i in dv.items()}
        i = next(i for i in sorted(set(t_by_id) | set(d_by_id)) if t_by_id.get(i) != d_by_id.get(i))
        raise ValueError(f"draft model {draft.source}: token {i} is {d_by_id.get(i)!r}, the target's "
                         f"({target.source}) is {t_by_id.get(i)!r}; a draft must share the target's tokenizer")


class _DraftSeq:
    """A request as the draft's KVCacheManager sees it (the fields allocate_slots reads)."""

    __slots__ = ("request_id", "all_token_ids", "num_computed_tokens", "fed", "generator")

    def __init__(self, request_id: str, token_ids: list[int]):
        self.request_id = request_id
        self.all_token_ids = list(token_ids)  # confirmed tokens only: drafts are never prefix-cached
        self.num_computed_tokens = 0
        self.fed: list[int] = []  # the tokens whose KV sits at positions 0..len(fed)-1
        self.generator: torch.Generator | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)


def common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class DraftModelProposer:
    """runner: a ModelRunner over the draft model (needs `last_logits` and `block_size`);
    kv: a KVCacheManager over that runner's blocks."""

    name = "draft"
    needs_chooser = True  # the engine hands each request a Chooser mirroring its sampling

    def __init__(self, runner, kv, num_speculative_tokens: int, seed: int = 0):
        if num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        if kv.block_size != runner.block_size:
            raise ValueError(f"draft KV manager block size {kv.block_size} != runner's {runner.block_size}")
        self.runner, self.kv, self.k = runner, kv, num_speculative_tokens
        self.seqs: dict[str, _DraftSeq] = {}
        self._seed_source = torch.Generator().manual_seed(seed)
        self.num_passes = 0  # draft forward passes run (for benchmarks)

    def _prepare(self, r: ProposeRequest, k: int) -> _DraftSeq | None:
        """Roll back to the valid prefix and reserve blocks for catch-up + k - 1 drafts fed."""
        L = len(r.token_ids)
        seq = self.seqs.get(r.request_id)
        hits: list = []
        if seq is None:
            seq = _DraftSeq(r.request_id, r.token_ids)
            hits, valid = self.kv.get_computed_blocks(seq)
        else:
            seq.all_token_ids = list(r.token_ids)
            valid = min(common_prefix_len(seq.fed, r.token_ids), L - 1)
            seq.num_computed_tokens = valid
        if not self.kv.allocate_slots(seq, L - valid + k - 1, hits):
            self.release(r.request_id)  # the draft pool is full: no drafts for this request now
            return None
        seq.num_computed_tokens = valid
        seq.fed = list(r.token_ids[:valid])
        self.seqs[r.request_id] = seq
        if seq.generator is None and r.choose is not None:
            seed = r.seed if r.seed is not None else int(torch.randint(0, 2**62, (), generator=self._seed_source))
            seq.generator = torch.Generator(device=self.runner.device).manual_seed(seed ^ 0x5EED)
        return seq

    def propose_batch(self, requests: list[ProposeRequest]) -> list[Proposal]:
        proposals = [Proposal([]) for _ in requests]
        live = []  # (index, request, seq, k)
        for i, r in enumerate(requests):
            # drafts are fed at positions up to len + k - 2: within the draft model's context too
            k = min(self.k, r.max_tokens, self.runner.max_model_len - len(r.token_ids) + 1)
            if k <= 0 or not r.token_ids:
                continue
            seq = self._prepare(r, k)
            if seq is not None:
                live.append((i, r, seq, k))
        if not live:
            return proposals
        drafts: dict[int, list[int]] = {i: [] for i, *_ in live}
        probs: dict[int, list] = {i: [] for i, *_ in live}
        feeds = [(r.token_ids[seq.num_computed_tokens:], seq.num_computed_tokens, self.kv.block_ids(r.request_id))
                 for _, r, seq, _ in live]
        while live:
            logits = self.runner.last_logits(feeds)
            self.num_passes += 1
            next_live, feeds = [], []
            for (i, r, seq, k), row in zip(live, logits):
                choose = r.choose or argmax_choice
                token, q = choose(row, drafts[i], seq.generator)
                drafts[i].append(token)
                probs[i].append(q)
                if len(drafts[i]) < k:
                    pos = len(r.token_ids) + len(drafts[i]) - 1
                    feeds.append(([token], pos, self.kv.block_ids(r.request_id)))
                    next_live.append((i, r, seq, k))
            live = next_live
        for i, d in drafts.items():
            seq = self.seqs[requests[i].request_id]
            seq.fed = list(requests[i].token_ids) + d[:-1]
            seq.num_computed_tokens = len(seq.fed)
            qs = probs[i]
            proposals[i] = Proposal(d, None if qs[0] is None else torch.stack(qs))
        return proposals

    def observe(self, request_id: str, proposed: int, accepted: int) -> None:
        pass  # rollback happens at the next propose, from the confirmed tokens

    def release(self, request_id: str) -> None:
        seq = self.seqs.pop(request_id, None)
        if seq is not None:
            self.kv.free(seq)

    @property
    def num_requests(self) -> int:
        return len(self.seqs)
