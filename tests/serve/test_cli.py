"""onecat-serve's Hydra config: every option of every group composes, converts to the config
dataclasses and finalizes on this CPU machine; overrides reach them; `--help` works and leaves no
outputs/ folder behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from onecat.serve.cli import find_config_dir
from onecat.serve.config import CacheConfig, EngineConfig, ModelConfig, SchedulerConfig, ServerConfig
from onecat.serve.config_store import GROUPS, KernelsConfig, Route, finalize, register_configs, to_configs

CONFIG_DIR = find_config_dir()


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def compose_with(overrides: list[str]):
    register_configs()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


def test_config_dir_is_the_repo_configs():
    assert CONFIG_DIR == Path(__file__).resolve().parents[2] / "configs"
    # configs/bench/ belongs to onecat-bench's own config, not to onecat-serve's groups
    assert set(GROUPS) == {p.name for p in CONFIG_DIR.iterdir() if p.is_dir()} - {"bench"}


# An option that needs other groups to be consistent is finalized with them (e.g. TP8 needs 8 GPUs
# and a model whose heads divide by 8; MTP needs a model with an MTP layer).
CONTEXT = {"parallel": ["model=llama3_8b", "hardware=h200", "hardware.count=8"],
           "spec": ["+profile=qwen38_27b"]}


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes_and_finalizes(group, option):
    override = f"+{group}={option}" if group == "profile" else f"{group}={option}"
    cfg = compose_with(CONTEXT.get(group, []) + [override])
    engine, server, kernels = to_configs(cfg)
    assert isinstance(engine, EngineConfig) and isinstance(server, ServerConfig)
    assert isinstance(engine.model, ModelConfig) and isinstance(engine.cache, CacheConfig)
    assert isinstance(engine.scheduler, SchedulerConfig) and isinstance(kernels, KernelsConfig)
    route = finalize(cfg)  # raises RouteError listing every inconsistency
    assert isinstance(route, Route) and route.shape.num_layers > 0 and route.max_model_len > 0
    if group != "profile":
        assert getattr(route.config, group) is not None


def test_defaults_match_the_dataclasses():
    engine, server, kernels = to_configs(compose_with([]))
    assert engine == EngineConfig() and server == ServerConfig() and kernels == KernelsConfig()


def test_overrides_reach_the_dataclasses():
    engine, server, kernels = to_configs(compose_with(
        ["+profile=smollm2", "serve.port=1234", "kv.block_size=32", "serve.api_key=k", "seed=7",
         "+kernels.pins.rms_norm=torch", "kernels.linear=torch", "kernels.disabled=[x]", "spec=ngram",
         "spec.num_speculative_tokens=3", "kv=fp8_e4m3"]))
    assert (engine.spec.method, engine.spec.num_speculative_tokens) == ("ngram", 3)  # reaches the engine
    assert engine.cache.dtype == "float8_e4m3fn"  # the runner's cache dtype, by torch's name
    assert server.port == 1234 and server.api_key == "k" and engine.cache.block_size == 32 and engine.seed == 7
    assert kernels.pins == {"rms_norm": "torch"} and kernels.disabled == ["x"]
    assert kernels.all_pins() == {"rms_norm": "torch", "linear": "torch"}  # `kernels.<op>=` is a pin


@pytest.mark.parametrize("override", ["kv.block_size=abc", "serve.no_such_key=1", "model=no_such_option",
                                      "hardware=no_such_gpu", "kernels.no_such_op=torch", "plan=maybe"])
def test_bad_overrides_are_refused(override):
    with pytest.raises(ConfigCompositionException):  # MissingConfigException is one too
        compose_with([override])


def test_help_runs_and_leaves_no_outputs(tmp_path):
    exe = Path(sys.executable).with_name("onecat-serve")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "onecat.serve.cli"]
    r = subprocess.run(cmd + ["--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "onecat-serve" in r.stdout and "kv: default" in r.stdout and "plan=true" in r.stdout
    groups = {line.split(":")[0]: line for line in r.stdout.split("== Config ==")[0].splitlines() if ": " in line}
    assert "smollm2" in groups["profile"] and "qwen38_27b" in groups["profile"]
    assert "v100-sxm2-32gb" in groups["hardware"]
    assert list(tmp_path.iterdir()) == []  # no outputs/, no .hydra/


def test_config_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ONECAT_CONFIG_DIR", str(CONFIG_DIR))
    assert find_config_dir() == CONFIG_DIR
    monkeypatch.setenv("ONECAT_CONFIG_DIR", str(tmp_path))
    with pytest.raises(SystemExit, match="config.yaml"):
        find_config_dir()
