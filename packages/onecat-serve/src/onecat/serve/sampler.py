"""Logits -> next tokens, per request: penalties, min_tokens, temperature, min-p, top-k, top-p,
seeded sampling, logprobs. Runs where the logits are.

Truncation and the draw are onecat.kernels' `sample` op (vLLM's order: min-p, top-k, then top-p;
a Gumbel-max draw keyed by the request's seed and step, so a request's tokens do not depend on
which others share its batch): one launch for all sampled rows of a step on CUDA, its torch
reference on the CPU. Speculative verification draws from the same distribution
(`processed_probs`, built from the op's keep mask) with the request's torch generator.

Logprobs are those of the model's raw distribution (log_softmax of the logits before any
penalty or truncation), as vLLM reports by default.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from onecat.kernels import ops
from onecat.kernels.sampling_ops import sampling_keep_mask
from onecat.spec.verifier import verify_greedy, verify_sampled

from .sampling_params import SamplingParams


@dataclass
class SampleRow:
    params: SamplingParams
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    generator: torch.Generator | None
    stop_ids_until_min: frozenset[int]  # ids banned while fewer than min_tokens are out
    seed: int = 0  # the request's seed (explicit or drawn once): keys the `sample` op's draws
    grammar: object = None  # structured output: a structured.Grammar, whose refused tokens get -inf first
    bad_word_ids: tuple[tuple[int, ...], ...] = ()  # params.bad_words as token sequences (the engine's tokenizer)


@dataclass
class SampledToken:
    token_id: int
    logprob: float | None = None
    top: list[tuple[int, float]] | None = None  # (id, logprob), best first


def apply_penalties(logits: torch.Tensor, row: SampleRow) -> torch.Tensor:
    p = row.params
    if row.grammar is not None:
        row.grammar.mask_(logits)
    if p.allowed_token_ids is not None:
        keep = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
        keep[torch.tensor(p.allowed_token_ids, dtype=torch.long, device=logits.device)] = True
        logits.masked_fill_(~keep, -float("inf"))
    if row.bad_word_ids:
        banned = bad_word_bans(row.bad_word_ids, row.output_token_ids)
        if banned:
            logits[banned] = -float("inf")
    if p.logit_bias:
        ids = torch.tensor(list(p.logit_bias), dtype=torch.long, device=logits.device)
        logits[ids] += torch.tensor(list(p.logit_bias.values()), dtype=logits.dtype, device=logits.device)
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


def bad_word_bans(words: tuple[tuple[int, ...], ...], output: list[int]) -> list[int]:
    """Token ids banned next: a bad word's last token wherever the output ends with the rest of it."""
    return sorted({w[-1] for w in words if len(w) == 1 or (len(output) >= len(w) - 1 and
                                                          tuple(output[len(output) - len(w) + 1:]) == w[:-1])})


def _changes_logits(row: SampleRow) -> bool:
    """Whether penalties or the min_tokens ban touch this row's logits this step."""
    p = row.params
    return (row.grammar is not None or bool(p.logit_bias) or p.repetition_penalty != 1.0
            or p.allowed_token_ids is not None or bool(row.bad_word_ids)
            or bool((p.frequency_penalty or p.presence_penalty) and row.output_token_ids)
            or bool(row.stop_ids_until_min and len(row.output_token_ids) < p.min_tokens))


def _penalized(raw: torch.Tensor, row: SampleRow) -> torch.Tensor:
    """The row's logits after penalties and the min_tokens ban (raw itself when none applies)."""
    return apply_penalties(raw.clone(), row) if _changes_logits(row) else raw


def _filter_params(rows: list[SampleRow], device) -> tuple[torch.Tensor, ...]:
    """temperature, top_k, top_p, min_p [B] in the `sample` op's dtypes."""
    ps = [r.params for r in rows]
    return (torch.tensor([p.temperature for p in ps], dtype=torch.float32, device=device),
            torch.tensor([p.top_k for p in ps], dtype=torch.int32, device=device),
            torch.tensor([p.top_p for p in ps], dtype=torch.float32, device=device),
            torch.tensor([p.min_p for p in ps], dtype=torch.float32, device=device))


def _with_logprobs(tok: SampledToken, raw: torch.Tensor, p: SamplingParams) -> SampledToken:
    if p.logprobs is not None:
        lp = torch.log_softmax(raw.float(), dim=-1)  # FP16 rows from a decode graph: their exact float32
        tok.logprob = float(lp[tok.token_id])
        if p.logprobs > 0:
            v, ix = torch.topk(lp, p.logprobs)
            tok.top = list(zip(ix.tolist(), v.tolist()))
    return tok


def prompt_token_logprobs(logits: torch.Tensor, targets: list[int], k: int) -> list[SampledToken]:
    """logits [T, V] at T prompt positions, targets: the prompt token after each. Per position the target's logprob
    and the top k (raw logits, as the generated tokens' logprobs are)."""
    lp = torch.log_softmax(logits.float(), dim=-1)
    chosen = lp.gather(1, torch.tensor(targets, device=lp.device)[:, None])[:, 0].tolist()
    if k == 0:
        return [SampledToken(t, v) for t, v in zip(targets, chosen)]
    vals, ids = torch.topk(lp, k, dim=-1)
    return [SampledToken(t, v, list(zip(i, w))) for t, v, i, w in zip(targets, chosen, ids.tolist(), vals.tolist())]


