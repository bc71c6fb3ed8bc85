"""Per-request results and what a run's metrics are made of.

TTFT: send -> first output token. TPOT: (e2e - TTFT) / (output tokens - 1), per request.
ITL: the gaps between successive streamed outputs (pooled over requests). E2E: send -> end.
Throughputs are over the run's wall time (first send -> last end). A failed request (HTTP
error, malformed stream, timeout, engine refusal) is kept with its error and counted; it never
aborts the run and adds nothing to the latency distributions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from .contract import Metric, metric


@dataclass
class RequestResult:
    index: int
    prompt_tokens: int | None = None
    output_tokens: int = 0
    start: float = 0.0  # send time, s from the run's start
    ttft: float | None = None  # s
    e2e: float | None = None  # s
    itl: list[float] = field(default_factory=list)  # s
    finish_reason: str | None = None
    cached_tokens: int | None = None
    error: str | None = None
    error_kind: str | None = None  # http | malformed | timeout | connection | refused | engine | other
    tokens_estimated: bool = False  # output_tokens counted from stream chunks, not reported usage
    text: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def tpot(self) -> float | None:
        if self.ttft is None or self.e2e is None or self.output_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.output_tokens - 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tpot"] = self.tpot
        return d


def run_metrics(results: list[RequestResult], wall: float) -> dict[str, float]:
    """Throughputs of one run (one repeat)."""
    ok = [r for r in results if r.ok]
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens or 0 for r in ok)
    wall = max(wall, 1e-9)
    return {"output_throughput": out_tokens / wall, "request_throughput": len(ok) / wall,
            "total_token_throughput": (in_tokens + out_tokens) / wall,
            "success_rate": len(ok) / len(results) if results else 0.0}


def aggregate(repeats: list[tuple[list[RequestResult], float]]) -> tuple[dict[str, Metric], dict]:
    """Metrics over repeats (throughputs: median/min/max over repeats; latencies: percentiles over
    every successful request of every repeat) and the error summary."""
    metrics: dict[str, Metric] = {}
    per_run = [run_metrics(res, wall) for res, wall in repeats]
    units = {"output_throughput": "tok/s", "request_throughput": "req/s", "total_token_throughput": "tok/s",
             "success_rate": "fraction"}
    for name, unit in units.items():
        m = metric([r[name] for r in per_run], unit, "repeats")
        if m is not None:
            metrics[name] = m
    all_results = [r for res, _ in repeats for r in res]
    ok = [r for r in all_results if r.ok]
    lat = {"ttft": [r.ttft for r in ok], "tpot": [r.tpot for r in ok],
           "itl": [x for r in ok for x in r.itl], "e2e": [r.e2e for r in ok]}
    for name, xs in lat.items():
        m = metric([x * 1e3 for x in xs if x is not None], "ms", "requests")
        if m is not None:
            metrics[name] = m
    for name, xs in (("output_tokens", [r.output_tokens for r in ok]),
                     ("prompt_tokens", [r.prompt_tokens for r in ok if r.prompt_tokens is not None])):
        m = metric(xs, "tokens", "requests")  # what was actually sent and generated (usage, when reported)
        if m is not None:
            metrics[name] = m
    failed = [r for r in all_results if not r.ok]
    metrics["failed_requests"] = Metric(unit="requests", median=float(len(failed)), min=float(len(failed)),
                                        max=float(len(failed)), n=len(all_results), over="requests")
    errors = {"count": len(failed), "of": len(all_results),
              "by_kind": dict(Counter(r.error_kind or "other" for r in failed)),
              "examples": sorted({r.error for r in failed if r.error})[:5]}
    return metrics, errors
