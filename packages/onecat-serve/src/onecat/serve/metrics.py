"""Prometheus metrics, named `onecat:*` after vLLM's `vllm:*`, on a per-app registry.

Two sources: the engine's own state (running/waiting, KV usage, prefix cache, preemptions) is
read from `llm.stats()` at scrape time by a collector; per-request timings and token counts are
recorded by the API server when a request ends (`ServerMetrics.observe_request`)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_TPOT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
_E2E_BUCKETS = (0.1, 0.3, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 120.0, 300.0)


class EngineStatsCollector(Collector):
    """Reads `stats()` (see AsyncLLM.stats) on every scrape."""

    def __init__(self, stats: Callable[[], dict], model_name: str) -> None:
        self.stats = stats
        self.model_name = model_name

    def collect(self):
        s, labels = self.stats(), ["model_name"]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=labels)
            g.add_metric([self.model_name], value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=labels)
            c.add_metric([self.model_name], value)
            return c

        yield gauge("onecat:num_requests_running", "Requests in the running batch.", s["num_running"])
        yield gauge("onecat:num_requests_waiting", "Requests waiting to be scheduled.", s["num_waiting"])
        yield gauge("onecat:kv_cache_usage_perc", "Fraction of KV cache blocks in use (0..1).",
                    s["kv_cache_usage"])
        yield gauge("onecat:num_free_blocks", "Free KV cache blocks.", s["num_free_blocks"])
        yield gauge("onecat:num_total_blocks", "Total KV cache blocks.", s["num_total_blocks"])
        queries, hits = s["prefix_cache_queries"], s["prefix_cache_hits"]
        yield counter("onecat:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.", queries)
        yield counter("onecat:prefix_cache_hits", "Prompt tokens found in the prefix cache.", hits)
        yield gauge("onecat:prefix_cache_hit_rate", "prefix_cache_hits / prefix_cache_queries since start.",
                    hits / queries if queries else 0.0)
        yield counter("onecat:num_preemptions", "Requests preempted for lack of KV blocks.", s["num_preemptions"])
        proposed, accepted = s.get("spec_drafts_proposed", 0), s.get("spec_drafts_accepted", 0)
        yield counter("onecat:spec_decode_num_draft_tokens", "Drafted tokens verified by the target.", proposed)
        yield counter("onecat:spec_decode_num_accepted_tokens", "Drafted tokens accepted.", accepted)
        per_pos = CounterMetricFamily("onecat:spec_decode_num_accepted_tokens_per_pos",
                                      "Drafted tokens accepted, by position in the draft.", labels=labels + ["position"])
        for pos, n in sorted(s.get("spec_accepted_per_position", {}).items()):
            per_pos.add_metric([self.model_name, str(pos)], n)
        yield per_pos


class ServerMetrics:
    def __init__(self, stats: Callable[[], dict], model_name: str) -> None:
        self.registry = CollectorRegistry()
        self.model_name = model_name
        self.registry.register(EngineStatsCollector(stats, model_name))
        labels, r = ["model_name"], self.registry
        self.prompt_tokens = Counter("onecat:prompt_tokens", "Prompt tokens processed.", labels, registry=r)
        self.generation_tokens = Counter("onecat:generation_tokens", "Tokens generated.", labels, registry=r)
        self.request_success = Counter("onecat:request_success",
                                       "Finished sequences (each of a request's n) by finish reason.",
                                       labels + ["finished_reason"], registry=r)
        self.ttft = Histogram("onecat:time_to_first_token_seconds", "Time to first token.", labels,
                              buckets=_TTFT_BUCKETS, registry=r)
        self.tpot = Histogram("onecat:time_per_output_token_seconds",
                              "Time per output token after the first.", labels, buckets=_TPOT_BUCKETS, registry=r)
        self.e2e = Histogram("onecat:e2e_request_latency_seconds", "End-to-end request latency.", labels,
                             buckets=_E2E_BUCKETS, registry=r)

    def observe_request(self, *, prompt_tokens: int, output_tokens: list[int], finish_reasons: list[str | None],
                        arrival: float, first_token: float | None, finished: float) -> None:
        """Record one engine request (all its n outputs) once it has ended; times are monotonic."""
        m = self.model_name
        self.prompt_tokens.labels(m).inc(prompt_tokens)
        self.generation_tokens.labels(m).inc(sum(output_tokens))
        for reason in finish_reasons:
            self.request_success.labels(m, reason or "abort").inc()
        self.e2e.labels(m).observe(finished - arrival)
        if first_token is not None:
            self.ttft.labels(m).observe(first_token - arrival)
            steps = max(output_tokens, default=0) - 1  # the n outputs decode side by side
            if steps > 0:
                self.tpot.labels(m).observe((finished - first_token) / steps)

    def render(self) -> bytes:
        return generate_latest(self.registry)
