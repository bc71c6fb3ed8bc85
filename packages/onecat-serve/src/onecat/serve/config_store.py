"""Hydra schemas: the config classes of onecat.serve.config, one per group under configs/.

`OnecatConfig` is the root schema (`configs/config.yaml` names it first in its defaults list), so
every option of every group is type-checked against its dataclass when composed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from .config import CacheConfig, EngineConfig, ModelConfig, SchedulerConfig, ServerConfig


@dataclass
class KernelsConfig:
    """Passed to onecat.kernels.registry.configure: per-op provider priority, pins, disabled names."""

    priority: dict[str, list[str]] = field(default_factory=dict)
    pins: dict[str, str] = field(default_factory=dict)
    disabled: list[str] = field(default_factory=list)


@dataclass
class OnecatConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    kv: CacheConfig = field(default_factory=CacheConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    serve: ServerConfig = field(default_factory=ServerConfig)
    kernels: KernelsConfig = field(default_factory=KernelsConfig)
    seed: int = 0


SCHEMA_NAME = "onecat_schema"
GROUPS = ("model", "kv", "scheduler", "serve", "kernels", "profile")


def register_configs() -> None:
    ConfigStore.instance().store(name=SCHEMA_NAME, node=OnecatConfig)


def to_configs(cfg: DictConfig) -> tuple[EngineConfig, ServerConfig, KernelsConfig]:
    """A composed config -> the dataclasses the engine, the server and the kernel registry take."""
    c: OnecatConfig = OmegaConf.to_object(cfg)  # validated instances, not DictConfigs
    engine = EngineConfig(model=c.model, cache=c.kv, scheduler=c.scheduler, seed=c.seed)
    return engine, c.serve, c.kernels


def configure_kernels(k: KernelsConfig) -> None:
    from onecat.kernels import registry

    registry.configure(priority=_plain(k.priority), pins=_plain(k.pins), disabled=list(k.disabled))


def _plain(x: Any) -> Any:
    return OmegaConf.to_container(x) if OmegaConf.is_config(x) else x
