"""onecat.serve.sampler: the batched plain-greedy path picks what the row-by-row path picks."""

import torch

from onecat.serve.sampler import SampleRow, _plain_greedy, apply_penalties, sample
from onecat.serve.sampling_params import SamplingParams


def _row(**kw) -> SampleRow:
    out = kw.pop("out", [5, 7])
    stops = kw.pop("stops", frozenset())
    p = SamplingParams(**kw)
    gen = None if p.greedy else torch.Generator().manual_seed(3)
    return SampleRow(p, [1, 2, 3], out, gen, stops)


def test_plain_greedy_rows_are_recognized():
    assert _plain_greedy(_row(temperature=0.0))
    assert _plain_greedy(_row(temperature=0.0, frequency_penalty=0.5, out=[]))  # nothing to penalize yet
    assert not _plain_greedy(_row(temperature=0.0, repetition_penalty=1.3))
    assert not _plain_greedy(_row(temperature=0.0, presence_penalty=0.5))
    assert not _plain_greedy(_row(temperature=0.0, logprobs=0))
    assert not _plain_greedy(_row(temperature=0.0, min_tokens=4, stops=frozenset({9})))
    assert not _plain_greedy(_row(temperature=0.7))


def test_mixed_batch_matches_row_by_row():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 50, generator=g)
    logits[0, 9] = logits[2, 9] = 100.0  # the stop id wins unless min_tokens bans it
    logits[1, 5] = 50.0  # a repeated id wins unless the repetition penalty pushes it under row 1's max
    logits[1, 6] = 49.0
    rows = [_row(temperature=0.0), _row(temperature=0.0, repetition_penalty=1.5),
            _row(temperature=0.0, min_tokens=4, stops=frozenset({9})), _row(temperature=0.0, logprobs=2),
            _row(temperature=0.0), _row(temperature=0.8, seed=1)]
    got = sample(logits, rows)
    assert [t.token_id for t in got[:5]] == [
        int(torch.argmax(apply_penalties(logits[i].clone(), r))) for i, r in enumerate(rows[:5])]
    assert got[0].token_id == 9 and got[2].token_id != 9 and got[1].token_id == 6
    assert got[3].logprob is not None and len(got[3].top) == 2 and got[0].logprob is None
    assert 0 <= got[5].token_id < 50
