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

    def __post_init__(self) -> None:
        if not self.layer_types:
            object.__setattr__(self, "layer_types", ("attention",) * self.num_layers)
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
