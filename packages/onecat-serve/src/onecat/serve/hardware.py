"""Hardware targets (the `hardware` config group) and the machine this process runs on.

A target names one kind of device and how many of them a deployment has. Plans and admission
reports are computed for a target without touching a GPU; at start-up the `auto` target is resolved
to this machine (`detect`), and a named target is checked against it (`mismatch`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

GIB = 2**30


@dataclass
class HardwareConfig:
    """One device kind x count. Figures are per device; sources are in configs/hardware/*.yaml."""

    name: str = "auto"  # auto: this machine (detected at start-up / plan time)
    kind: str = "auto"  # auto | cpu | cuda
    gpu: str = ""  # product name, e.g. "Tesla V100-SXM2-32GB"
    count: int = 1  # devices available to the deployment
    memory_gib: float | None = None  # per device, as the driver reports the total (None: detect)
    bandwidth_gbs: float | None = None  # memory bandwidth per device (datasheet, GB/s)
    fp16_tflops: float | None = None  # dense FP16 tensor peak per device
    capability: list[int] | None = None  # [major, minor] for CUDA targets
    interconnect: str = ""  # e.g. "NVLink2 300 GB/s", "PCIe Gen3 x16"
    reserved_gib: float = 0.0  # per device, outside torch's allocator: CUDA context, cuBLAS/NCCL workspaces


@dataclass(frozen=True)
class Device:
    """A resolved target: what admission and the planner see."""

    name: str
    kind: str  # cpu | cuda
    gpu: str
    count: int
    memory_bytes: int  # per device
    capability: tuple[int, int] | None
    bandwidth_gbs: float | None = None
    fp16_tflops: float | None = None
    interconnect: str = ""
    reserved_bytes: int = 0
    detected: bool = False  # True: this machine

    @property
    def label(self) -> str:
        """cpu, or smXY: the device as the kernels registry's `describe` names it."""
        return "cpu" if self.capability is None else f"sm{self.capability[0]}{self.capability[1]}"

    def describe(self) -> str:
        if self.kind == "cpu":
            return f"{self.name} (cpu, {self.memory_bytes / GIB:.1f} GiB)"
        return (f"{self.name} ({self.count} x {self.gpu or 'GPU'}, {self.label}, "
                f"{self.memory_bytes / GIB:.2f} GiB each)")


def _host_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * GIB


def detect() -> Device:
    """This machine: its first CUDA GPU (and how many there are), else the CPU."""
    try:
        import torch

        if torch.cuda.is_available():
            n = torch.cuda.device_count()
            props = torch.cuda.get_device_properties(0)
            return Device(name="auto", kind="cuda", gpu=props.name, count=n, memory_bytes=int(props.total_memory),
                          capability=(props.major, props.minor), reserved_bytes=GIB // 2, detected=True)
    except Exception:  # a broken driver is "no GPU" here; the engine says more when it starts
        pass
    return Device(name="auto", kind="cpu", gpu="", count=1, memory_bytes=_host_memory_bytes(), capability=None,
                  detected=True)


def resolve(cfg: HardwareConfig) -> tuple[Device, list[str]]:
    """A config -> a Device, and the problems of the config itself (empty when consistent)."""
    problems: list[str] = []
    if cfg.name == "auto" or cfg.kind == "auto":
        return detect(), problems
    if cfg.kind not in ("cpu", "cuda"):
        problems.append(f"hardware.kind={cfg.kind!r}: must be auto, cpu or cuda")
    if cfg.count < 1:
        problems.append(f"hardware.count={cfg.count}: must be >= 1")
    cap = None
    if cfg.kind == "cuda":
        if not cfg.capability or len(cfg.capability) != 2:
            problems.append(f"hardware={cfg.name}: a cuda target needs capability: [major, minor]")
        else:
            cap = (int(cfg.capability[0]), int(cfg.capability[1]))
        if not cfg.memory_gib:
            problems.append(f"hardware={cfg.name}: a cuda target needs memory_gib")
    memory = int(cfg.memory_gib * GIB) if cfg.memory_gib else _host_memory_bytes()
    dev = Device(name=cfg.name, kind=cfg.kind, gpu=cfg.gpu, count=max(1, cfg.count), memory_bytes=memory,
                 capability=cap, bandwidth_gbs=cfg.bandwidth_gbs, fp16_tflops=cfg.fp16_tflops,
                 interconnect=cfg.interconnect, reserved_bytes=int(cfg.reserved_gib * GIB))
    return dev, problems


def mismatch(target: Device, here: Device) -> list[str]:
    """Why `target` is not this machine (empty when it is, or when the target is `auto`)."""
    if target.detected:
        return []
    if target.kind == "cpu":
        return []  # any machine has a CPU
    if here.kind != "cuda":
        return [f"hardware={target.name} needs {target.count} CUDA GPU(s) ({target.gpu or target.label}); "
                f"this machine has none (plan it with plan=true, or run with hardware=auto)"]
    reasons = []
    if here.count < target.count:
        reasons.append(f"hardware={target.name} needs {target.count} GPUs; this machine has {here.count}")
    if here.capability != target.capability:
        reasons.append(f"hardware={target.name} is {target.label}; this machine's GPU is {here.label} ({here.gpu})")
    if here.memory_bytes < 0.95 * target.memory_bytes:
        reasons.append(f"hardware={target.name} has {target.memory_bytes / GIB:.1f} GiB per GPU; this machine's "
                       f"{here.gpu} has {here.memory_bytes / GIB:.1f} GiB")
    return reasons
