"""The contract every recorded result carries: what ran, where, and how it was measured."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import statistics
from dataclasses import dataclass, field


def machine_facts() -> dict:
    import torch

    facts = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
             "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        facts.update(gpu=p.name, gpu_count=torch.cuda.device_count(), cuda=torch.version.cuda)
    else:
        facts.update(gpu=None, cpu=_cpu_name())
    return facts


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def summary(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


@dataclass
class Contract:
    engine: str
    metric: str
    unit: str
    model: str
    weights: str
    batch: int
    context: str  # e.g. "prompt 32, generate 128"
    kv_dtype: str
    graph_mode: str
    sampling: str
    spec: str = "none"
    prefix_cache: str = "cold"
    measured: str = "measured"  # or "projected"
    result: dict = field(default_factory=dict)  # summary(...)
    machine: dict = field(default_factory=machine_facts)
    date: str = field(default_factory=lambda: datetime.date.today().isoformat())
    notes: str = ""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


def append_jsonl(path: str, records: list[Contract]) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "a") as f:
        for r in records:
            f.write(r.to_json() + "\n")
