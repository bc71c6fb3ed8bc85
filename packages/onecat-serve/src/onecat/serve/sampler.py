"""Logits -> next tokens, per request: penalties, min_tokens, temperature, top-k, top-p, min-p,
seeded sampling, logprobs. Torch reference; runs where the logits are.

Logprobs are those of the model's raw distribution (log_softmax of the logits before any
penalty or truncation), as vLLM reports by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

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


def sample(logits: torch.Tensor, rows: list[SampleRow]) -> list[SampledToken]:
    """logits [B, V] float32, one row per request that samples this step."""
    results = []
    for i, row in enumerate(rows):
        p = row.params
        raw = logits[i]
        x = apply_penalties(raw.clone(), row)
        if p.greedy:
            token = int(torch.argmax(x))
        else:
            x = truncate(x / p.temperature, p)
            probs = torch.softmax(x, dim=-1)
            token = int(torch.multinomial(probs, 1, generator=row.generator))
        tok = SampledToken(token)
        if p.logprobs is not None:
            lp = torch.log_softmax(raw, dim=-1)
            tok.logprob = float(lp[token])
            if p.logprobs > 0:
                v, ix = torch.topk(lp, p.logprobs)
                tok.top = list(zip(ix.tolist(), v.tolist()))
        results.append(tok)
    return results
