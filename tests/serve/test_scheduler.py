"""Scheduler on the CPU: token budget and chunked prefill, admission limits, preemption, priority policy."""

from __future__ import annotations

import pytest

from onecat.serve.config import SchedulerConfig
from onecat.serve.kv_cache_manager import KVCacheManager
from onecat.serve.request import Request, RequestStatus
from onecat.serve.sampling_params import SamplingParams
from onecat.serve.scheduler import Scheduler


def make(num_blocks=64, block_size=4, budget=8, max_seqs=8, chunked=True):
    kv = KVCacheManager(num_blocks, block_size)
    cfg = SchedulerConfig(max_num_seqs=max_seqs, max_num_batched_tokens=budget, enable_chunked_prefill=chunked)
    return Scheduler(cfg, kv, max_model_len=1024)


def run_step(s: Scheduler, token=7):
    out = s.schedule()
    sampled = {x.request.request_id: [(token, None)] for x in out.scheduled if x.sample}
    s.update_from_output(out, sampled)
    return out


def test_long_prompt_is_chunked_under_the_budget():
    s = make(budget=8)
    r = Request("r", list(range(20)), SamplingParams(max_tokens=3), max_tokens=3)
    s.add(r)
    sizes = []
    for _ in range(3):
        out = run_step(s)
        sizes.append([(len(x.token_ids), x.start_pos, x.sample) for x in out.scheduled])
    assert sizes == [[(8, 0, False)], [(8, 8, False)], [(4, 16, True)]]
    assert r.output_token_ids == [7]
    out = run_step(s)
    assert [(x.token_ids, x.start_pos) for x in out.scheduled] == [([7], 20)]


def test_running_decodes_come_before_new_prefills():
    s = make(budget=8)
    a = Request("a", list(range(4)), SamplingParams(max_tokens=5), max_tokens=5)
    s.add(a)
    run_step(s)
    b = Request("b", list(range(100, 120)), SamplingParams(max_tokens=5), max_tokens=5)
    s.add(b)
    out = run_step(s)
    assert [(x.request.request_id, len(x.token_ids)) for x in out.scheduled] == [("a", 1), ("b", 7)]


def test_max_num_seqs_limits_admission():
    s = make(budget=100, max_seqs=2)
    for i in range(3):
        s.add(Request(f"r{i}", [1, 2, 3], SamplingParams(max_tokens=2), max_tokens=2))
    out = run_step(s)
    assert [x.request.request_id for x in out.scheduled] == ["r0", "r1"]
    assert len(s.waiting) == 1


def test_without_chunking_a_prompt_waits_for_room():
    s = make(budget=8, chunked=False)
    s.add(Request("big", list(range(10)), SamplingParams(max_tokens=2), max_tokens=2))
    assert s.schedule().is_empty


def test_preemption_frees_the_newest_and_it_recomputes_everything():
    s = make(num_blocks=8, block_size=2, budget=64)
    a = Request("a", [1, 2, 3], SamplingParams(max_tokens=10), max_tokens=10)
    b = Request("b", [4, 5, 6], SamplingParams(max_tokens=10), max_tokens=10)
    s.add(a)
    s.add(b)
    steps = 0
    while not (out := run_step(s)).preempted:
        steps += 1
        assert steps < 10
    # both grew in step; at 9 tokens each would need a 5th block of the 8: the newest goes
    assert out.preempted == ["b"] and a.num_computed_tokens == 9
    assert b.status == RequestStatus.PREEMPTED and b.num_computed_tokens == 0
    assert s.kv.block_ids("b") == []
    assert [x.request.request_id for x in out.scheduled] == ["a"]
    while a.status == RequestStatus.RUNNING:
        run_step(s)
    assert a.status == RequestStatus.FINISHED_LENGTH and a.num_output_tokens == 10
    out = run_step(s)  # b comes back: its freed blocks were still cached, the rest is recomputed
    x = out.scheduled[0]
    assert x.request is b and x.start_pos > 0 and x.start_pos % 2 == 0
    assert x.token_ids == b.all_token_ids[x.start_pos:-1] and x.sample
    assert b.num_cached_tokens == 0  # counted at its first admission only
    assert s.num_preemptions == 1


def test_stop_token_and_eos_and_min_tokens():
    s = make()
    p = SamplingParams(max_tokens=10, stop_token_ids=[7], min_tokens=2)
    r = Request("r", [1, 2], p, max_tokens=10, eos_token_ids=frozenset({9}))
    s.add(r)
    run_step(s, token=7)  # below min_tokens: not a stop yet
    assert r.status == RequestStatus.RUNNING
    run_step(s, token=7)
    assert r.status == RequestStatus.FINISHED_STOPPED and r.stop_reason == 7
    assert s.kv.num_free_blocks == s.kv.num_blocks


def make_priority(num_blocks=64, block_size=4, budget=64, max_seqs=8):
    kv = KVCacheManager(num_blocks, block_size)
    return Scheduler(SchedulerConfig(max_num_seqs=max_seqs, max_num_batched_tokens=budget, policy="priority"), kv,
                     max_model_len=1024)


