"""Benchmarks of the embedded SmolLM2 on the CPU, end to end: the in-process engine and a real
onecat server (uvicorn on 127.0.0.1 in a thread) each produce contract records, a Markdown report
and plots; compare pairs them; the PPL gate passes against HF transformers on the same GGUF.

Kept small (a few short requests, torch on one thread: on a shared 2-core machine one thread is
many times faster than two fighting for cores)."""

from __future__ import annotations


import pytest
import torch

from onecat.bench.contract import MEASURED, read_jsonl
from onecat.bench.offline import bench_point as offline_point
from onecat.bench.offline import warm_up
from onecat.bench.online import bench_point as online_point
from onecat.bench.report import compare_rows, emit
from onecat.bench.workloads import Corpus, WorkloadSpec


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def corpus(llm):
    return Corpus(llm.tokenizer, max_chars=60_000)


@pytest.fixture(scope="module")
def server(serve_app):
    from onecat.serve.api_server import build_app
    from onecat.serve.async_llm import AsyncLLM
    from onecat.serve.config import EngineConfig, ServerConfig

    llm = AsyncLLM.from_config(EngineConfig(), progress=False)
    with serve_app(build_app(llm, ServerConfig(port=0))) as s:
        yield s


def _check_record(rec, kind: str, n_requests: int) -> None:
    assert rec.kind == MEASURED and rec.workload.kind == kind
    m = rec.metrics
    for name in ("output_throughput", "request_throughput", "ttft", "tpot", "itl", "e2e"):
        assert m[name].median > 0, name
    assert m["failed_requests"].median == 0 and rec.errors["count"] == 0
    assert m["ttft"].n == n_requests and m["ttft"].over == "requests" and m["ttft"].p99 >= m["ttft"].median
    assert m["output_tokens"].median == rec.workload.output_len  # ignore_eos: exact lengths
    assert m["output_throughput"].min <= m["output_throughput"].median <= m["output_throughput"].max
    assert rec.model.tp == 1 and rec.model.pp == 1
    assert rec.machine.torch and rec.sampling.temperature == 0.0 and rec.sampling.workload_seed == 0


def test_offline_and_online_records_report_plots_and_compare(llm, server, corpus, tmp_path):
    warm_up(llm)
    offline = [offline_point(llm, WorkloadSpec(il, 6, 2 * c, c), repeats=2, corpus=corpus)
               for il, c in ((16, 1), (16, 2), (48, 2))]
    for rec in offline:
        _check_record(rec, "offline", 2 * 2 * rec.workload.concurrency)
        assert rec.runtime.device == "cpu" and rec.runtime.kv_dtype == "float32" and rec.runtime.graph_mode == "eager: not a CUDA device"
        # linear on the CPU: the torch reference, reached through row_parts for the embedded file's projections
        # whose parts differ in format
        assert rec.runtime.prefix_cache.startswith("enabled") and rec.runtime.route["linear"] in ("torch", "row_parts,torch")
        assert rec.metrics["prefix_cache_hit_rate"].median == 0  # fresh prompts per point and repeat: cold
        assert rec.model.weight_format.startswith("gguf:Q4_1") and rec.model.arch == "llama" and rec.model.layers == 30
    online = [online_point(server.url, llm.tokenizer, WorkloadSpec(16, 6, 2, 2), repeats=1, corpus=corpus,
                           prompt_format="tokens"),
              online_point(server.url, llm.tokenizer, WorkloadSpec(16, 6, 2, 2), repeats=1, corpus=corpus,
                           chat=True)]
    for rec in online:
        _check_record(rec, "online", 2)
        assert rec.model.name == llm.engine.model_name  # from /v1/models
        assert rec.workload.endpoint.startswith(server.url + "/v1/")
    assert online[0].metrics["ttft"].n == 2 and online[0].workload.dataset.endswith("(tokens prompts)")

    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    written = emit(offline + online, a, str(tmp_path / "report.md"), str(tmp_path / "plots"))
    assert sorted(p.rsplit("/", 1)[-1] for p in written) == ["a.jsonl", "report.md", "throughput_vs_concurrency.png",
                                                             "tpot_vs_context.png"]
    report = (tmp_path / "report.md").read_text()
    assert "## offline (measured)" in report and "## online (measured)" in report and "## Contracts" in report
    assert "CPU only" in report and "Kernel route" in report
    for name in ("throughput_vs_concurrency.png", "tpot_vs_context.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:4] == b"\x89PNG"

    # a second run of one configuration, compared with the first
    emit([offline_point(llm, WorkloadSpec(16, 6, 4, 2), repeats=1, corpus=corpus)], b, None, None)
    rows = compare_rows(read_jsonl(a), read_jsonl(b))
    tput = [r for r in rows if r["metric"] == "output_throughput"]
    assert len(tput) == 1 and "conc 2" in tput[0]["config"] and "in 16" in tput[0]["config"]
    assert tput[0]["ratio"] == pytest.approx(tput[0]["b"] / tput[0]["a"]) and tput[0]["ratio"] > 0


def test_poisson_and_shared_prefix_offline(llm, corpus):
    rec = offline_point(llm, WorkloadSpec(24, 3, 3, None, request_rate=20.0, shared_prefix_len=16), repeats=1,
                        corpus=corpus)
    assert rec.workload.request_rate == 20.0 and rec.workload.shared_prefix_len == 16
    assert rec.errors["count"] == 0
    # the later prompts find the shared 16-token prefix (one full 16-token block) in the cache
    assert rec.metrics["prefix_cache_hit_rate"].median > 0


def test_ppl_gate_passes_against_hf(llm, hf_smollm2):
    from onecat.bench.quality import hf_scorer, onecat_scorer, ppl_gate, text_segments

    segs = text_segments(llm.tokenizer, 3, 48)
    assert [len(s) for s in segs] == [48, 48, 48]
    assert text_segments(llm.tokenizer, 3, 48) == segs  # fixed
    q = ppl_gate(onecat_scorer(llm), hf_scorer(hf_smollm2[0]), segs, reference_name="HF transformers")
    assert q.passed, f"onecat PPL {q.ppl} vs HF {q.ppl_reference} (rel {q.ppl_rel_diff:+.2e})"
    assert abs(q.ppl_rel_diff) <= 1e-3 and 1 < q.ppl < 1000
    assert q.greedy_agreement >= 0.99 and q.details["clear_positions"] > 0


def test_behaviour_gates_offline(llm):
    from onecat.bench.quality import BEHAVIOUR_PROMPTS, behaviour_offline

    prompts = BEHAVIOUR_PROMPTS[:2] + BEHAVIOUR_PROMPTS[5:7]
    q = behaviour_offline(llm, max_tokens=12, prompts=prompts)
    reasons = [o["finish_reason"] for o in q.details["outputs"]]
    assert all(r in ("stop", "length") for r in reasons)
    assert q.natural_stop_rate == reasons.count("stop") / 4 and q.capped_outputs == reasons.count("length")
    assert q.json_prompts == 2 and 0 <= q.invalid_json <= 2
    assert "Paris" in q.details["outputs"][0]["text"]


def test_behaviour_gates_online(server):
    from onecat.bench.quality import BEHAVIOUR_PROMPTS, behaviour_online

    q = behaviour_online(server.url, max_tokens=8, prompts=[BEHAVIOUR_PROMPTS[0], BEHAVIOUR_PROMPTS[5]])
    reasons = [o["finish_reason"] for o in q.details["outputs"]]
    assert all(r in ("stop", "length") for r in reasons), q.details
    assert q.json_prompts == 1 and q.capped_outputs == reasons.count("length")
