"""MTP drafting: the target's multi-token-prediction head proposes k tokens from the target's own
final hidden states.

The head (onecat.models.mtp.MTPHead) runs through a ModelRunner of its own (its paged KV cache,
one attention layer) and a KVCacheManager without prefix caching (its KV at position p depends on
x_{p+1} too, so token-hash reuse would be wrong). The target runner keeps the final hidden states
of the positions it feeds (`keep_hidden`); the engine hands them over after every step
(`observe_hidden`). Per request, at propose time with L confirmed tokens:

1. catch-up: feed (h_p, x_{p+1}) at positions p = c .. L-2, where c counts positions already fed
   with confirmed data (positions fed with drafts are always recomputed: that is the rollback);
   the output at L-2 predicts x_L, draft 1;
2. chain: draft j+1 comes from feeding (the head's own output state, draft j) at the next
   position (one head reused k times, as Qwen3-Next does).
Greedy requests take argmaxes; sampled ones draw from q (the Chooser), lossless either way.
"""

from __future__ import annotations

import os

import torch

from onecat.models.gguf_file import CheckpointError
from onecat.models.loader import LoadedModel
from onecat.models.mtp import MTPHead

from .draft import _DraftSeq
from .proposer import Proposal, ProposeRequest, argmax_choice


def load_mtp_head(path: str | None, target: LoadedModel, dtype: torch.dtype, device) -> LoadedModel:
    """The MTP layer from safetensors (a file, or every *.safetensors in a directory), under its
    DeepSeek-V3 or Qwen3-Next names; the target's other tensors in the same files are skipped."""
    from safetensors import safe_open

    if not path:
        raise ValueError("spec.method=mtp needs spec.mtp_path (safetensors holding the MTP layer)")
    files = ([os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".safetensors")]
             if os.path.isdir(path) else [path])
    if not files or not all(os.path.isfile(f) for f in files):
        raise CheckpointError(f"{path}: no safetensors file(s) with an MTP layer")
    head = MTPHead(target.model, dtype, device)
    for f in files:
        try:
            with safe_open(f, framework="pt") as st:
                for name in st.keys():
                    if head._canonical(name) is not None:
                        head.load_weight(name, st.get_tensor(name).to(device=device, dtype=dtype))
        except CheckpointError as e:
            raise CheckpointError(f"{f}: {e}") from None
    missing = head.missing_weights()
    if missing:
        raise CheckpointError(f"{path}: the MTP layer misses {len(missing)} tensors, e.g. {sorted(missing)[:3]}")
    return LoadedModel(head.spec, head, target.tokenizer, path, "safetensors")


class _MTPSeq(_DraftSeq):
    __slots__ = ("hidden",)

    def __init__(self, request_id: str):
        super().__init__(request_id, [])
        self.hidden: dict[int, torch.Tensor] = {}  # position -> the target's final hidden state there


class MTPProposer:
    """runner: a ModelRunner over an MTPHead; kv: its KVCacheManager (prefix caching off);
    target: the target's ModelRunner (its embedding/LM head are the head's)."""

    name = "mtp"
    needs_chooser = True

    def __init__(self, runner, kv, target, num_speculative_tokens: int, seed: int = 0):
        if num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        if kv.enable_prefix_caching:
            raise ValueError("the MTP head's KV depends on the next token too: its KVCacheManager must not "
                             "prefix-cache")
        self.runner, self.kv, self.target, self.k = runner, kv, target, num_speculative_tokens
        self.seqs: dict[str, _MTPSeq] = {}
        self._seed_source = torch.Generator().manual_seed(seed)

    def observe_hidden(self, hidden: dict[str, tuple[int, torch.Tensor]]) -> None:
        for rid, (start, h) in hidden.items():
            seq = self.seqs.setdefault(rid, _MTPSeq(rid))
            for i in range(h.shape[0]):
                seq.hidden[start + i] = h[i].clone()

    def _prepare(self, r: ProposeRequest, k: int) -> _MTPSeq | None:
        seq = self.seqs.get(r.request_id)
        L = len(r.token_ids)
        if seq is None or L < 2:
            return None
        c = min(seq.num_computed_tokens, L - 2)  # positions fed with confirmed (h_p, x_{p+1})
        if any(p not in seq.hidden for p in range(c, L - 1)):
            return None  # hidden states missing (not seen by this proposer): no drafts
        seq.all_token_ids = list(r.token_ids[:L - 1])  # one MTP position per confirmed pair
        seq.num_computed_tokens = c
        if not self.kv.allocate_slots(seq, L - 1 - c + k - 1):
            self.release(r.request_id)
            return None
        if seq.generator is None and r.choose is not None:
            s = r.seed if r.seed is not None else int(torch.randint(0, 2**62, (), generator=self._seed_source))
            seq.generator = torch.Generator(device=self.runner.device).manual_seed(s ^ 0x377)
        return seq

    def propose_batch(self, requests: list[ProposeRequest]) -> list[Proposal]:
        proposals = [Proposal([]) for _ in requests]
        live = []
        for i, r in enumerate(requests):
            k = min(self.k, r.max_tokens, self.runner.max_model_len - len(r.token_ids) + 1)
            seq = self._prepare(r, k) if k > 0 else None
            if seq is not None:
                live.append((i, r, seq, k))
        if not live:
            return proposals
        drafts = {i: [] for i, *_ in live}
        probs = {i: [] for i, *_ in live}
        feeds, hid = [], []
        for _, r, seq, _ in live:
            c, L = seq.num_computed_tokens, len(r.token_ids)
            feeds.append((r.token_ids[c + 1:L], c, self.kv.block_ids(r.request_id)))
            hid += [seq.hidden[p] for p in range(c, L - 1)]
        while live:
            logits, last = self.runner.last_logits(feeds, return_hidden=True, hidden_states=torch.stack(hid))
            next_live, feeds, hid = [], [], []
            for (i, r, seq, k), row, h in zip(live, logits, last):
                token, q = (r.choose or argmax_choice)(row, drafts[i], seq.generator)
                drafts[i].append(token)
                probs[i].append(q)
                if len(drafts[i]) < k:
                    feeds.append(([token], len(r.token_ids) + len(drafts[i]) - 2, self.kv.block_ids(r.request_id)))
                    hid.append(h)
                    next_live.append((i, r, seq, k))
            live = next_live
        for i, d in drafts.items():
            r = requests[i]
            seq = self.seqs[r.request_id]
            seq.num_computed_tokens = len(r.token_ids) - 1  # confirmed pairs fed; chained ones are redone
            for p in [p for p in seq.hidden if p < seq.num_computed_tokens - 1]:
                del seq.hidden[p]
            proposals[i] = Proposal(d, None if probs[i][0] is None else torch.stack(probs[i]))
        return proposals

    def observe(self, request_id: str, proposed: int, accepted: int) -> None:
        pass

    def release(self, request_id: str) -> None:
        seq = self.seqs.pop(request_id, None)
        if seq is not None:
            self.kv.free(seq)
