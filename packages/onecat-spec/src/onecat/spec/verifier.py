"""Lossless verification of drafted tokens (speculative sampling).

Given the target's distributions p_0..p_k at the k drafted positions plus one (the bonus
position) and the drafter's q_0..q_{k-1} (one-hot for deterministic drafters such as n-gram
lookup), accept draft i with probability min(1, p_i(d_i) / q_i(d_i)); at the first rejection
emit a token sampled from normalize(max(p_i - q_i, 0)) and stop; if all k are accepted emit
a bonus token sampled from p_k. The emitted tokens are distributed exactly as sampling from the
target one token at a time. Greedy requests accept exactly while the draft equals the target's
argmax and then emit that argmax.
"""

from __future__ import annotations

import torch


def verify_greedy(target_logits: torch.Tensor, draft: list[int]) -> list[int]:
    """target_logits [k+1, V]. Returns the accepted drafts followed by the target's own token."""
    best = target_logits.argmax(dim=-1).tolist()
    out = []
    for i, d in enumerate(draft):
        if d != best[i]:
            break
        out.append(d)
    out.append(best[len(out)])
    return out


def verify_sampled(target_probs: torch.Tensor, draft: list[int], draft_probs: torch.Tensor | None,
                   generator: torch.Generator | None) -> list[int]:
    """target_probs [k+1, V] (rows sum to 1, already temperature/top-k/top-p processed);
    draft_probs [k, V] or None for a deterministic drafter (q = one-hot at the draft)."""
    out = []
    dev = target_probs.device
    for i, d in enumerate(draft):
        p = target_probs[i]
        q_d = 1.0 if draft_probs is None else float(draft_probs[i, d])
        p_d = float(p[d])
        u = float(torch.rand((), generator=generator, device=dev))
        if q_d > 0 and u * q_d < p_d:  # u < p/q without dividing by a tiny q
            out.append(d)
            continue
        if draft_probs is None:
            residual = p.clone()
            residual[d] = 0.0
        else:
            residual = torch.clamp(p - draft_probs[i], min=0.0)
        total = float(residual.sum())
        if total <= 0.0:  # p == q: a rejection has probability 0; only rounding gets here
            residual, total = p, 1.0
        out.append(int(torch.multinomial(residual / total, 1, generator=generator)))
        return out
    out.append(int(torch.multinomial(target_probs[len(draft)], 1, generator=generator)))
    return out
