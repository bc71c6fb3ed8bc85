"""Logits -> next tokens, per request: penalties, min_tokens, temperature, top-k, top-p, min-p,
seeded sampling, logprobs. Torch reference; runs where the logits are.

Logprobs are those of the model's raw distribution (log_softmax of the logits before any
penalty or truncation), as vLLM reports by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from onecat.spec.verifier import verify_greedy, verify_sampled

from .sampling_params import SamplingParams


@dataclass
class SampleRow:
    params: SamplingParams
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    generator: torch.Generator | None
    stop_ids_until_min: frozenset[int]  # ids banned while fewer than min_tokens are out


@dataclass
class SampledToken:
    token_id: int
    logprob: float | None = None
    top: list[tuple[int, float]] | None = None  # (id, logprob), best first


def apply_penalties(logits: torch.Tensor, row: SampleRow) -> torch.Tensor:
    p = row.params
    if p.repetition_penalty != 1.0:
        seen = torch.tensor(sorted(set(row.prompt_token_ids) | set(row.output_token_ids)),
                            dtype=torch.long, device=logits.device)
        vals = logits[seen]
        logits[seen] = torch.where(vals > 0, vals / p.repetition_penalty, vals * p.repetition_penalty)
    if (p.frequency_penalty or p.presence_penalty) and row.output_token_ids:
        out = torch.tensor(row.output_token_ids, dtype=torch.long, device=logits.device)
        counts = torch.bincount(out, minlength=logits.shape[-1]).to(logits.dtype)
        logits -= p.frequency_penalty * counts + p.presence_penalty * (counts > 0).to(logits.dtype)
    if row.stop_ids_until_min and len(row.output_token_ids) < p.min_tokens:
        logits[list(row.stop_ids_until_min)] = -float("inf")
    return logits


def truncate(logits: torch.Tensor, p: SamplingParams) -> torch.Tensor:
    """Mask everything outside top-k, the top-p nucleus and the min-p floor with -inf."""
    if p.top_k and p.top_k < logits.shape[-1]:
        kth = torch.topk(logits, p.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, -float("inf"))
    if p.top_p < 1.0:
        sorted_logits, idx = torch.sort(logits, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # keep the smallest prefix whose mass reaches top_p (the first token always stays)
        drop = probs.cumsum(-1) - probs >= p.top_p
        logits = logits.scatter(0, idx[drop], -float("inf"))
    if p.min_p > 0.0:
        probs = torch.softmax(logits, dim=-1)
        logits = logits.masked_fill(probs < p.min_p * probs.max(), -float("inf"))
    return logits


def _with_logprobs(tok: SampledToken, raw: torch.Tensor, p: SamplingParams) -> SampledToken:
    if p.logprobs is not None:
        lp = torch.log_softmax(raw, dim=-1)
        tok.logprob = float(lp[tok.token_id])
        if p.logprobs > 0:
            v, ix = torch.topk(lp, p.logprobs)
            tok.top = list(zip(ix.tolist(), v.tolist()))
    return tok


def processed_probs(raw: torch.Tensor, row: SampleRow) -> torch.Tensor:
    """The distribution a sampled request draws from: penalties, temperature, truncation."""
    x = truncate(apply_penalties(raw.clone(), row) / row.params.temperature, row.params)
    return torch.softmax(x, dim=-1)


def sample_with_drafts(logits: torch.Tensor, row: SampleRow, draft: list[int],
                       draft_probs: torch.Tensor | None = None) -> list[SampledToken]:
    """logits [k+1, V] at the request's last confirmed token and its k drafted tokens.
    Returns the accepted drafts and one more token, exactly as if sampled one at a time:
    row i is processed with the drafts before it counted as output (penalties, min_tokens)."""
    rows = [SampleRow(row.params, row.prompt_token_ids, row.output_token_ids + draft[:i], row.generator,
                      row.stop_ids_until_min) for i in range(len(draft) + 1)]
    if row.params.greedy:
        processed = torch.stack([apply_penalties(logits[i].clone(), r) for i, r in enumerate(rows)])
        ids = verify_greedy(processed, draft)
    else:
        probs = torch.stack([processed_probs(logits[i], r) for i, r in enumerate(rows)])
        ids = verify_sampled(probs, draft, draft_probs, row.generator)
    return [_with_logprobs(SampledToken(t), logits[i], row.params) for i, t in enumerate(ids)]


def _plain_greedy(row: SampleRow) -> bool:
    """Greedy with nothing that changes or reports the logits: its token is the argmax of the raw row."""
    p = row.params
    return (p.greedy and p.logprobs is None and p.repetition_penalty == 1.0
            and not ((p.frequency_penalty or p.presence_penalty) and row.output_token_ids)
            and not (row.stop_ids_until_min and len(row.output_token_ids) < p.min_tokens))


def sample(logits: torch.Tensor, rows: list[SampleRow]) -> list[SampledToken]:
    """logits [B, V] float32, one row per request that samples this step. Plain greedy rows
    (see _plain_greedy) take one batched argmax and one copy to the host; the rest go row by row."""
    results: list[SampledToken | None] = [None] * len(rows)
    plain = [i for i, row in enumerate(rows) if _plain_greedy(row)]
    if plain:
        picked = logits if len(plain) == len(rows) else logits[plain]
        for i, t in zip(plain, torch.argmax(picked, dim=-1).tolist()):
            results[i] = SampledToken(t)
    for i, row in enumerate(rows):
        if results[i] is not None:
            continue
        raw = logits[i]
        if row.params.greedy:
            token = int(torch.argmax(apply_penalties(raw.clone(), row)))
        else:
            token = int(torch.multinomial(processed_probs(raw, row), 1, generator=row.generator))
        results[i] = _with_logprobs(SampledToken(token), raw, row.params)
    return results


def draft_chooser(row: SampleRow):
    """How a model drafter picks tokens for this request (onecat.spec's Chooser), processed as the
    target will be so that drafts match it well: greedy requests take the argmax of the penalized
    draft logits (deterministic, q = one-hot); sampled ones draw from the processed draft
    distribution q with the drafter's generator and hand q to the verifier (lossless for any q)."""
    def choose(logits: torch.Tensor, drafted: list[int], generator: torch.Generator | None):
        r = SampleRow(row.params, row.prompt_token_ids, row.output_token_ids + drafted, generator,
                      row.stop_ids_until_min)
        if row.params.greedy:
            return int(torch.argmax(apply_penalties(logits.clone(), r))), None
        q = processed_probs(logits, r)
        return int(torch.multinomial(q, 1, generator=generator)), q
    return choose
