"""n-gram prompt lookup: what it proposes, and how k adapts."""

from __future__ import annotations

import pytest

from onecat.spec import NgramProposer


def test_proposes_what_followed_the_most_recent_match():
    p = NgramProposer(num_speculative_tokens=3, min_n=2, max_n=3)
    ctx = [1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 1, 2, 3]
    assert p.propose("r", ctx, 3).token_ids == [7, 8, 1]  # the later [1,2,3] wins
    assert p.propose("r", ctx, 2).token_ids == [7, 8]  # capped by max_tokens
    assert p.propose("r", [1, 2, 3, 4], 3).token_ids == []  # no earlier occurrence
    assert p.propose("r", [5, 1, 2, 6, 1, 2], 3).token_ids == [6, 1, 2]  # falls back to n = 2


def test_k_adapts_to_acceptance():
    p = NgramProposer(num_speculative_tokens=4, min_k=1)
    p.states["r"] = p._state("r")
    p.states["r"].k = 2
    for _ in range(3):
        p.observe("r", 2, 2)
    assert p.states["r"].k == 4
    for _ in range(8):
        p.observe("r", 4, 0)
    assert p.states["r"].k == 1
    p.release("r")
    assert "r" not in p.states


def test_bad_settings():
    with pytest.raises(ValueError):
        NgramProposer(min_n=3, max_n=2)
    with pytest.raises(ValueError):
        NgramProposer(num_speculative_tokens=0)
