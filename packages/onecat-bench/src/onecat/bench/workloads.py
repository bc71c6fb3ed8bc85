"""Workloads: prompts cut from real English text, and request arrival schedules.

Real text is `pydoc_data.topics` (the stdlib's help texts: every Python has it). Prompts are
token-id slices of exactly the asked length from the tokenized corpus, at offsets chosen by a
seeded generator, so a workload is reproducible from (tokenizer, lengths, seed). A shared-prefix
workload gives every prompt the same first `shared_prefix_len` tokens.
"""

from __future__ import annotations

import functools
import random
import zlib
from dataclasses import dataclass


@functools.lru_cache(maxsize=1)
def corpus_text() -> str:
    """The stdlib help topics, in sorted key order, joined by blank lines."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[k].strip() for k in sorted(topics))


def topic_texts() -> list[tuple[str, str]]:
    from pydoc_data.topics import topics

    return [(k, topics[k].strip()) for k in sorted(topics)]


class Corpus:
    """The tokenized corpus for one tokenizer (tokenized once)."""

    def __init__(self, tokenizer, max_chars: int = 400_000):
        self.tokenizer = tokenizer
        self.ids = tokenizer.encode(corpus_text()[:max_chars], add_special_tokens=False)

    def slice(self, start: int, length: int) -> list[int]:
        n = len(self.ids)
        if length > n:
            raise ValueError(f"a {length}-token prompt is longer than the corpus ({n} tokens)")
        start %= n - length + 1
        return self.ids[start:start + length]


def make_prompts(corpus: Corpus, num_prompts: int, input_len: int, seed: int = 0,
                 shared_prefix_len: int = 0) -> list[list[int]]:
    """`num_prompts` token-id prompts of exactly `input_len` tokens (the first `shared_prefix_len`
    of them common to all)."""
    if input_len < 1:
        raise ValueError("input_len must be >= 1")
    if not 0 <= shared_prefix_len <= input_len:
        raise ValueError(f"shared_prefix_len must be in [0, input_len={input_len}]")
    rng = random.Random(seed)
    n = len(corpus.ids)
    prefix = corpus.slice(rng.randrange(n), shared_prefix_len) if shared_prefix_len else []
    rest = input_len - shared_prefix_len
    return [prefix + (corpus.slice(rng.randrange(n), rest) if rest else []) for _ in range(num_prompts)]


def arrival_offsets(num: int, rate: float | None, seed: int = 0) -> list[float]:
    """Send times (s from the start): all at 0 when rate is None/inf, else a Poisson process."""
    if rate is None or rate == float("inf") or rate <= 0:
        return [0.0] * num
    rng = random.Random(seed + 7919)
    t, out = 0.0, []
    for _ in range(num):
        out.append(t)
        t += rng.expovariate(rate)
    return out


@dataclass
class WorkloadSpec:
    """One point of a sweep."""

    input_len: int
    output_len: int
    num_prompts: int
    concurrency: int | None = None  # None: all in flight
    request_rate: float | None = None  # None: all at once
    shared_prefix_len: int = 0
    seed: int = 0

    def prompt_seed(self, repeat: int) -> int:
        """A seed of its own for each point and repeat: no two points or repeats share prompt
        offsets, so the prefix cache only hits where a shared prefix is asked for."""
        key = (f"{self.seed}/{self.input_len}/{self.output_len}/{self.num_prompts}/{self.concurrency}/"
               f"{self.request_rate}/{self.shared_prefix_len}/{repeat}")
        return zlib.crc32(key.encode())


def parse_rate(s: str) -> float | None:
    return None if s.lower() in ("inf", "none", "0") else float(s)


# -- the sweep options every load-generating command shares ---------------------------------------
def add_sweep_args(ap) -> None:
    ap.add_argument("--input-len", type=int, nargs="+", default=[128], help="prompt tokens (a sweep)")
    ap.add_argument("--output-len", type=int, nargs="+", default=[64], help="generated tokens (a sweep)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1],
                    help="most requests in flight (a sweep; 0 = unlimited)")
    ap.add_argument("--request-rate", type=parse_rate, nargs="+", default=[None],
                    help="Poisson request rate per second (a sweep; inf = all at once)")
    ap.add_argument("--num-prompts", type=int, default=None, help="requests per point (default: 2 x concurrency)")
    ap.add_argument("--shared-prefix", type=int, default=0, help="tokens every prompt shares")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0, help="chooses the prompts and arrivals")
    ap.add_argument("--no-ignore-eos", action="store_true", help="let requests stop at EOS (lengths vary)")
    ap.add_argument("--out", default=None, help="append records to this JSON-lines file")
    ap.add_argument("--report", default=None, help="write a Markdown report here")
    ap.add_argument("--plots", default=None, help="write PNG plots into this directory")
    ap.add_argument("--requests-out", default=None, help="append per-request results (JSON lines) here")
    ap.add_argument("--no-progress", action="store_true")


def sweep_points(a) -> list[WorkloadSpec]:
    points = []
    for input_len in a.input_len:
        for output_len in a.output_len:
            for conc in a.concurrency:
                for rate in a.request_rate:
                    c = conc or None
                    n = a.num_prompts or max(2 * (c or 1), 2)
                    points.append(WorkloadSpec(input_len, output_len, n, c, rate, a.shared_prefix, a.seed))
    return points
