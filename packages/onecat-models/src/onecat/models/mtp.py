"""A multi-token-prediction (MTP) head, DeepSeek-V3 / Qwen3-Next style, on a Llama-style target.

At position p it reads the target's final hidden state h_p and the embedding of the token after
it, x_{p+1}, and predicts x_{p+2}:

    e = enorm(embed(x_{p+1}));  g = hnorm(h_p);  u = eh_proj([e ; g])          (H x 2H)
    u = decoder_block(u) (own attention with its own paged KV);  logits = lm_head(norm(u))

Embedding and LM head are the target's (shared); enorm, hnorm, eh_proj, the block and the final
norm are the head's own. The block here is the target's dense Llama block (the attention/MLP of
DeepSeek-V3's MTP layer is MLA + MoE, which onecat does not run yet). Weights load under the
names those checkpoints use: DeepSeek-V3 `model.layers.{N}.{enorm,hnorm,eh_proj,shared_head.norm,
self_attn.*,mlp.*,...}` (N = the target's layer count) and Qwen3-Next `mtp.{pre_fc_norm_embedding,
pre_fc_norm_hidden,fc,norm,layers.0.*}`. It exposes the model interface ModelRunner drives
(forward(ids, positions, kv_caches, md, hidden_states), compute_logits), so its KV cache is paged
like any model's.
"""

from __future__ import annotations

import dataclasses

import torch

from onecat.kernels import AttentionMetadata, ops
from onecat.kernels.reference import rope_cos_sin

from .gguf_file import CheckpointError
from .spec import ModelSpec

# per-block HF name -> (attribute, part): q/k/v and gate/up are stored fused, like the target's
BLOCK = {"input_layernorm.weight": ("input_norm", 0), "post_attention_layernorm.weight": ("post_attn_norm", 0),
         "self_attn.q_proj.weight": ("qkv", 0), "self_attn.k_proj.weight": ("qkv", 1),
         "self_attn.v_proj.weight": ("qkv", 2), "self_attn.o_proj.weight": ("o_proj", 0),
         "mlp.gate_proj.weight": ("gate_up", 0), "mlp.up_proj.weight": ("gate_up", 1),
         "mlp.down_proj.weight": ("down", 0)}
OWN = {"enorm.weight": "enorm", "hnorm.weight": "hnorm", "eh_proj.weight": "eh_proj", "norm.weight": "norm"}
QWEN3_NEXT = {"mtp.pre_fc_norm_embedding.weight": "enorm.weight", "mtp.pre_fc_norm_hidden.weight": "hnorm.weight",
              "mtp.fc.weight": "eh_proj.weight", "mtp.norm.weight": "norm.weight"}


