"""The contract every recorded result carries: what ran, where, and how it was measured.

One `Record` per measured (or projected) configuration, written as one JSON line. A record holds
several metrics (`Metric`: median/min/max over repeats, or percentiles over requests) and the
whole contract around them: machine (GPU model/count/clocks as found, driver/CUDA/torch),
model shape and weight format, TP/PP, workload (lengths, batch/concurrency, rate, shared
prefix), runtime (device, KV dtype, graph mode, prefix-cache state, route), sampling and seed,
speculative method and acceptance, quality gates, and whether it was measured or projected.
`config_key` names the configuration without the machine or date, so two runs can be compared.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import uuid
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "onecat.bench.record/1"
MEASURED, PROJECTED = "measured", "projected"

# Which way is better, by metric name (anything else: no verdict in compare).
HIGHER_IS_BETTER = {"output_throughput", "request_throughput", "total_token_throughput", "decode_tok_s",
                    "greedy_agreement", "natural_stop_rate", "success_rate", "prefix_cache_hit_rate",
                    "spec_acceptance_rate"}
LOWER_IS_BETTER = {"ttft", "tpot", "itl", "e2e", "load_time", "ppl", "failed_requests", "capped_outputs",
                   "invalid_json", "decode_step_us"}


# -- machine facts -------------------------------------------------------------------------------
_SMI_FIELDS = ["index", "name", "driver_version", "memory.total", "clocks.sm", "clocks.mem", "clocks.max.sm",
               "clocks.max.mem", "clocks.applications.graphics", "power.draw", "power.limit", "temperature.gpu",
               "persistence_mode", "clocks_event_reasons.active"]


def nvidia_smi() -> list[dict] | None:
    """One dict per GPU from `nvidia-smi --query-gpu` (clocks as found, not set), or None."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    for fields in (_SMI_FIELDS, _SMI_FIELDS[:-1], _SMI_FIELDS[:9]):  # older drivers know fewer fields
        try:
            out = subprocess.run([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode == 0:
            return [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in out.stdout.splitlines()
                    if line.strip()]
    return None


def _smi_cuda_version() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for part in out.split("|"):
        if "CUDA Version:" in part:
            return part.split("CUDA Version:")[1].split()[0]
    return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


@dataclass
class Machine:
    host: str = ""
    platform: str = ""
    python: str = ""
    torch: str = ""
    cpu: str = ""
    cpu_count: int | None = None
    torch_threads: int | None = None
    gpu: str | None = None  # None: no GPU used
    gpu_count: int = 0
    gpu_capability: str | None = None
    driver: str | None = None
    cuda_runtime: str | None = None  # torch.version.cuda
    cuda_driver: str | None = None  # the CUDA version the driver supports (nvidia-smi)
    gpu_clocks: list[dict] = field(default_factory=list)  # nvidia-smi rows as found at the start of the run
    load_average: list[float] = field(default_factory=list)  # shared machines: how busy it was

    @classmethod
    def current(cls) -> Machine:
        import torch

        m = cls(host=platform.node(), platform=platform.platform(), python=platform.python_version(),
                torch=torch.__version__, cpu=_cpu_name(), cpu_count=os.cpu_count(),
                torch_threads=torch.get_num_threads())
        try:
            m.load_average = [round(x, 2) for x in os.getloadavg()]
        except OSError:
            pass
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            m.gpu, m.gpu_count = p.name, torch.cuda.device_count()
            m.gpu_capability = f"sm_{p.major}{p.minor}"
            m.cuda_runtime = torch.version.cuda
        smi = _cached_smi()
        if smi:
            m.gpu_clocks = smi
            m.driver = smi[0].get("driver_version")
            m.gpu = m.gpu or smi[0].get("name")
            m.gpu_count = m.gpu_count or len(smi)
            m.cuda_driver = _cached_cuda_driver()
        return m


@functools.lru_cache(maxsize=1)
def _cached_smi() -> list[dict] | None:
    return nvidia_smi()


@functools.lru_cache(maxsize=1)
def _cached_cuda_driver() -> str | None:
    return _smi_cuda_version()


# -- what ran ------------------------------------------------------------------------------------
@dataclass
class ModelInfo:
    name: str = ""
    source: str = ""  # file or directory, or "shape table" for projections
    arch: str = ""
    layers: int | None = None
    hidden: int | None = None
    ffn: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    vocab: int | None = None
    weight_format: str = ""  # e.g. "gguf:Q4_1 (embd Q8_0)", "Q4_0", "fp16"
    compute_dtype: str = ""  # what the weights run in (float32 on the CPU reference route)
    tp: int = 1
    pp: int = 1

    @classmethod
    def from_spec(cls, spec, **kw) -> ModelInfo:
        return cls(arch=spec.architecture, layers=spec.num_layers, hidden=spec.hidden_size,
                   ffn=spec.intermediate_size, heads=spec.num_heads, kv_heads=spec.num_kv_heads,
                   head_dim=spec.head_dim, vocab=spec.vocab_size, **kw)


@dataclass
class Workload:
    kind: str = ""  # offline | online | quality | project | decode
    dataset: str = ""  # e.g. "pydoc_data.topics", "fixed prompt set"
    input_len: int | None = None  # prompt tokens (context at the start of decode)
    output_len: int | None = None
    num_prompts: int | None = None
    batch: int | None = None  # sequences decoded together (offline/project)
    concurrency: int | None = None  # most requests in flight; None: unlimited
    request_rate: float | None = None  # Poisson arrivals per second; None: all at once
    shared_prefix_len: int = 0
    endpoint: str | None = None  # online: base URL and route
    repeats: int = 1


@dataclass
class Runtime:
    device: str = ""
    kv_dtype: str = ""
    graph_mode: str = "eager"  # eager | cuda-graphs | torch.compile ...
    prefix_cache: str = ""  # "enabled, cold" | "enabled, warm" | "disabled" | "unknown (remote)"
    max_num_seqs: int | None = None
    block_size: int | None = None
    route: dict[str, str] = field(default_factory=dict)  # op -> admitted provider(s)


@dataclass
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None  # the request seed, if any
    workload_seed: int | None = None  # the seed that chose the prompts and arrivals
    ignore_eos: bool = False
    max_tokens: int | None = None


@dataclass
class SpecDecode:
    method: str = "none"
    num_speculative_tokens: int = 0
    acceptance_rate: float | None = None
    mean_accepted_tokens: float | None = None


@dataclass
class Quality:
    """Quality gates measured beside the numbers (None: not measured in this run)."""

    ppl: float | None = None
    ppl_reference: float | None = None
    reference: str | None = None  # what ppl_reference and greedy_agreement compare against
    ppl_rel_diff: float | None = None
    ppl_tolerance: float | None = None
    greedy_agreement: float | None = None  # teacher-forced top-1 agreement where the reference's top-2 gap is clear
    greedy_agreement_all: float | None = None  # over every position
    natural_stop_rate: float | None = None
    capped_outputs: int | None = None
    invalid_json: int | None = None
    json_prompts: int | None = None
    passed: bool | None = None
    details: dict = field(default_factory=dict)


@dataclass
class Metric:
    unit: str
    median: float
    min: float
    max: float
    n: int
    over: str = "repeats"  # repeats | requests | segments | kernels | model
    mean: float | None = None
    p90: float | None = None
    p99: float | None = None


def metric(samples: list[float], unit: str, over: str = "repeats") -> Metric | None:
    xs = [float(x) for x in samples if x is not None and not math.isnan(x)]
    if not xs:
        return None
    m = Metric(unit=unit, median=statistics.median(xs), min=min(xs), max=max(xs), n=len(xs), over=over,
               mean=statistics.fmean(xs))
    if over == "requests" or len(xs) >= 10:
        m.p90, m.p99 = percentile(xs, 90), percentile(xs, 99)
    return m


def percentile(xs: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), no numpy needed."""
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class Record:
    engine: str
    kind: str = MEASURED  # measured | projected
    metrics: dict[str, Metric] = field(default_factory=dict)
    model: ModelInfo = field(default_factory=ModelInfo)
    workload: Workload = field(default_factory=Workload)
    runtime: Runtime = field(default_factory=Runtime)
    sampling: Sampling = field(default_factory=Sampling)
    spec: SpecDecode = field(default_factory=SpecDecode)
    quality: Quality = field(default_factory=Quality)
    machine: Machine = field(default_factory=Machine.current)
    errors: dict = field(default_factory=dict)  # {"count": n, "by_kind": {...}, "examples": [...]}
    assumptions: list[str] = field(default_factory=list)  # projections: every assumption, in words
    extra: dict = field(default_factory=dict)  # e.g. a projection's per-kernel rows
    notes: str = ""
    schema: str = SCHEMA
    date: str = field(default_factory=lambda: datetime.datetime.now().isoformat(timespec="seconds"))
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __post_init__(self) -> None:
        if self.kind not in (MEASURED, PROJECTED):
            raise ValueError(f"kind must be {MEASURED!r} or {PROJECTED!r}, got {self.kind!r}")

    # -- identity --------------------------------------------------------------------------------
    KEY_FIELDS = ("engine", "workload", "model", "weights", "parallel", "input_len", "output_len", "batch",
                  "concurrency", "rate", "prefix", "kv", "graph", "temperature", "spec", "kind")

    def config_key(self, with_engine: bool = True, ignore: tuple[str, ...] | set[str] = ()) -> str:
        """The configuration, without machine, date or results: equal keys are comparable runs.
        `ignore` drops fields (names in KEY_FIELDS), e.g. {"workload", "weights"} to set an offline
        run against an online one."""
        w, r, s, m = self.workload, self.runtime, self.sampling, self.model
        parts = {"engine": self.engine, "workload": w.kind, "model": m.name, "weights": m.weight_format,
                 "parallel": f"tp{m.tp}pp{m.pp}", "input_len": f"in={w.input_len}", "output_len": f"out={w.output_len}",
                 "batch": f"batch={w.batch}", "concurrency": f"conc={w.concurrency}", "rate": f"rate={w.request_rate}",
                 "prefix": f"prefix={w.shared_prefix_len}", "kv": f"kv={r.kv_dtype}", "graph": f"graph={r.graph_mode}",
                 "temperature": f"temp={s.temperature}", "spec": f"spec={self.spec.method}", "kind": self.kind}
        unknown = set(ignore) - set(parts)
        if unknown:
            raise ValueError(f"unknown key fields {sorted(unknown)} (known: {', '.join(parts)})")
        drop = set(ignore) | (set() if with_engine else {"engine"})
        return " | ".join(str(v) for k, v in parts.items() if k not in drop)

    def label(self) -> str:
        w = self.workload
        bits = [w.kind]
        if w.input_len is not None:
            bits.append(f"in {w.input_len}")
        if w.output_len is not None:
            bits.append(f"out {w.output_len}")
        if w.batch is not None:
            bits.append(f"batch {w.batch}")
        if w.concurrency is not None:
            bits.append(f"conc {w.concurrency}")
        if w.request_rate is not None:
            bits.append(f"rate {w.request_rate:g}/s")
        if w.shared_prefix_len:
            bits.append(f"shared prefix {w.shared_prefix_len}")
        return ", ".join(bits)

    # -- (de)serialization -----------------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False, default=str)

    @classmethod
    def from_dict(cls, d: dict) -> Record:
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} record (schema {d.get('schema')!r})")
        kw = dict(d)
        kw["metrics"] = {k: Metric(**v) for k, v in d.get("metrics", {}).items()}
        for name, typ in (("model", ModelInfo), ("workload", Workload), ("runtime", Runtime),
                          ("sampling", Sampling), ("spec", SpecDecode), ("quality", Quality), ("machine", Machine)):
            known = {f.name for f in dataclasses.fields(typ)}
            kw[name] = typ(**{k: v for k, v in (d.get(name) or {}).items() if k in known})
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in kw.items() if k in known})


def _finite(obj: Any) -> Any:
    """NaN/inf are not JSON: write them as None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def append_jsonl(path: str, records: list[Record]) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "a") as f:
        for r in records:
            f.write(json.dumps(_finite(r.to_dict()), sort_keys=True, allow_nan=False, default=str) + "\n")


def read_jsonl(path: str) -> list[Record]:
    """Records of this schema; lines of other schemas (older results) are skipped."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            d = json.loads(line)
            if d.get("schema") == SCHEMA:
                out.append(Record.from_dict(d))
    return out
