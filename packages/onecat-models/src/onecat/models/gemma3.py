"""Gemma 3 text decoder (e.g. Gemma3-270M, 1B): the model's math, written against onecat.kernels.ops.

What sets it apart from Llama:
- interleaved attention: 5 sliding-window ("local") layers then 1 global layer, repeating
  (HF `layer_types`, default `sliding_window_pattern` 6; llama.cpp's `set_swa_pattern(6)`); local
  layers use rope base 10000, global ones `rope_theta` (1e6), optionally linearly scaled;
- QK-norm: an RMSNorm over each head of q and k before rope;
- four RMSNorms per layer (input, post-attention, pre-feedforward, post-feedforward), each
  scaling by (1 + w). llama.cpp's converter stores 1 + w in the GGUF (values ~1..300, HF's
  GGUF reader subtracts 1 again), so GGUF weights are used as they are and HF safetensors
  weights get `spec.norm_weight_offset` = 1 added at load;
- GeGLU MLP (tanh GELU), embeddings scaled by sqrt(hidden) (rounded to the model dtype, as HF),
  attention scale `query_pre_attn_scalar` ** -0.5, tied lm_head, optional soft-caps.
llama.cpp does not permute Q/K rows for Gemma, so rope is NeoX style (HF's rotate_half).

Precision: Gemma 3's residual stream outgrows float16 (plain FP16 gives inf/NaN), so with a
float16 model the residual is carried in float32; float32 (the CPU default) and bfloat16 keep
the model dtype throughout.
"""

from __future__ import annotations

import math

import torch

from onecat.kernels import AttentionMetadata, ops
from onecat.kernels.reference import rope_cos_sin

from .gguf_file import CheckpointError, GGUFFile
from .spec import ModelSpec
from .weight_map import HFNamedWeights, fused_linear, matrix_shapes

GGUF_TO_HF = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "attn_norm.weight": "input_layernorm.weight",
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
SWA_PATTERN = 6  # every 6th layer is global (HF's default `sliding_window_pattern`, llama.cpp's swa pattern)
LOCAL_ROPE_THETA = 10000.0  # llama.cpp hard-codes it for gemma3's sliding layers; HF's rope_local_base_freq


def default_layer_windows(num_layers: int, window: int, pattern: int = SWA_PATTERN) -> tuple[int | None, ...]:
    return tuple(None if (i + 1) % pattern == 0 else window for i in range(num_layers))


class Gemma3Layer:
    """One layer's weights; projections as in llama.LlamaLayer (dense buffers or, quantized, weight
    objects: a RowParts where the parts of a fused projection differ in format)."""

    def __init__(self, spec: ModelSpec, dtype: torch.dtype, device: torch.device, quantized: bool = False):
        H, D = spec.hidden_size, spec.head_dim
        empty = lambda *s: torch.empty(*s, dtype=dtype, device=device)  # noqa: E731
        self.input_norm, self.post_attn_norm = empty(H), empty(H)
        self.pre_ff_norm, self.post_ff_norm = empty(H), empty(H)
        self.q_norm, self.k_norm = empty(D), empty(D)
        for attr, shape in matrix_shapes(spec).items():
            setattr(self, attr, None if quantized else empty(*shape))


