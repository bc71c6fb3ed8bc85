"""PPL unchanged by verify steps: real text scored through the engine's verify path (the last
confirmed token + k drafts per step, the drafts after the first `accept` deliberately wrong, so
their KV is written, rejected and overwritten next step) gives the same perplexity as scoring the
whole sequence at once, under onecat.bench.quality's PPL gate."""

from __future__ import annotations

import torch

from onecat.bench.quality import PPL_TOLERANCE, ppl_gate, text_segments
from onecat.serve.config import CacheConfig, EngineConfig
from onecat.serve.kv_cache_manager import KVCacheManager
from onecat.serve.model_runner import ModelRunner
from onecat.serve.request import Request
from onecat.serve.sampling_params import SamplingParams
from onecat.serve.scheduler import ScheduledRequest, SchedulerOutput


def verify_scorer(runner: ModelRunner, k: int, accept: int):
    """logits [T, V] at every position, each taken from a verify step whose context went through
    rollbacks of wrong drafts."""
    vocab = runner.spec.vocab_size

    def score(ids: list[int]) -> torch.Tensor:
        kv = KVCacheManager(runner.num_blocks, runner.block_size, enable_prefix_caching=False)
        req = Request("ppl", ids[:1], SamplingParams(temperature=0), 1 << 20)
        rows: list[torch.Tensor] = []
        pos = 0  # tokens [0, pos) are confirmed and in the KV cache
        while pos < len(ids):
            good = ids[pos + 1:pos + 1 + accept]
            wrong = [(t + 1) % vocab for t in ids[pos + 1 + accept:pos + 1 + k]]  # rejected drafts
            req.all_token_ids, req.num_computed_tokens = ids[:pos + 1], pos
            assert kv.allocate_slots(req, 1 + len(good) + len(wrong))
            runner.execute(SchedulerOutput([ScheduledRequest(req, [ids[pos]], pos, kv.block_ids("ppl"), True,
                                                             good + wrong)]))
            start, hidden = runner.last_hidden["ppl"]
            assert start == pos
            rows.append(runner.model.compute_logits(hidden[:1 + len(good)]))  # positions with a right context
            pos += 1 + len(good)
        kv.free(req)
        return torch.cat(rows)[:len(ids)]

    return score


def test_verify_steps_leave_ppl_unchanged(llm):
    cfg = EngineConfig(cache=CacheConfig(num_blocks=16))
    runner = ModelRunner(cfg, loaded=llm.engine.runner.loaded, progress=False)
    runner.keep_hidden = True
    segments = text_segments(llm.tokenizer, 1, 64)
    q = ppl_gate(verify_scorer(runner, k=4, accept=2), runner.score, segments, reference_name="one-pass score")
    assert q.passed and abs(q.ppl_rel_diff) < PPL_TOLERANCE / 100, q
    assert 1.0 < q.ppl < 100.0 and q.greedy_agreement_all == 1.0
