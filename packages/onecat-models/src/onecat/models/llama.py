"""Llama-family decoder (Llama 2/3, SmolLM2, Mistral-style): the model's math, written against
onecat.kernels.ops, with no kernel named here.

Weights arrive under HF names (the loader translates GGUF names). Q/K/V and gate/up are stored
fused (dense, quantized rows concatenated when the parts share a format, else a weights.RowParts of
the parts' runs) so each layer makes two projections before attention and two in the MLP, whatever
the formats.
"""

from __future__ import annotations

import torch

from onecat.kernels import AttentionMetadata, ops
from onecat.kernels.reference import rope_cos_sin

from .gguf_file import CheckpointError, GGUFFile
from .spec import ModelSpec
from .weight_map import HFNamedWeights, add_rms_norm, matrix_shapes

GGUF_TO_HF = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


class LlamaLayer:
    """One decoder layer's weights. Dense: preallocated buffers; quantized: the projections (qkv,
    o_proj, gate_up, down) are set at load to weight objects, a RowParts where the parts of a fused
    projection differ in format (see weight_map)."""

    def __init__(self, spec: ModelSpec, dtype: torch.dtype, device: torch.device, quantized: bool = False):
        H = spec.hidden_size
        empty = lambda *s: torch.empty(*s, dtype=dtype, device=device)  # noqa: E731
        self.input_norm = empty(H)
        self.post_attn_norm = empty(H)
        self.qkv_bias = empty(spec.q_size + 2 * spec.kv_size) if spec.attention_bias else None
        for attr, shape in matrix_shapes(spec).items():
            setattr(self, attr, None if quantized else empty(*shape))


