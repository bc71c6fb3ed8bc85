"""The profiles: smollm2 is today's default exactly; every profile finalizes and plans on this CPU;
routes the engine cannot run yet (TP4, speculative decoding, GDN, NVFP4) refuse to start with a
readable list (no traceback) unless plan=true; finalize reports every inconsistency at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from onecat.serve import cli
from onecat.serve.admission import admit, fake_device
from onecat.serve.config import EngineConfig, ServerConfig
from onecat.serve.config_store import RouteError, finalize, register_configs, to_configs
from onecat.serve.hardware import detect

CONFIG_DIR = cli.find_config_dir()
PROFILES = sorted(p.stem for p in (CONFIG_DIR / "profile").glob("*.yaml"))


def compose_with(*overrides: str):
    register_configs()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_the_profiles_of_the_issue_exist():
    assert {"smollm2", "gemma3_270m", "llama3_8b_q4", "qwen3_8b_awq", "qwen38_27b", "flash_next"} <= set(PROFILES)


def test_smollm2_profile_is_todays_default():
    default, profile = compose_with(), compose_with("+profile=smollm2")
    assert to_configs(default) == to_configs(profile) == (to_configs(default)[0], ServerConfig(), to_configs(default)[2])
    assert to_configs(profile)[0] == EngineConfig()  # path None: the embedded GGUF, as before
    route = finalize(profile, detect())
    assert route.unavailable == [] and route.shape.source.startswith("checkpoint ")
    assert (route.compute_dtype, route.kv_dtype, route.formats["weights"]) == ("float32", "float32", "Q4_1")
    assert not admit(route, detect()).failures


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_finalizes_plans_and_reports_admission_on_cpu(profile, capsys):
    cfg = compose_with(f"+profile={profile}", "plan=true")
    cli.serve(cfg)  # plan=true: prints the plan and the admission table, loads nothing
    out = capsys.readouterr().out
    assert out.startswith(f"onecat plan: {profile}: ") and "admission for " in out
    assert "weights per" in out and "KV cache and state per" in out and "largest that fit" in out


def test_qwen38_27b_is_the_release_contract():
    route = finalize(compose_with("+profile=qwen38_27b"))
    c = route.config
    assert (c.quant.weights, c.kv.dtype, c.spec.method, c.spec.num_speculative_tokens, c.spec.draft_kv_dtype) == (
        "nvfp4", "fp8_e4m3", "dflash", 7, "float16")
    assert (c.parallel.tp, c.hardware.name, c.hardware.count, route.max_model_len) == (4, "v100-sxm2-32gb", 4, 262144)
    assert (c.scheduler.max_num_batched_tokens, c.scheduler.max_num_seqs, c.kv.gpu_memory_utilization) == (
        8192, 4, 0.80)
    assert (c.kv.block_size, c.kv.mamba_block_size, route.compute_dtype) == (2048, 8192, "float16")
    s = route.shape
    assert (s.hidden_size, s.num_heads, s.num_kv_heads, s.head_dim) == (5120, 24, 4, 256)
    assert (s.gdn_key_heads // 4, s.gdn_value_heads // 4, s.gdn_key_dim, s.gdn_value_dim) == (4, 12, 128, 128)
    assert s.count("linear_attention") == 48 and s.attention_layers == 16
    assert any("Qwen3.5-27B" in a for a in route.assumptions)
    flash = finalize(compose_with("+profile=flash_next")).shape
    assert (flash.num_experts, flash.hidden_size, flash.sparse_attention, flash.max_position) == (
        512, 2560, "qsa", 262144)


def test_qwen38_27b_refuses_to_start_on_this_cpu_with_a_readable_list(tmp_path):
    exe = Path(sys.executable).with_name("onecat-serve")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "onecat.serve.cli"]
    r = subprocess.run(cmd + ["+profile=qwen38_27b"], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    err = r.stderr
    assert err.startswith("onecat-serve: refusing to start 'qwen38_27b' on this machine")
    for needle in ("parallel.tp=4", "no dflash proposer", "Gated DeltaNet", "qwen3_next",
                   "needs 4 CUDA GPU(s)", "no gated_delta_rule op", "plan=true"):
        assert needle in err, needle
    assert list(tmp_path.iterdir()) == []


def test_plan_true_runs_the_same_route_instead(capsys):
    cli.serve(compose_with("+profile=qwen38_27b", "hardware=v100-sxm2-16gb", "plan=true"))
    out = capsys.readouterr().out
    assert "4 x Tesla V100-SXM2-16GB" in out and "DOES NOT FIT" in out and "short by" in out
    assert "would refuse to start here:" in out and "assumptions:" in out
    assert "admission for qwen38_27b on sm70" in out and "[NOT AVAILABLE]" in out


def test_finalize_reports_every_problem_at_once():
    cfg = compose_with("+profile=qwen38_27b", "kv.block_size=24", "hardware.count=1", "model.dtype=bfloat16",
                       "model.max_model_len=300000", "spec.num_speculative_tokens=0", "quant.weights=no_such_fmt")
    with pytest.raises(RouteError) as e:
        finalize(cfg)
    text = str(e.value)
    for needle in ("kv.block_size=24 is not a multiple of 16", "parallel.tp=4 but hardware=v100-sxm2-32gb has 1 GPU",
                   "model.dtype=bfloat16 on sm70", "max_model_len=300000 exceeds the model's context 262144",
                   "spec=dflash needs num_speculative_tokens >= 1", "unknown quantization format 'no_such_fmt'"):
        assert needle in text, needle
    assert len(e.value.problems) >= 6 and text.startswith("onecat: the route 'qwen38_27b' is inconsistent")
    with pytest.raises(SystemExit, match="kv.block_size=24"):  # the CLI prints the same list, no traceback
        cli.serve(cfg)


def test_gemma3_keeps_its_fp32_residual_on_fp16_routes():
    route = finalize(compose_with("+profile=gemma3_270m", "hardware=v100-sxm2-16gb"))
    assert route.compute_dtype == "float16"
    assert route.shape.count("sliding_attention") == 15 and route.shape.count("attention") == 3
    rep = admit(route, fake_device("sm70"))
    attn = {r.facts for r in rep.rows if r.site == "attention"}
    assert any("sliding_window=True" in f for f in attn) and any("sliding_window=False" in f for f in attn)
    norm = next(r for r in rep.rows if r.site == "post_attn_norm")
    assert "float32" in norm.facts  # the residual add runs in FP32: the FP16 kernel refuses, stated
    assert norm.provider == "torch" and any("float32" in " ".join(r) for r in norm.refused.values())


def test_scheduler_prefill_first_is_one_override():
    """scheduler.prefill_first composes from the command line into the engine's SchedulerConfig (off by default)."""
    default, on = compose_with(), compose_with("scheduler.prefill_first=true")
    assert to_configs(default)[0].scheduler.prefill_first is False
    assert to_configs(on)[0].scheduler.prefill_first is True
