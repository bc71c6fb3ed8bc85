"""tools/ncu: the raw-CSV parser on a hand-written report in ncu's documented column names and
units (header row, units row, one row per launch, ==PROF== lines before), and the ncu command."""

from __future__ import annotations

import re

import importlib.util
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ncu_raw_decode.csv")


def _load(name: str):
    path = os.path.join(ROOT, "tools", "ncu", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"ncu_tools_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


ncu_report = _load("ncu_report")


@pytest.fixture(scope="module")
def text() -> str:
    with open(FIXTURE) as f:
        return f.read()


def test_launches_units_and_nvtx(text):
    ls = ncu_report.parse_launches(text)
    assert len(ls) == 12 and [ln.id for ln in ls] == list(range(12))
    gemv = ls[2]
    assert (gemv.op, gemv.provider, gemv.step, gemv.kernel) == ("linear", "cuda", "decode.0", "gemv_q4_0_f16")
    assert gemv.duration_us == pytest.approx(30.0)  # "30,000" nsecond
    assert gemv.dram_bytes == pytest.approx(9.008e6)  # 9.000 Mbyte read + 8 Kbyte written
    assert gemv.dram_gbps == pytest.approx(9.008e6 / 30e-6 / 1e9)
    assert gemv.shared_bytes == pytest.approx(1024)  # 1.024 Kbyte/block dynamic + 0 static
    assert gemv.registers == 40 and gemv.tensor_pct == 0 and gemv.occupancy_achieved == 45.5
    assert ls[1].shared_bytes == 1024  # "1,024" byte/block static
    assert ls[3].tensor_pct is None  # n/a
    assert (ls[0].op, ls[0].provider, ls[0].step) == ("(outside ops)", "-", "decode.0")


def test_graph_replayed_kernels_take_their_op_from_the_kernel_name(text):
    ls = ncu_report.parse_launches(text.replace("onecat.op.", "capture.op."))  # no op ranges at replay
    assert (ls[2].op, ls[2].provider, ls[2].step) == ("linear", "graph", "decode.0")
    assert (ls[1].op, ls[5].op) == ("rms_norm", "argmax")
    assert (ls[0].op, ls[3].op) == ("(outside ops)", "(outside ops)")  # torch's own kernels
    fused = {"gemv_r_q4_1_r4u1k2n_rn_rope": "rms_norm_qkv_rotary_cache", "gemv_r_q4_0_r4u1k1n_rn_glu": "rms_norm_linear",
             "gemv_r_q4_k_r4u1k2_rn": "rms_norm_linear", "gemv_r_q4_0_r4u1k2n": "linear",
             "rotary_cache_gptj_v8": "rotary_and_cache", "rotary_neox_v8": "rotary_embedding",
             "gemm_rd_q4_0_r32_rope": "rms_norm_qkv_rotary_cache", "gemm_rd_q4_0_r32w_glu": "rms_norm_linear",
             "gemm_wg_q4_0_w64_glu": "rms_norm_linear", "gemm_rd_q4_0_r32w": "linear",
             "gemm_rd_q4_0_r32_norm": "linear", "gemm_wg_q4_0_w64_norm": "linear"}
    for kernel, op in fused.items():  # the fused GEMVs by their suffix, before the plain GEMV prefix
        assert [o for p, o in ncu_report.KERNEL_OPS if re.search(p, kernel)][0] == op, kernel


def test_kernel_table(text):
    rows = ncu_report.kernel_table(ncu_report.parse_launches(text))
    assert [r.op for r in rows] == ["linear", "argmax", "paged_attention", "rms_norm", "paged_attention", "(outside ops)"]
    top = rows[0]
    assert (top.launches, top.total_us, top.mean_us) == (2, pytest.approx(62.0), pytest.approx(31.0))
    assert top.share == pytest.approx(62.0 / 128.0)
    assert top.dram_gbps == pytest.approx(2 * 9.008e6 / 62e-6 / 1e9)
    assert top.dram_pct_peak == pytest.approx(6.9) and top.sm_pct == pytest.approx(21.7)
    assert top.occupancy_theoretical == 75
    text_table = ncu_report.format_table(rows)
    assert "gemv_q4_0_f16" in text_table and "DRAM GB/s" in text_table


def test_timeline_kernel_time_vs_gaps(text):
    ls = ncu_report.parse_launches(text)
    t = ncu_report.timeline(ls, {"median_step_us": 100.0})
    assert [s.step for s in t.steps] == ["decode.0", "decode.1"]
    assert [s.kernels for s in t.steps] == [6, 6]
    assert [s.kernel_us for s in t.steps] == [pytest.approx(63.0), pytest.approx(65.0)]
    assert t.steps[0].by_op["paged_attention"] == pytest.approx(14.0)
    assert t.median_kernel_us == pytest.approx(64.0) and t.gap_us == pytest.approx(36.0)
    assert t.kernel_fraction == pytest.approx(0.64)
    assert "gaps 36.0 us" in ncu_report.format_timeline(t)
    assert ncu_report.timeline(ls).gap_us is None
    # kernels replayed alone by ncu can sum past the graphed step (the H200's smollm2: 1,093 us of
    # kernels in a 1,007 us step): no negative gap is printed as one
    over = ncu_report.format_timeline(ncu_report.timeline(ls, {"median_step_us": 60.0}))
    assert "-> gaps" not in over and "not resolvable" in over


def test_cli_writes_json_and_markdown(text, tmp_path, capsys):
    steps = tmp_path / "s.json"
    steps.write_text(json.dumps({"median_step_us": 80.0}))
    ncu_report.main([FIXTURE, "--steps", str(steps), "--json", str(tmp_path / "k.json"), "--md", str(tmp_path / "r.md")])
    out = capsys.readouterr().out
    assert "12 kernel launches" in out and "kernels busy 80%" in out
    doc = json.loads((tmp_path / "k.json").read_text())
    assert doc["kernels"][0]["kernel"] == "gemv_q4_0_f16" and doc["timeline"]["gap_us"] == pytest.approx(16.0)
    assert (tmp_path / "r.md").read_text().startswith("# ncu kernel report")


def test_bad_reports_are_refused():
    with pytest.raises(ncu_report.ReportError):
        ncu_report.parse_launches("no csv here\n")
    bad_unit = '"ID","Kernel Name","gpu__time_duration.sum"\n"","","fortnight"\n"0","k","3"\n'
    with pytest.raises(ncu_report.ReportError, match="unknown unit"):
        ncu_report.parse_launches(bad_unit)


def test_ncu_command_and_config(tmp_path):
    profile = _load("ncu_profile")
    cfg = os.path.join(ROOT, "configs", "bench", "ncu_llama3_8b_q4_0.yaml")
    args = profile.config_args(cfg)
    assert "--shape" in args and "llama3-8b" in args
    cmd = profile.ncu_command("ncu", str(tmp_path / "r"), args)
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    assert "--nvtx" in cmd and cmd[cmd.index("--profile-from-start") + 1] == "off"
    # steps timed under ncu are not the step's time: the gaps come from a run without it
    assert cmd[-1].endswith("r.under-ncu.steps.json") and any(c.endswith("target.py") for c in cmd)
    plain = profile.target_command(args, str(tmp_path / "r.steps.json"), "--profiled", "0")
    assert plain[1].endswith("target.py") and plain[-4:] == ["--profiled", "0", "--steps-json", str(tmp_path / "r.steps.json")]


def test_timeline_splits_steps_at_the_sampled_ids_copy():
    from types import SimpleNamespace as NS

    target = _load("target")

    def act(name, start, end):
        return NS(name=name, time_range=NS(start=start, end=end))

    acts = [act("Memcpy HtoD (Pinned -> Device)", 0, 1), act("gemv", 120, 130), act("attn", 128, 140),
            act("argmax", 150, 152), act("Memcpy DtoH (Device -> Pageable)", 153, 154),
            act("Memcpy HtoD (Pinned -> Device)", 400, 401), act("gemv", 500, 510)]
    steps = target.split_steps(acts)
    assert [len(g) for g in steps] == [5, 2]
    assert target.busy_time(steps[0]) == 1 + 20 + 2 + 1  # overlapping kernels counted once


def test_end_increments_charge_overlapping_kernels_what_they_add_to_the_span():
    from types import SimpleNamespace as NS

    target = _load("target")

    def act(name, start, end):
        return NS(name=name, time_range=NS(start=start, end=end))

    # PDL: attn starts before gemv ends; "short" ends inside attn's span and adds nothing
    acts = [act("gemv", 100, 130), act("attn", 120, 150), act("short", 125, 140), act("gemv", 149, 170),
            act("gap-then", 180, 185)]
    inc = target.end_increments(acts)
    assert inc == {"gemv": 30 + 20, "attn": 20, "gap-then": 15}
    assert sum(inc.values()) == 185 - 100  # the span: idle time goes to the kernel that ends it