class LlamaForCausalLM(HFNamedWeights):
    """forward(input_ids, positions, kv_caches, metadata) -> hidden states; compute_logits(h)."""

    GGUF_TO_HF = GGUF_TO_HF
    MATRICES = ("qkv", "o_proj", "gate_up", "down")
    # qkv and gate_up carry the residual add and the RMSNorm in front of them, gate_up its activation
    # too; o_proj / down are plain projections (onecat.serve.admission plans the same calls)
    FUSED_PROJECTIONS = True

    def __init__(self, spec: ModelSpec, dtype: torch.dtype, device: torch.device, quantized: bool = False):
        self._init_buffers(spec, dtype, device, LlamaLayer, quantized)
        rot = spec.rotary_dim or spec.head_dim
        self.cos_sin = rope_cos_sin(spec.head_dim, rot, spec.max_position, spec.rope_theta, device=device)
        self.scale = spec.head_dim ** -0.5

    # -- checkpoint ---------------------------------------------------------------------------
    @staticmethod
    def spec_from_gguf(f: GGUFFile) -> ModelSpec:
        arch = f.architecture
        g = lambda key, default=None: f.get(f"{arch}.{key}", default)  # noqa: E731
        req = lambda key: f.require(f"{arch}.{key}")  # noqa: E731
        n_heads = int(req("attention.head_count"))
        hidden = int(req("embedding_length"))
        head_dim = int(g("attention.key_length", hidden // n_heads))
        vocab = g("vocab_size") or len(f.require("tokenizer.ggml.tokens"))
        if f.tensors["token_embd.weight"].shape[0] != vocab:
            raise CheckpointError(f"{f.path}: metadata vocab_size {vocab} contradicts token_embd.weight "
                                  f"rows {f.tensors['token_embd.weight'].shape[0]}")
        return ModelSpec(
            architecture="llama", name=str(f.get("general.name", "")),
            num_layers=int(req("block_count")), hidden_size=hidden,
            intermediate_size=int(req("feed_forward_length")), num_heads=n_heads,
            num_kv_heads=int(g("attention.head_count_kv", n_heads)), head_dim=head_dim,
            vocab_size=int(vocab), max_position=int(g("context_length", 2048)),
            rms_norm_eps=float(g("attention.layer_norm_rms_epsilon", 1e-5)),
            rope_theta=float(g("rope.freq_base", 10000.0)),
            rotary_dim=int(g("rope.dimension_count", head_dim)),
            rope_interleaved=True,  # llama.cpp's converter permutes Q/K rows for GPT-J-style rope
            tie_word_embeddings="output.weight" not in f.tensors,
        )

    @staticmethod
    def spec_from_hf_config(cfg: dict) -> ModelSpec:
        H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
        rope = cfg.get("rope_parameters") or {}
        return ModelSpec(
            architecture="llama", name=cfg.get("_name_or_path", ""),
            num_layers=cfg["num_hidden_layers"], hidden_size=H,
            intermediate_size=cfg["intermediate_size"], num_heads=nh,
            num_kv_heads=cfg.get("num_key_value_heads", nh), head_dim=cfg.get("head_dim") or H // nh,
            vocab_size=cfg["vocab_size"], max_position=cfg.get("max_position_embeddings", 2048),
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-5),
            rope_theta=float(cfg.get("rope_theta", rope.get("rope_theta", 10000.0))),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=bool(cfg.get("attention_bias", False)),
            sliding_window=cfg.get("sliding_window"),
        )

    def _layer_parts(self) -> dict:
        return {
            "input_layernorm.weight": ("input_norm", 0),
            "post_attention_layernorm.weight": ("post_attn_norm", 0),
            "self_attn.q_proj.weight": ("qkv", 0),
            "self_attn.k_proj.weight": ("qkv", 1),
            "self_attn.v_proj.weight": ("qkv", 2),
            "self_attn.q_proj.bias": ("qkv_bias", 0),
            "self_attn.k_proj.bias": ("qkv_bias", 1),
            "self_attn.v_proj.bias": ("qkv_bias", 2),
            "self_attn.o_proj.weight": ("o_proj", 0),
            "mlp.gate_proj.weight": ("gate_up", 0),
            "mlp.up_proj.weight": ("gate_up", 1),
            "mlp.down_proj.weight": ("down", 0),
        }

    def _splits(self) -> dict:
        q, kv, I = self.spec.q_size, self.spec.kv_size, self.spec.intermediate_size
        return {"qkv": [q, kv, kv], "qkv_bias": [q, kv, kv], "gate_up": [I, I]}

    def _matrix_shapes(self) -> dict:
        V, H = self.spec.vocab_size, self.spec.hidden_size
        return {**matrix_shapes(self.spec), "embed": (V, H), "lm_head": (V, H)}

    # -- math ---------------------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                kv_caches: list[tuple[torch.Tensor, torch.Tensor]], md: AttentionMetadata) -> torch.Tensor:
        s = self.spec
        T = input_ids.shape[0]
        h = self.embed_tokens(input_ids)
        neox = not s.rope_interleaved
        # y: the output of the last projection into the residual stream, not yet added to it; each
        # normed projection adds it and normalizes (one op, fused into the GEMV for decode on the GPU).
        # down: the layer's down projection (its input, its weight), not yet run: the next layer's input takes
        # it, its residual add and norm as one op, as gate_up takes o_proj (fused into the GEMMs' epilogues for
        # decode batches on the GPU: linear_norm_ops).
        y, residual, eps, down = h, None, s.rms_norm_eps, None
        for layer, (k_cache, v_cache) in zip(self.layers, kv_caches):
            # norm, projection, rotary and cache write: one op (one launch for decode on the GPU)
            rope = (positions, s.head_dim, self.cos_sin, neox, k_cache, v_cache, md.slot_mapping, s.num_heads,
                    s.num_kv_heads)
            if down is not None:
                q, residual = ops.linear_rms_norm_qkv_rotary_cache(*down, residual, layer.input_norm, eps, layer.qkv,
                                                                   layer.qkv_bias, *rope)
            else:
                q, residual = ops.rms_norm_qkv_rotary_cache(y, layer.input_norm, eps, layer.qkv, residual,
                                                            layer.qkv_bias, *rope)
            o = ops.paged_attention(q.reshape(T, s.num_heads, s.head_dim), k_cache, v_cache, md, self.scale,
                                    s.sliding_window).reshape(T, s.q_size)
            # feeds: gate_up's output goes to down (on the GPU it may come back in down's x-stage layout)
            a, residual = ops.linear_rms_norm_linear(o, layer.o_proj, residual, layer.post_attn_norm, eps,
                                                     layer.gate_up, None, "silu_and_mul", layer.down)
            down = (a, layer.down)
        if down is not None:
            y = ops.linear(*down)
        return add_rms_norm(y, residual, self.norm, eps)[0]

    def compute_logits(self, hidden: torch.Tensor, upcast: bool = True) -> torch.Tensor:
        """Logits [T, V]: float32, or with upcast=False in the LM head's dtype (a graphed decode step
        leaves the conversion to the rows that need it: a greedy argmax does not)."""
        logits = ops.linear(hidden, self.lm_head)
        return logits.float() if upcast else logits