class MTPHead:
    """The head's own weights are dense tensors; embedding and LM head are the target's (whatever
    format the target holds them in: lookups go through the target's embed_tokens/compute_logits)."""

    def __init__(self, target, dtype: torch.dtype, device):
        ts = target.spec
        if ts.architecture != "llama" or ts.attention_bias:
            raise CheckpointError(f"MTP head: only Llama-style targets without attention bias are supported, "
                                  f"not {ts.architecture!r}")
        self.target = target
        self.spec: ModelSpec = dataclasses.replace(ts, num_layers=1, layer_types=(), layer_sliding_window=(),
                                                   name=f"{ts.name} MTP head")
        self.dtype, self.device = dtype, torch.device(device)
        H, I, q, kv = ts.hidden_size, ts.intermediate_size, ts.q_size, ts.kv_size
        empty = lambda *sh: torch.empty(*sh, dtype=dtype, device=device)  # noqa: E731
        self.enorm, self.hnorm, self.eh_proj, self.norm = empty(H), empty(H), empty(H, 2 * H), empty(H)
        self.input_norm, self.post_attn_norm = empty(H), empty(H)
        self.qkv, self.o_proj, self.gate_up, self.down = empty(q + 2 * kv, H), empty(H, q), empty(2 * I, H), empty(H, I)
        self.splits = {"qkv": [q, kv, kv], "gate_up": [I, I]}
        rot = ts.rotary_dim or ts.head_dim
        self.cos_sin = rope_cos_sin(ts.head_dim, rot, ts.max_position, ts.rope_theta, device=device)
        self.scale = ts.head_dim ** -0.5
        self.target_layers = ts.num_layers
        self._loaded: set[str] = set()

    # -- checkpoint names ---------------------------------------------------------------------
    def _canonical(self, name: str) -> str | None:
        """Checkpoint name -> ours (enorm/hnorm/eh_proj/norm.weight or a BLOCK name); None: not the head's."""
        if name in QWEN3_NEXT:
            return QWEN3_NEXT[name]
        if name.startswith("mtp.layers.0."):
            return name.removeprefix("mtp.layers.0.")
        prefix = f"model.layers.{self.target_layers}."  # DeepSeek-V3: the layer after the last block
        if name.startswith(prefix):
            rest = name.removeprefix(prefix)
            if rest in ("shared_head.head.weight", "embed_tokens.weight"):
                return None  # the target's own (shared) tensors
            return "norm.weight" if rest == "shared_head.norm.weight" else rest
        return None

    def expected_weights(self) -> set[str]:
        return set(OWN) | set(BLOCK)

    def load_weight(self, name: str, tensor: torch.Tensor) -> bool:
        canonical = self._canonical(name)
        if canonical is None:
            return False
        if canonical in OWN:
            attr, part = OWN[canonical], 0
        elif canonical in BLOCK:
            attr, part = BLOCK[canonical]
        else:
            raise CheckpointError(f"MTP tensor {name!r}: not part of a Llama-style MTP layer")
        dst = getattr(self, attr)
        sizes = self.splits.get(attr)
        if sizes is not None:
            dst = dst[sum(sizes[:part]):sum(sizes[:part + 1])]
        if tuple(dst.shape) != tuple(tensor.shape):
            raise CheckpointError(f"MTP tensor {name!r}: shape {tuple(tensor.shape)} != expected {tuple(dst.shape)}")
        dst.copy_(tensor)
        self._loaded.add(canonical)
        return True

    def missing_weights(self) -> set[str]:
        return self.expected_weights() - self._loaded

    # -- math ---------------------------------------------------------------------------------
    def _embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        lookup = getattr(self.target, "embed_tokens", None)
        return lookup(input_ids) if lookup is not None else self.target.embed.index_select(0, input_ids)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                kv_caches: list[tuple[torch.Tensor, torch.Tensor]], md: AttentionMetadata,
                hidden_states: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids[i] = x_{p+1}, hidden_states[i] = h_p, positions[i] = p. Returns the normed
        hidden states (compute_logits turns them into logits for x_{p+2})."""
        s, eps = self.spec, self.spec.rms_norm_eps
        T = input_ids.shape[0]
        if hidden_states is None:  # warm-up only
            hidden_states = torch.zeros(T, s.hidden_size, dtype=self.dtype, device=self.device)
        e = ops.rms_norm(self._embed(input_ids).to(self.dtype), self.enorm, eps)
        g = ops.rms_norm(hidden_states.to(self.dtype), self.hnorm, eps)
        residual = ops.linear(torch.cat([e, g], dim=-1), self.eh_proj)
        k_cache, v_cache = kv_caches[0]
        x = ops.rms_norm(residual, self.input_norm, eps)
        q, k, v = ops.linear(x, self.qkv).split([s.q_size, s.kv_size, s.kv_size], dim=-1)
        q = ops.rotary_and_cache(positions, q, k, v, s.head_dim, self.cos_sin, not s.rope_interleaved, k_cache, v_cache,
                                 md.slot_mapping)
        o = ops.paged_attention(q.reshape(T, s.num_heads, s.head_dim), k_cache, v_cache, md, self.scale,
                                s.sliding_window)
        x, residual = ops.rms_norm(ops.linear(o.reshape(T, s.q_size), self.o_proj), self.post_attn_norm, eps,
                                   residual)
        h = ops.linear(ops.silu_and_mul(ops.linear(x, self.gate_up)), self.down)
        out, _ = ops.rms_norm(h, self.norm, eps, residual)
        return out

    def compute_logits(self, hidden: torch.Tensor, upcast: bool = True) -> torch.Tensor:
        return self.target.compute_logits(hidden, upcast)  # the shared LM head