def processed_probs(raw: torch.Tensor, row: SampleRow) -> torch.Tensor:
    """The distribution a sampled request draws from: penalties, temperature, then the `sample`
    op's filters (min-p, top-k, top-p), renormalized."""
    x = _penalized(raw, row)[None]
    keep, z = sampling_keep_mask(x, *_filter_params([row], x.device))
    return torch.softmax(z.masked_fill(~keep, -float("inf")), dim=-1)[0]


def sample_with_drafts(logits: torch.Tensor, row: SampleRow, draft: list[int],
                       draft_probs: torch.Tensor | None = None) -> list[SampledToken]:
    """logits [k+1, V] at the request's last confirmed token and its k drafted tokens.
    Returns the accepted drafts and one more token, exactly as if sampled one at a time:
    row i is processed with the drafts before it counted as output (penalties, min_tokens)."""
    rows = [replace(row, output_token_ids=row.output_token_ids + draft[:i]) for i in range(len(draft) + 1)]
    if row.params.greedy:
        processed = torch.stack([apply_penalties(logits[i].clone(), r) for i, r in enumerate(rows)])
        ids = verify_greedy(processed, draft)
    else:
        probs = torch.stack([processed_probs(logits[i], r) for i, r in enumerate(rows)])
        ids = verify_sampled(probs, draft, draft_probs, row.generator)
    return [_with_logprobs(SampledToken(t), logits[i], row.params) for i, t in enumerate(ids)]


def _plain_greedy(row: SampleRow) -> bool:
    """Greedy with nothing that changes or reports the logits: its token is the argmax of the raw row."""
    return row.params.greedy and row.params.logprobs is None and not _changes_logits(row)


def _float_unless_plain_greedy(logits: torch.Tensor, rows: list[SampleRow]) -> torch.Tensor:
    """Logits as float32 for penalties, sampling and logprobs; plain greedy rows keep the LM head's
    dtype (the argmax of FP16 logits is the argmax of their exact float32 conversion)."""
    return logits if all(_plain_greedy(r) for r in rows) else logits.float()


def _draw(logits: torch.Tensor, rows: list[SampleRow], drawn: list[int]) -> torch.Tensor:
    """Token ids (device) of the sampled rows `drawn`: one `sample` op over their penalized logits,
    keyed by (seed, number of tokens out)."""
    sub = [rows[i] for i in drawn]
    x = torch.stack([_penalized(logits[i], rows[i]) for i in drawn])
    dev = x.device
    seed = torch.tensor([r.seed for r in sub], dtype=torch.int64, device=dev)
    step = torch.tensor([len(r.output_token_ids) for r in sub], dtype=torch.int64, device=dev)
    return ops.sample(x, *_filter_params(sub, dev), seed, step)


def sample(logits: torch.Tensor, rows: list[SampleRow]) -> list[SampledToken]:
    """logits [B, V] (float32, or FP16 from a decode graph), one row per request that samples this
    step: sample_on_device's ids, one copy to the host, then each row's logprobs where asked."""
    ids = sample_on_device(logits, rows).tolist()
    return [_with_logprobs(SampledToken(t), logits[i], row.params) for i, (t, row) in enumerate(zip(ids, rows))]


def value_free(params) -> bool:
    """Whether sampling for these params needs no earlier token's value (only their count): what
    asynchronous scheduling needs, since the last token is still on the GPU when the next step is
    prepared. Penalties read the values; logprobs go back to the host with each token."""
    return (params.logprobs is None and params.prompt_logprobs is None and params.repetition_penalty == 1.0
            and not params.frequency_penalty and not params.presence_penalty and params.structured_outputs is None
            and not params.bad_words)


def sample_on_device(logits: torch.Tensor, rows: list[SampleRow]) -> torch.Tensor:
    """Token ids [B] (int64) on the logits' device: greedy rows one batched argmax (of the raw
    logits when every greedy row is plain, else of the penalized ones), sampled rows one `sample`
    op over the penalized logits, keyed by (seed, number of tokens out). With placeholders among
    the output tokens (asynchronous scheduling) only value_free rows may come here: the min_tokens
    ban only counts them, penalties would read them."""
    logits = _float_unless_plain_greedy(logits, rows)
    ids = torch.empty(len(rows), dtype=torch.int64, device=logits.device)
    greedy = [i for i, row in enumerate(rows) if row.params.greedy]
    if greedy:
        if all(_plain_greedy(rows[i]) for i in greedy):
            x = logits if len(greedy) == len(rows) else logits[greedy]
        else:
            x = torch.stack([_penalized(logits[i], rows[i]) for i in greedy])
        picked = ops.argmax(x)  # the registry's: a split-vocabulary kernel on CUDA, torch.argmax on CPU
        if len(greedy) == len(rows):
            ids = picked
        else:
            ids[greedy] = picked
    drawn = [i for i, row in enumerate(rows) if not row.params.greedy]
    if drawn:
        ids[drawn] = _draw(logits, rows, drawn)
    return ids


def draft_chooser(row: SampleRow):
    """How a model drafter picks tokens for this request (onecat.spec's Chooser), processed as the
    target will be so that drafts match it well: greedy requests take the argmax of the penalized
    draft logits (deterministic, q = one-hot); sampled ones draw from the processed draft
    distribution q with the drafter's generator and hand q to the verifier (lossless for any q)."""
    def choose(logits: torch.Tensor, drafted: list[int], generator: torch.Generator | None):
        r = replace(row, output_token_ids=row.output_token_ids + drafted, generator=generator)
        if row.params.greedy:
            return int(torch.argmax(apply_penalties(logits.clone(), r))), None
        q = processed_probs(logits, r)
        return int(torch.multinomial(q, 1, generator=generator)), q
    return choose