def test_priority_admits_the_lowest_value_first():
    s = make_priority(max_seqs=1)
    for rid, prio, t in (("late-low", 5, 1.0), ("urgent", -1, 2.0), ("mid", 0, 3.0), ("mid-later", 0, 4.0)):
        s.add(Request(rid, [1, 2, 3], SamplingParams(max_tokens=1), max_tokens=1, arrival_time=t, priority=prio))
    order = []
    while s.has_unfinished():
        order += [x.request.request_id for x in run_step(s).scheduled]
    assert order == ["urgent", "mid", "mid-later", "late-low"]
    fcfs = make(max_seqs=1)
    for rid, prio in (("a", 5), ("b", -1)):
        fcfs.add(Request(rid, [1, 2, 3], SamplingParams(max_tokens=1), max_tokens=1, priority=prio))
    assert [x.request.request_id for x in run_step(fcfs).scheduled] == ["a"]  # fcfs: arrival order


def test_priority_preempts_the_worst_ranked_and_requeues_it_by_rank():
    # 6 blocks of 4: three 8-token prompts take 2 blocks each; the next decode token needs a 7th block.
    s = make_priority(num_blocks=6, block_size=4, budget=64)
    reqs = [Request(rid, list(range(8)), SamplingParams(max_tokens=4, ignore_eos=True), max_tokens=4,
                    arrival_time=t, priority=p) for rid, p, t in (("low", 9, 1.0), ("high", 0, 2.0), ("mid", 3, 3.0))]
    for r in reqs:
        s.add(r)
    run_step(s)  # all three prefill
    out = run_step(s)  # the first decode of each needs a new block: the worst-ranked goes
    assert out.preempted == ["low"] and [w.request_id for w in s.waiting] == ["low"]
    assert {x.request.request_id for x in out.scheduled} == {"high", "mid"}


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="fcfs or priority"):
        Scheduler(SchedulerConfig(policy="lifo"), KVCacheManager(8, 4), max_model_len=64)


def make_prefill_first(num_blocks=64, block_size=4, budget=8, max_seqs=8):
    kv = KVCacheManager(num_blocks, block_size)
    cfg = SchedulerConfig(max_num_seqs=max_seqs, max_num_batched_tokens=budget, prefill_first=True)
    return Scheduler(cfg, kv, max_model_len=1024)


def rows(out) -> list[tuple[str, int]]:
    return [(x.request.request_id, len(x.token_ids)) for x in out.scheduled]


def test_prefill_first_holds_decode_rows_while_a_prompt_can_be_admitted():
    """The step test_running_decodes_come_before_new_prefills gives to a's decode row goes to b's prompt; a prompt
    already chunked goes on first; once no prompt waits, both decode together."""
    s = make_prefill_first(budget=8)
    a = Request("a", list(range(4)), SamplingParams(max_tokens=5), max_tokens=5)
    s.add(a)
    assert rows(run_step(s)) == [("a", 4)]
    b = Request("b", list(range(100, 120)), SamplingParams(max_tokens=5), max_tokens=5)
    c = Request("c", list(range(200, 203)), SamplingParams(max_tokens=5), max_tokens=5)
    s.add(b)
    s.add(c)
    assert rows(run_step(s)) == [("b", 8)]  # a waits
    assert rows(run_step(s)) == [("b", 8)]  # b's remainder first (it is running), then c had no budget left
    assert rows(run_step(s)) == [("b", 4), ("c", 3)]
    assert rows(run_step(s)) == [("a", 1), ("b", 1), ("c", 1)]  # nothing waits: every decode row
    assert (a.output_token_ids, b.output_token_ids, c.output_token_ids) == ([7, 7], [7, 7], [7, 7])


def test_prefill_first_holds_decode_rows_until_a_chunked_prompt_is_in():
    s = make_prefill_first(budget=8)
    s.add(Request("a", list(range(4)), SamplingParams(max_tokens=5), max_tokens=5))
    run_step(s)
    s.add(Request("b", list(range(100, 120)), SamplingParams(max_tokens=5), max_tokens=5))
    assert [rows(run_step(s)) for _ in range(4)] == [[("b", 8)], [("b", 8)], [("b", 4)], [("a", 1), ("b", 1)]]


def test_prefill_first_decodes_when_no_prompt_can_be_admitted():
    """No seat, or no KV blocks for the next prompt's first chunk: the decode rows run (no step is lost to a prompt
    that cannot start), and the prompt is admitted once they free room."""
    s = make_prefill_first(budget=100, max_seqs=1)
    s.add(Request("a", [1, 2, 3], SamplingParams(max_tokens=2), max_tokens=2))
    s.add(Request("b", [4, 5, 6], SamplingParams(max_tokens=2), max_tokens=2))
    assert rows(run_step(s)) == [("a", 3)]
    assert rows(run_step(s)) == [("a", 1)]  # b has no seat
    assert rows(run_step(s)) == [("b", 3)]  # a finished
    s = make_prefill_first(num_blocks=3, block_size=4, budget=100)
    s.add(Request("a", list(range(8)), SamplingParams(max_tokens=4), max_tokens=4))
    assert rows(run_step(s)) == [("a", 8)]
    s.add(Request("b", list(range(10, 18)), SamplingParams(max_tokens=2), max_tokens=2))  # 2 blocks, 1 free
    assert rows(run_step(s)) == [("a", 1)]
    assert len(s.waiting) == 1


def test_prefill_first_is_off_by_default():
    assert SchedulerConfig().prefill_first is False
