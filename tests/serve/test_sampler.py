"""onecat.serve.sampler: the batched plain-greedy path picks what the row-by-row path picks."""

import pytest
import torch

from onecat.serve.sampler import (SampleRow, _plain_greedy, apply_penalties, bad_word_bans, processed_probs, sample,
                                  value_free)
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


def test_sampled_rows_are_the_sample_op_keyed_by_seed_and_step():
    from onecat.kernels.sampling_ops import sample_reference

    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 64, generator=g) * 3
    rows = [_row(temperature=0.8, top_k=10, out=[4] * 5), _row(temperature=0.0),
            _row(temperature=1.3, top_p=0.9, min_p=0.05, out=[1, 2])]
    rows[0].seed, rows[2].seed = 11, 2**40 + 7
    got = [t.token_id for t in sample(logits, rows)]
    f32, i32, i64 = torch.float32, torch.int32, torch.int64
    want = sample_reference(logits[[0, 2]], torch.tensor([0.8, 1.3], dtype=f32), torch.tensor([10, 0], dtype=i32),
                            torch.tensor([1.0, 0.9], dtype=f32), torch.tensor([0.0, 0.05], dtype=f32),
                            torch.tensor([11, 2**40 + 7], dtype=i64), torch.tensor([5, 2], dtype=i64)).tolist()
    assert [got[0], got[2]] == want and got[1] == int(torch.argmax(logits[1]))
    # a row's draw does not depend on the rows beside it
    assert sample(logits[2:], rows[2:])[0].token_id == got[2]


def test_processed_probs_is_the_ops_distribution():
    from onecat.kernels.sampling_ops import sampling_keep_mask

    g = torch.Generator().manual_seed(2)
    raw = torch.randn(200, generator=g) * 2
    row = _row(temperature=0.7, top_k=40, top_p=0.8, min_p=0.02, repetition_penalty=1.2)
    probs = processed_probs(raw, row)
    x = apply_penalties(raw.clone(), row)[None]
    keep, _ = sampling_keep_mask(x, torch.tensor([0.7]), torch.tensor([40], dtype=torch.int32), torch.tensor([0.8]),
                                 torch.tensor([0.02]))
    assert torch.equal(probs > 0, keep[0]) and abs(float(probs.sum()) - 1) < 1e-5
    assert 0 < int(keep.sum()) < 40


def test_fp16_logits_as_a_decode_graph_returns_them():
    """Plain greedy rows take the argmax of the FP16 logits as they are (ties: the first index, as on
    their float32 conversion); any other row makes the whole batch float32 first, so every path
    sees exactly what it would see from float32 logits of the same values."""
    g = torch.Generator().manual_seed(4)
    logits = (torch.randn(4, 300, generator=g) * 4).half()
    logits[0, 17] = logits[0, 250] = 30.0  # a tie
    greedy = [_row(temperature=0.0) for _ in range(4)]
    assert [t.token_id for t in sample(logits, greedy)] == torch.argmax(logits.float(), -1).tolist()
    assert sample(logits, greedy)[0].token_id == 17
    mixed = [_row(temperature=0.0), _row(temperature=0.0, logprobs=1), _row(temperature=0.9, seed=5),
             _row(temperature=0.0, repetition_penalty=1.2)]
    got, want = sample(logits, mixed), sample(logits.float(), mixed)
    assert [(t.token_id, t.logprob) for t in got] == [(t.token_id, t.logprob) for t in want]
    assert got[1].logprob is not None


def test_logit_bias_moves_the_pick_and_is_checked():
    """OpenAI's logit_bias: added to the logits before anything else reads them (greedy and sampled rows, the
    batched path included); keys must be token ids and values within [-100, 100]."""
    logits = torch.zeros(2, 50)
    logits[:, 3] = 5.0
    rows = [_row(temperature=0.0, logit_bias={7: 6.0}), _row(temperature=0.0, logit_bias={3: -100})]
    assert not _plain_greedy(rows[0])
    picked = [t.token_id for t in sample(logits, rows)]
    assert picked[0] == 7 and picked[1] != 3
    assert apply_penalties(logits[0].clone(), rows[0])[7] == 6.0
    hot = _row(temperature=1.0, logit_bias={11: 100})
    assert [t.token_id for t in sample(torch.zeros(1, 50), [hot])] == [11]
    for bad in ({-1: 1.0}, {"3": 1.0}, {3: 101}, {3: float("nan")}, {True: 1.0}):
        with pytest.raises(ValueError, match="logit_bias"):
            SamplingParams(logit_bias=bad)


def test_allowed_token_ids_and_bad_words_mask_the_logits():
    """vLLM's allowed_token_ids (only these may come) and bad_words (a word's last token is banned where the
    output ends with the rest of it), on greedy, batched and sampled rows."""
    logits = torch.zeros(3, 50)
    logits[:, 3] = 5.0
    logits[:, 8] = 4.0
    allowed = _row(temperature=0.0, allowed_token_ids=[8, 9])
    single = SampleRow(SamplingParams(temperature=0.0), [1], [5, 7], None, frozenset(), bad_word_ids=((3,),))
    pair = SampleRow(SamplingParams(temperature=0.0), [1], [5, 7], None, frozenset(), bad_word_ids=((7, 3), (6, 8)))
    assert not any(_plain_greedy(r) for r in (allowed, single, pair))
    assert [t.token_id for t in sample(logits, [allowed, single, pair])] == [8, 8, 8]
    masked = apply_penalties(logits[0].clone(), allowed)
    assert torch.isinf(masked).sum() == 48 and masked[8] == 4.0 and masked[9] == 0.0
    assert bad_word_bans(((7, 3), (6, 8), (4,)), [5, 7]) == [3, 4]
    assert bad_word_bans(((5, 7, 3),), [7]) == []  # the output is shorter than the word's prefix
    assert bad_word_bans(((5, 7, 3),), [5, 7]) == [3]
    hot = _row(temperature=1.0, allowed_token_ids=[11])
    assert [t.token_id for t in sample(torch.zeros(1, 50), [hot])] == [11]
    assert not value_free(SamplingParams(bad_words=["x"])) and value_free(SamplingParams(allowed_token_ids=[1]))
    for kw in ({"allowed_token_ids": []}, {"allowed_token_ids": [-1]}, {"allowed_token_ids": [True]},
               {"bad_words": [" "]}, {"truncate_prompt_tokens": 0}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            SamplingParams(**kw)
