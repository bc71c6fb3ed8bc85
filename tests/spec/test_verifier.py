"""Speculative sampling is lossless: emitted tokens follow the target distribution exactly.

Statistical check: 100,000 draws for the two-draft case (20,000 for each other case) with fixed seeds; Pearson's chi-square of the
emitted-token histogram against the target p, compared with the 0.999 quantile of the
chi-square distribution (df = V - 1 = 7: 24.32). With fixed seeds the test is deterministic;
the threshold says how surprising the observed histogram would be under exact losslessness.
"""

from __future__ import annotations

import pytest
import torch

from onecat.spec.verifier import verify_greedy, verify_sampled

V = 8
DRAWS = 100_000
CHI2_999_DF7 = 24.32


def chi_square(counts: torch.Tensor, p: torch.Tensor) -> float:
    expected = p * counts.sum()
    mask = expected > 0
    assert counts[~mask].sum() == 0, "a token with target probability 0 was emitted"
    return float(((counts[mask] - expected[mask]) ** 2 / expected[mask]).sum())


def first_token_histogram(p_rows, draft_dist, draws, seed, k=1):
    """Draft k tokens from draft_dist (or deterministic drafts when a list), verify, histogram
    the first emitted token."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.zeros(V)
    second = torch.zeros(V)
    for _ in range(draws):
        if isinstance(draft_dist, list):
            draft, q = draft_dist, None
        else:
            draft = [int(torch.multinomial(draft_dist[i], 1, generator=g)) for i in range(k)]
            q = draft_dist[:k]
        out = verify_sampled(p_rows, draft, q, g)
        counts[out[0]] += 1
        if len(out) > 1 and out[0] == draft[0]:
            second[out[1]] += 1
    return counts, second


def _dist(*w):
    t = torch.tensor(w, dtype=torch.float64)
    return (t / t.sum()).float()


P0 = _dist(5, 1, 0.5, 3, 2, 0.1, 4, 1)
P1 = _dist(1, 1, 1, 1, 6, 1, 1, 0)  # includes a zero-probability token
CASES = {
    "good draft": _dist(4, 1, 1, 3, 2, 0.2, 4, 1),
    "bad draft": _dist(0.01, 9, 5, 0.01, 0.01, 7, 0.01, 3),
    "draft equals target": P0,
    "draft with zeros where target is not": _dist(1, 0, 0, 1, 0, 0, 1, 0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_first_token_follows_target(name):
    q = CASES[name]
    p_rows = torch.stack([P0, P1])
    counts, _ = first_token_histogram(p_rows, torch.stack([q]), DRAWS // 5, seed=7)
    assert chi_square(counts, P0) < CHI2_999_DF7, counts


def test_two_drafts_joint_distribution():
    """k = 2: the first token follows p0, and the second (after an accepted first) follows p1."""
    q = torch.stack([CASES["bad draft"], CASES["good draft"]])
    p_rows = torch.stack([P0, P1, P0])
    counts, second = first_token_histogram(p_rows, q, DRAWS, seed=11, k=2)
    assert chi_square(counts, P0) < CHI2_999_DF7
    assert chi_square(second, P1) < CHI2_999_DF7


def test_deterministic_draft_is_lossless_and_greedy_is_exact():
    p_rows = torch.stack([P0, P1])
    counts, _ = first_token_histogram(p_rows, [3], DRAWS // 5, seed=3)  # q one-hot at token 3
    assert chi_square(counts, P0) < CHI2_999_DF7
    logits = torch.log(torch.stack([P0, P1, P0]) + 1e-9)
    assert verify_greedy(logits, [0, 4]) == [0, 4, 0]  # all accepted + bonus
    assert verify_greedy(logits, [0, 2]) == [0, 4]  # second rejected -> target's argmax
    assert verify_greedy(logits, [1, 4]) == [0]  # first rejected


def test_edge_cases():
    g = torch.Generator().manual_seed(0)
    one_hot = torch.zeros(V)
    one_hot[2] = 1.0
    # target certain of the draft: always accepted, bonus drawn from the last row
    assert verify_sampled(torch.stack([one_hot, one_hot]), [2], None, g) == [2, 2]
    # target gives the draft probability 0: always rejected, never emitted
    for _ in range(200):
        out = verify_sampled(torch.stack([P1, P0]), [7], None, g)
        assert len(out) == 1 and out[0] != 7
    # q = 0 where p > 0 for the drawn token cannot happen, but q(d) = 0 must still not accept
    q = torch.stack([_dist(1, 1, 1, 1, 1, 1, 1, 1)])
    q[0, 5] = 0.0
    for _ in range(100):
        out = verify_sampled(torch.stack([P0, P1]), [5], q, g)
        assert len(out) == 1
    # p == q: the rejection residual is empty; accepted with probability 1
    for _ in range(100):
        assert len(verify_sampled(torch.stack([P0, P1]), [0], torch.stack([P0]), g)) == 2


def test_seeded_verification_is_deterministic():
    p_rows = torch.stack([P0, P1, P0])
    runs = [verify_sampled(p_rows, [1, 2], None, torch.Generator().manual_seed(99)) for _ in range(2)]
    assert runs[0] == runs[1]
