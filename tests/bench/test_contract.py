"""The record every result carries, its JSON-lines round trip, compare, the Markdown report and
the plots, on hand-made records (no model)."""

from __future__ import annotations

import json

import pytest

from onecat.bench import contract
from onecat.bench.cli import main as cli_main
from onecat.bench.contract import (MEASURED, PROJECTED, Metric, ModelInfo, Record, Runtime, Sampling, Workload,
                                   append_jsonl, metric, percentile, read_jsonl)
from onecat.bench.report import compare_rows, markdown


def rec(engine: str, conc: int, tput: float, tpot: float, input_len: int = 128, kind: str = MEASURED) -> Record:
    return Record(engine=engine, kind=kind,
                  metrics={"output_throughput": Metric("tok/s", tput, tput * 0.9, tput * 1.1, 3),
                           "tpot": metric([tpot, tpot * 1.2, tpot * 0.9], "ms", "requests")},
                  model=ModelInfo(name="smollm2", weight_format="gguf:Q4_1", arch="llama", layers=30),
                  workload=Workload(kind="offline", input_len=input_len, output_len=32, concurrency=conc,
                                    num_prompts=2 * conc, repeats=3),
                  runtime=Runtime(device="cpu", kv_dtype="float32", prefix_cache="enabled, cold"),
                  sampling=Sampling(temperature=0.0, workload_seed=0, ignore_eos=True, max_tokens=32))


def test_machine_facts_and_required_fields():
    r = rec("onecat", 1, 10.0, 50.0)
    m = r.machine
    assert m.torch and m.python and m.cpu_count and m.torch_threads
    d = r.to_dict()
    for key in ("engine", "kind", "metrics", "model", "workload", "runtime", "sampling", "spec", "quality",
                "machine", "errors", "date", "run_id", "schema"):
        assert key in d
    for key in ("gpu", "gpu_count", "gpu_clocks", "driver", "cuda_runtime", "torch"):
        assert key in d["machine"]
    for key in ("tp", "pp", "weight_format"):
        assert key in d["model"]
    for key in ("kv_dtype", "graph_mode", "prefix_cache"):
        assert key in d["runtime"]
    assert d["spec"]["method"] == "none" and d["quality"]["ppl"] is None
    with pytest.raises(ValueError):
        Record(engine="x", kind="guessed")


def test_jsonl_round_trip_skips_other_schemas(tmp_path):
    path = str(tmp_path / "r.jsonl")
    a, b = rec("onecat", 1, 10.0, 50.0), rec("onecat", 4, 30.0, 60.0, kind=PROJECTED)
    append_jsonl(path, [a, b])
    with open(path, "a") as f:
        f.write(json.dumps({"engine": "old format"}) + "\n")
    back = read_jsonl(path)
    assert [r.to_dict() for r in back] == [a.to_dict(), b.to_dict()]


def test_percentiles_and_metric():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 99) == 5
    m = metric(list(range(1, 101)), "ms", "requests")
    assert (m.median, m.min, m.max, m.n) == (50.5, 1, 100, 100)
    assert m.p90 == pytest.approx(90.1) and m.p99 == pytest.approx(99.01)
    assert metric([], "ms") is None


def test_compare_prints_ratios_of_matching_metrics(tmp_path, capsys):
    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    append_jsonl(a, [rec("onecat", 1, 10.0, 50.0), rec("onecat", 4, 20.0, 80.0), rec("onecat", 8, 1.0, 1.0)])
    append_jsonl(b, [rec("onecat", 1, 15.0, 40.0), rec("onecat", 4, 10.0, 80.0)])
    rows = compare_rows(read_jsonl(a), read_jsonl(b))
    by = {(r["config"].split("conc ")[1][0], r["metric"]): r for r in rows}
    assert set(by) == {("1", "output_throughput"), ("1", "tpot"), ("4", "output_throughput"), ("4", "tpot")}
    assert by["1", "output_throughput"]["ratio"] == pytest.approx(1.5) and by["1", "output_throughput"]["verdict"] == "better"
    assert by["1", "tpot"]["ratio"] == pytest.approx(0.8) and by["1", "tpot"]["verdict"] == "better"
    assert by["4", "output_throughput"]["ratio"] == pytest.approx(0.5) and by["4", "output_throughput"]["verdict"] == "worse"
    cli_main(["compare", a, b])
    out = capsys.readouterr().out
    assert "B/A" in out and "1.500" in out and "0.500" in out


def test_compare_across_engines_when_the_configuration_is_unique(tmp_path):
    rows = compare_rows([rec("hf-transformers", 1, 10.0, 50.0)], [rec("onecat", 1, 20.0, 25.0)])
    assert {r["metric"]: r["ratio"] for r in rows} == pytest.approx({"output_throughput": 2.0, "tpot": 0.5})
    assert rows[0]["engines"] == "hf-transformers -> onecat"


def test_compare_loose_sets_offline_against_online():
    a = rec("onecat", 2, 10.0, 50.0)
    b = rec("onecat server", 2, 8.0, 55.0)
    b.workload.kind, b.runtime.kv_dtype, b.model.weight_format = "online", "unknown (remote)", "gguf:Q4_1"
    assert compare_rows([a], [b]) == []
    rows = compare_rows([a], [b], ignore=("workload", "weights", "kv"))
    assert {r["metric"]: r["ratio"] for r in rows} == pytest.approx({"output_throughput": 0.8, "tpot": 1.1})
    with pytest.raises(ValueError):
        a.config_key(ignore=("colour",))


def test_markdown_report_sections():
    text = markdown([rec("onecat", 1, 10.0, 50.0), rec("onecat", 4, 30.0, 60.0)])
    assert "## Machine" in text and "## offline (measured)" in text and "## Contracts" in text
    assert "| onecat |" in text and "conc 4" in text and "10 [9-11]" in text


def test_plots_are_written(tmp_path):
    from onecat.bench.plots import make_plots

    recs = [rec(e, c, t * c, 50.0 + i, input_len=i) for e, t in (("onecat", 10.0), ("hf", 4.0))
            for c in (1, 2, 4) for i in (64, 256)]
    paths = make_plots(recs, str(tmp_path))
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == ["throughput_vs_concurrency.png", "tpot_vs_context.png"]
    for p in paths:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_nvidia_smi_absent_is_not_an_error(monkeypatch):
    monkeypatch.setattr(contract.shutil, "which", lambda name: None)
    assert contract.nvidia_smi() is None


def test_spec_acceptance_from_engine_counters():
    from types import SimpleNamespace

    from onecat.bench.offline import spec_info

    def fake(method):
        cfg = SimpleNamespace(spec=SimpleNamespace(method=method, num_speculative_tokens=4))
        return SimpleNamespace(engine=SimpleNamespace(config=cfg))

    before = {"spec_drafts_proposed": 10, "spec_drafts_accepted": 5}
    after = {"spec_drafts_proposed": 50, "spec_drafts_accepted": 35}
    s = spec_info(fake("ngram"), before, after)
    assert (s.method, s.num_speculative_tokens, s.acceptance_rate) == ("ngram", 4, pytest.approx(0.75))
    assert spec_info(fake("none"), before, after).method == "none"
    assert spec_info(SimpleNamespace(engine=SimpleNamespace(config=SimpleNamespace())), {}, {}).acceptance_rate is None
