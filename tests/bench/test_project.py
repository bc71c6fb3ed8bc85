"""`onecat-bench project`: V100-SXM2 decode projections from bytes and FLOPs, labelled projected."""

from __future__ import annotations

import os

import pytest

from onecat.bench.cli import main as cli_main
from onecat.bench.contract import PROJECTED, read_jsonl
from onecat.bench.project import FORMATS, SHAPES, H200Table, decode_kernels, project

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
H200 = os.path.join(ROOT, "benchmarks", "results", "h200-2026-11-29", "bench.json")


def test_llama3_8b_q4_0_batch1_prints_assumptions_and_a_sane_number(tmp_path, capsys):
    out = str(tmp_path / "p.jsonl")
    cli_main(["project", "--shape", "llama3-8b", "--weights", "Q4_0", "--h200", H200, "--out", out])
    text = capsys.readouterr().out
    assert text.startswith("PROJECTED V100-SXM2 decode: llama3-8b Q4_0")
    assert "assumptions:" in text and "PROJECTED, not measured" in text
    for needle in ("879 GB/s", "125 TFLOP/s", "4.5 bits/weight", "bench.json", "batch 1", "context 512",
                   "H200 'linear q4_0 M=1 N=4096 K=14336' (exact shape)"):
        assert needle in text, needle
    (rec,) = read_jsonl(out)
    assert rec.kind == PROJECTED and rec.runtime.device.startswith("V100-SXM2")
    tok_s = rec.metrics["decode_tok_s"].median
    # bounded above by the weight bytes at 879 GB/s (~208 tok/s for 4.2 GB); far below it is not sane either
    assert 20 < tok_s < rec.extra["ideal_tok_s"] < 210
    assert rec.extra["weight_bytes_per_step"] == pytest.approx(4.226e9, rel=0.01)  # perf.md: 4.22 GB/token
    assert len(rec.assumptions) >= 8 and rec.extra["kernels"]


def test_default_efficiency_projection_and_formats():
    s = SHAPES["llama3-8b"]
    p = project(s, "Q4_0", default_eff=0.85, floor_us=0.0)
    weights = sum(r.bytes * r.count for r in p.kernels if r.kernel.startswith("linear"))
    assert p.tok_s == pytest.approx(879e9 * 0.85 / (weights + sum(r.bytes * r.count for r in p.kernels
                                                                   if not r.kernel.startswith("linear"))), rel=0.02)
    assert project(s, "FP16").tok_s < project(s, "Q4_K_M").tok_s < project(s, "Q4_0").tok_s
    assert FORMATS["Q4_0"] == 4.5 and FORMATS["Q4_K_M"] == pytest.approx(4.85)
    with pytest.raises(ValueError):
        project(s, "Q3_XYZ")


def test_kernel_bytes_and_h200_matching():
    s = SHAPES["llama3-8b"]
    ks = {k.what: k for k in decode_kernels(s, "Q4_0", "Q4_0", 1, 1024)}
    assert ks["down projection"].shape == {"M": 1, "N": 4096, "K": 14336}
    assert ks["down projection"].bytes == pytest.approx(4096 * 14336 * 4.5 / 8, rel=0.01)
    assert ks["decode attention over the cache"].bytes == pytest.approx(2 * 1024 * 8 * 128 * 2, rel=0.01)
    t = H200Table(H200)
    row, how = t.match(ks["gate+up projection"])
    assert how == "nearest shape" and row["shape"] == "M=1 N=14336 K=4096"
    row, how = t.match(ks["lm_head"])
    assert how == "exact shape" and row["kernel"] == "linear q4_0"
    assert t.match(ks["decode attention over the cache"])[0] is None
    # batch > 1 reads the weights once: more tokens per step, same weight bytes
    assert project(s, "Q4_0", batch=4).tok_s > 3 * project(s, "Q4_0", batch=1).tok_s


def test_run_a_bench_configuration(tmp_path, capsys):
    cfg = os.path.join(ROOT, "configs", "bench", "v100_projection_llama3_8b.yaml")
    out = str(tmp_path / "p.jsonl")
    cli_main(["run", cfg, "--set", f"out={out}", "--set", "batch=4"])
    text = capsys.readouterr().out
    assert text.startswith("onecat-bench project --shape llama3-8b --weights Q4_0 --batch 4")
    (rec,) = read_jsonl(out)
    assert rec.workload.batch == 4 and rec.kind == PROJECTED


def test_every_bench_configuration_names_a_command():
    from onecat.bench.cli import COMMANDS
    from onecat.bench.config import load

    d = os.path.join(ROOT, "configs", "bench")
    for name in sorted(os.listdir(d)):
        if name.startswith("ncu_"):
            continue  # tools/ncu/ncu_profile.py configurations (tests/bench/test_ncu_report.py)
        command, argv = load(os.path.join(d, name))
        assert command in COMMANDS and command != "run" and argv, name


def test_cli_usage(capsys):
    with pytest.raises(SystemExit) as e:
        cli_main([])
    assert e.value.code == 0 and "offline" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli_main(["nonsense"])
    assert e.value.code == 2
