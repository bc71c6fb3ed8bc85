"""The typed description of a model: what the engine needs to size caches and build layers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelSpec:
    architecture: str  # registry name, e.g. "llama", "gemma3"
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position: int  # the checkpoint's context length
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rotary_dim: int | None = None  # None: the whole head (partial rotary otherwise)
    rope_interleaved: bool = False  # GPT-J style pairs (GGUF llama's permuted Q/K) vs NeoX halves
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    hidden_act: str = "silu"
    sliding_window: int | None = None
    # per layer: "attention" (paged KV) or later "linear_attention"/"mamba" (per-request state)
    layer_types: tuple[str, ...] = field(default=())
    name: str = ""
    # Gemma-style options (defaults leave other architectures unchanged)
    layer_sliding_window: tuple[int | None, ...] = field(default=())  # per layer; () = `sliding_window` everywhere
    rope_theta_local: float | None = None  # rope base of sliding-window layers (None: rope_theta)
    rope_scaling_factor: float = 1.0  # linear position scaling of the global (full-attention) layers
    query_pre_attn_scalar: float | None = None  # attention scale = this ** -0.5 (None: head_dim ** -0.5)
    attn_logit_softcap: float | None = None
    final_logit_softcap: float | None = None
    norm_weight_offset: float = 0.0  # added to RMSNorm weights at load (HF Gemma stores w for a (1 + w) scale)

    def __post_init__(self) -> None:
        if not self.layer_types:
            object.__setattr__(self, "layer_types", ("attention",) * self.num_layers)
        if not self.layer_sliding_window:
            object.__setattr__(self, "layer_sliding_window", (self.sliding_window,) * self.num_layers)
        if len(self.layer_sliding_window) != self.num_layers:
            raise ValueError(f"layer_sliding_window has {len(self.layer_sliding_window)} entries for "
                             f"{self.num_layers} layers")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}")

    @property
    def attention_layers(self) -> list[int]:
        return [i for i, t in enumerate(self.layer_types) if t == "attention"]

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim
