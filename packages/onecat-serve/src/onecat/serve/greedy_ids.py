"""Greedy token ids straight through the scheduler and a ModelRunner, with no tokenizer and no
engine: the loop GPU checks and graph tests drive with generated-weight models."""

from __future__ import annotations

import time

import torch

from .kv_cache_manager import KVCacheManager
from .model_runner import ModelRunner
from .request import Request, RequestStatus
from .sampling_params import SamplingParams
from .scheduler import Scheduler


def greedy_ids(runner: ModelRunner, prompts: list[list[int]], max_tokens: int,
               params: SamplingParams | None = None) -> tuple[list[list[int]], list[float]]:
    """Generate max_tokens greedy ids per prompt (batched as the scheduler decides; `params` other
    than greedy for seeded sampling checks). Returns the ids and the host-timed seconds of each
    pure-decode step (device-synchronized on CUDA). Checks that every request ran to its length
    and that every KV block is free again."""
    kv = KVCacheManager(runner.num_blocks, runner.block_size)
    sched = Scheduler(runner.config.scheduler, kv, runner.max_model_len)
    params = params or SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    reqs = [Request(str(i), p, params, max_tokens) for i, p in enumerate(prompts)]
    for r in reqs:
        sched.add(r)
    sync = torch.cuda.synchronize if runner.device.type == "cuda" else (lambda: None)
    step_times = []
    while sched.has_unfinished():
        out = sched.schedule()
        sync()
        t = time.perf_counter()
        sampled = runner.execute(out)
        sync()
        if all(len(s.token_ids) == 1 for s in out.scheduled):
            step_times.append(time.perf_counter() - t)
        sched.update_from_output(out, sampled)
    if not all(r.status == RequestStatus.FINISHED_LENGTH for r in reqs):
        raise RuntimeError(f"requests ended early: {[r.status for r in reqs]}")
    if kv.num_free_blocks != kv.num_blocks:
        raise RuntimeError(f"{kv.num_blocks - kv.num_free_blocks} KV blocks still held after every request ended")
    return [r.output_token_ids for r in reqs], step_times
