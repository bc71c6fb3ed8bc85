"""KV block bookkeeping on the CPU: exact block ids, reference counts, prefix hits, eviction order."""

from __future__ import annotations

import pytest

from onecat.serve.kv_cache_manager import KVCacheManager
from onecat.serve.request import Request
from onecat.serve.sampling_params import SamplingParams


def req(rid: str, tokens: list[int]) -> Request:
    return Request(rid, tokens, SamplingParams(), max_tokens=16)


def test_allocate_cache_share_and_free_in_lru_order():
    kv = KVCacheManager(num_blocks=10, block_size=4)
    a = req("a", list(range(10)))
    assert kv.get_computed_blocks(a) == ([], 0)
    assert kv.allocate_slots(a, 10)
    assert kv.block_ids("a") == [0, 1, 2]
    # the two full blocks are registered, the partial one is private
    assert [b.block_hash is not None for b in kv.req_blocks["a"]] == [True, True, False]

    b = req("b", list(range(8)) + [99, 98, 97])
    hits, n = kv.get_computed_blocks(b)
    assert [h.block_id for h in hits] == [0, 1] and n == 8
    b.num_computed_tokens = 0
    assert kv.allocate_slots(b, 3, hits)
    assert kv.block_ids("b") == [0, 1, 3]
    assert [blk.ref_cnt for blk in kv.pool.blocks[:4]] == [2, 2, 1, 1]
    assert kv.num_free_blocks == 6

    kv.free(a)
    assert [blk.ref_cnt for blk in kv.pool.blocks[:4]] == [1, 1, 0, 1]
    kv.free(b)
    assert kv.num_free_blocks == 10
    # freed tail first: LRU order is the never-used blocks, then 2 (a's tail), 3, 1, 0
    assert list(kv.pool.free)[-4:] == [2, 3, 1, 0]

    # a third request with the same prefix revives the free cached blocks without allocating them
    c = req("c", list(range(8)) + [5])
    hits, n = kv.get_computed_blocks(c)
    assert [h.block_id for h in hits] == [0, 1] and n == 8
    assert kv.allocate_slots(c, 1, hits)
    assert kv.block_ids("c") == [0, 1, 4]
    assert kv.prefix_hits == 16 and kv.prefix_queries == 10 + 11 + 9


def test_eviction_takes_least_recently_freed_and_drops_its_hash():
    kv = KVCacheManager(num_blocks=4, block_size=2)
    a = req("a", [1, 2, 3, 4, 5, 6, 7, 8])
    assert kv.allocate_slots(a, 8)
    kv.free(a)  # all four cached; freed 3, 2, 1, 0
    b = req("b", [9, 9, 9])
    assert kv.allocate_slots(b, 3)
    assert kv.block_ids("b") == [3, 2]  # a's tail blocks go first
    assert kv.pool.num_evictions == 2
    hits, n = kv.get_computed_blocks(req("c", [1, 2, 3, 4, 5, 6, 7]))
    assert [h.block_id for h in hits] == [0, 1] and n == 4


def test_allocation_failure_changes_nothing():
    kv = KVCacheManager(num_blocks=3, block_size=4)
    a = req("a", list(range(12)))
    assert kv.allocate_slots(a, 12)
    b = req("b", list(range(100, 105)))
    assert not kv.allocate_slots(b, 5)
    assert kv.block_ids("b") == [] and kv.num_free_blocks == 0
    # a hit on blocks still held does not need free blocks, but new ones do
    c = req("c", list(range(9)))
    hits, n = kv.get_computed_blocks(c)
    assert n == 8 and not kv.allocate_slots(c, 1, hits)
    assert [blk.ref_cnt for blk in kv.pool.blocks] == [1, 1, 1]


def test_whole_prompt_hit_still_leaves_a_token_to_compute():
    kv = KVCacheManager(num_blocks=8, block_size=4)
    a = req("a", list(range(8)))
    assert kv.allocate_slots(a, 8)
    hits, n = kv.get_computed_blocks(req("b", list(range(8))))
    assert n == 4 and len(hits) == 1


def test_prefix_caching_off_never_hits():
    kv = KVCacheManager(num_blocks=8, block_size=4, enable_prefix_caching=False)
    a = req("a", list(range(8)))
    assert kv.allocate_slots(a, 8)
    assert kv.get_computed_blocks(req("b", list(range(9)))) == ([], 0)
    assert kv.pool.cached == {}


def test_pool_needs_a_block():
    with pytest.raises(ValueError, match="at least one block"):
        KVCacheManager(num_blocks=0, block_size=16)