class Gemma3ForCausalLM(HFNamedWeights):
    """forward(input_ids, positions, kv_caches, metadata) -> hidden states; compute_logits(h)."""

    GGUF_TO_HF = GGUF_TO_HF
    MATRICES = ("qkv", "o_proj", "gate_up", "down")

    def __init__(self, spec: ModelSpec, dtype: torch.dtype, device: torch.device, quantized: bool = False):
        self._init_buffers(spec, dtype, device, Gemma3Layer, quantized)
        D = spec.head_dim
        # HF: embed * tensor(sqrt(H)).to(weight dtype)
        self.embed_scale = torch.tensor(math.sqrt(spec.hidden_size), dtype=dtype, device=device)
        self.cos_sin_global = _rope_cache(D, spec.max_position, spec.rope_theta, spec.rope_scaling_factor, device)
        self.cos_sin_local = _rope_cache(D, spec.max_position, spec.rope_theta_local or spec.rope_theta, 1.0, device)
        self.scale = (spec.query_pre_attn_scalar or D) ** -0.5
        self.residual_dtype = torch.float32 if dtype == torch.float16 else dtype

    # -- checkpoint ---------------------------------------------------------------------------
    @staticmethod
    def spec_from_gguf(f: GGUFFile) -> ModelSpec:
        arch = f.architecture
        g = lambda key, default=None: f.get(f"{arch}.{key}", default)  # noqa: E731
        req = lambda key: f.require(f"{arch}.{key}")  # noqa: E731
        n_layers, hidden = int(req("block_count")), int(req("embedding_length"))
        n_heads = int(req("attention.head_count"))
        head_dim = int(g("attention.key_length", hidden // n_heads))
        if int(g("attention.value_length", head_dim)) != head_dim:
            raise CheckpointError(f"{f.path}: gemma3 key_length {head_dim} != value_length "
                                  f"{g('attention.value_length')}")
        vocab = g("vocab_size") or len(f.require("tokenizer.ggml.tokens"))
        if f.tensors["token_embd.weight"].shape[0] != vocab:
            raise CheckpointError(f"{f.path}: metadata vocab_size {vocab} contradicts token_embd.weight "
                                  f"rows {f.tensors['token_embd.weight'].shape[0]}")
        window = int(req("attention.sliding_window"))
        scaling = 1.0
        if g("rope.scaling.type") == "linear":
            scaling = float(g("rope.scaling.factor", 1.0))
        elif g("rope.scaling.type") not in (None, "none"):
            raise CheckpointError(f"{f.path}: gemma3 rope scaling {g('rope.scaling.type')!r} is not supported")
        # GGUF carries no query_pre_attn_scalar: llama.cpp uses head_dim, except 27B (62 layers): hidden/heads
        qpas = hidden / n_heads if n_layers == 62 else head_dim
        return ModelSpec(
            architecture="gemma3", name=str(f.get("general.name", "")),
            num_layers=n_layers, hidden_size=hidden, intermediate_size=int(req("feed_forward_length")),
            num_heads=n_heads, num_kv_heads=int(g("attention.head_count_kv", n_heads)), head_dim=head_dim,
            vocab_size=int(vocab), max_position=int(g("context_length", 32768)),
            rms_norm_eps=float(g("attention.layer_norm_rms_epsilon", 1e-6)),
            rope_theta=float(g("rope.freq_base", 1_000_000.0)),
            rope_theta_local=float(g("rope.freq_base_swa", LOCAL_ROPE_THETA)),
            rope_scaling_factor=scaling, rope_interleaved=False,
            tie_word_embeddings="output.weight" not in f.tensors, hidden_act="gelu_pytorch_tanh",
            sliding_window=window, layer_sliding_window=default_layer_windows(n_layers, window),
            query_pre_attn_scalar=float(qpas),
            attn_logit_softcap=g("attn_logit_softcapping"), final_logit_softcap=g("final_logit_softcapping"),
            norm_weight_offset=0.0,  # the converter stored 1 + w
        )

    @staticmethod
    def spec_from_hf_config(cfg: dict) -> ModelSpec:
        cfg = cfg.get("text_config", cfg)
        H, nh, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
        head_dim = cfg.get("head_dim") or 256
        rope = cfg.get("rope_parameters") or {}
        full, local = rope.get("full_attention", {}), rope.get("sliding_attention", {})
        scaling_cfg = cfg.get("rope_scaling") or full
        factor = float(scaling_cfg.get("factor", 1.0)) if scaling_cfg.get("rope_type") == "linear" else 1.0
        window = int(cfg.get("sliding_window") or 4096)
        types = cfg.get("layer_types")
        if types:
            windows = tuple(window if t == "sliding_attention" else None for t in types)
        else:
            windows = default_layer_windows(L, window, int(cfg.get("sliding_window_pattern", SWA_PATTERN)))
        return ModelSpec(
            architecture="gemma3", name=cfg.get("_name_or_path", ""),
            num_layers=L, hidden_size=H, intermediate_size=cfg["intermediate_size"], num_heads=nh,
            num_kv_heads=cfg.get("num_key_value_heads", nh), head_dim=head_dim,
            vocab_size=cfg["vocab_size"], max_position=cfg.get("max_position_embeddings", 32768),
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=float(cfg.get("rope_theta", full.get("rope_theta", 1_000_000.0))),
            rope_theta_local=float(cfg.get("rope_local_base_freq", local.get("rope_theta", LOCAL_ROPE_THETA))),
            rope_scaling_factor=factor, rope_interleaved=False,
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
            hidden_act=cfg.get("hidden_activation", "gelu_pytorch_tanh"),
            sliding_window=window, layer_sliding_window=windows,
            query_pre_attn_scalar=float(cfg.get("query_pre_attn_scalar", head_dim)),
            attn_logit_softcap=cfg.get("attn_logit_softcapping"),
            final_logit_softcap=cfg.get("final_logit_softcapping"),
            norm_weight_offset=1.0,  # HF stores w; the norm scales by (1 + w)
        )

    def _layer_parts(self) -> dict:
        return {
            "input_layernorm.weight": ("input_norm", 0),
            "post_attention_layernorm.weight": ("post_attn_norm", 0),
            "pre_feedforward_layernorm.weight": ("pre_ff_norm", 0),
            "post_feedforward_layernorm.weight": ("post_ff_norm", 0),
            "self_attn.q_norm.weight": ("q_norm", 0),
            "self_attn.k_norm.weight": ("k_norm", 0),
            "self_attn.q_proj.weight": ("qkv", 0),
            "self_attn.k_proj.weight": ("qkv", 1),
            "self_attn.v_proj.weight": ("qkv", 2),
            "self_attn.o_proj.weight": ("o_proj", 0),
            "mlp.gate_proj.weight": ("gate_up", 0),
            "mlp.up_proj.weight": ("gate_up", 1),
            "mlp.down_proj.weight": ("down", 0),
        }

    def _splits(self) -> dict:
        q, kv, I = self.spec.q_size, self.spec.kv_size, self.spec.intermediate_size
        return {"qkv": [q, kv, kv], "gate_up": [I, I]}

    def _matrix_shapes(self) -> dict:
        V, H = self.spec.vocab_size, self.spec.hidden_size
        return {**matrix_shapes(self.spec), "embed": (V, H), "lm_head": (V, H)}

    def _prepare(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        if name.endswith("norm.weight") and self.spec.norm_weight_offset:
            return tensor.float() + self.spec.norm_weight_offset
        return tensor

    # -- math ---------------------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                kv_caches: list[tuple[torch.Tensor, torch.Tensor]], md: AttentionMetadata) -> torch.Tensor:
        s, dt = self.spec, self.dtype
        T, nh, nkv, D = input_ids.shape[0], s.num_heads, s.num_kv_heads, s.head_dim
        eps = s.rms_norm_eps
        residual = (self.embed_tokens(input_ids) * self.embed_scale).to(self.residual_dtype)
        h = None  # the previous layer's (post-normed) MLP output, not yet added to the stream
        for i, (layer, (k_cache, v_cache)) in enumerate(zip(self.layers, kv_caches)):
            if h is None:
                x = ops.rms_norm(residual.to(dt), layer.input_norm, eps)
            else:
                x, residual = ops.rms_norm(h, layer.input_norm, eps, residual)
                x = x.to(dt)
            q, k, v = fused_linear(x, layer.qkv, [s.q_size, s.kv_size, s.kv_size])
            q = ops.rms_norm(q.reshape(T * nh, D), layer.q_norm, eps).view(T, nh * D)
            k = ops.rms_norm(k.reshape(T * nkv, D), layer.k_norm, eps).view(T, nkv * D)
            window = s.layer_sliding_window[i]
            cos_sin = self.cos_sin_global if window is None else self.cos_sin_local
            q = ops.rotary_and_cache(positions, q, k, v, D, cos_sin, True, k_cache, v_cache, md.slot_mapping)
            o = ops.paged_attention(q.view(T, nh, D), k_cache, v_cache, md, self.scale, window,
                                    s.attn_logit_softcap)
            a = ops.rms_norm(ops.linear(o.reshape(T, s.q_size), layer.o_proj), layer.post_attn_norm, eps)
            x, residual = ops.rms_norm(a.to(self.residual_dtype), layer.pre_ff_norm, eps, residual)
            m = ops.linear(ops.gelu_and_mul(ops.linear(x.to(dt), layer.gate_up)), layer.down)
            h = ops.rms_norm(m, layer.post_ff_norm, eps).to(self.residual_dtype)
        out, _ = ops.rms_norm(h, self.norm, eps, residual)
        return out.to(dt)

    def compute_logits(self, hidden: torch.Tensor, upcast: bool = True) -> torch.Tensor:
        """Logits [T, V], float32 whatever `upcast` says: the soft cap is computed in float32 and
        rounding its output to FP16 could tie two rows' maxima that float32 keeps apart."""
        logits = ops.linear(hidden, self.lm_head).float()
        cap = self.spec.final_logit_softcap
        return cap * torch.tanh(logits / cap) if cap else logits


def _rope_cache(head_dim: int, max_positions: int, base: float, linear_factor: float, device) -> torch.Tensor:
    """NeoX cos/sin cache; linear scaling divides positions by `linear_factor` (HF rope_type 'linear')."""
    if linear_factor == 1.0:
        return rope_cos_sin(head_dim, head_dim, max_positions, base, device=device)
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim))
    t = torch.arange(max_positions, dtype=torch.float64, device=device) / linear_factor
    freqs = torch.outer(t, inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1).float()
