"""Placing checkpoint tensors (under HF names) into an adapter's weights.

An adapter says where each name goes (`_layer_parts`: a layer attribute and, for fused projections,
the part index; `_splits`: the row counts of each fused projection's parts); this mixin does the
rest for every adapter alike: the GGUF -> HF name translation, the shape check, the bookkeeping of
what is still missing, and the two ways of holding a projection:

* dense (`quantized=False`): preallocated buffers in the model dtype; fused parts are row ranges.
* quantized (`quantized=True`, the default route of the loader): each projection holds its weight
  object in the checkpoint's format (onecat.quant.linear_weights). `finish_loading` fuses q/k/v and
  gate/up by concatenating their quantized rows when the parts share one format
  (`linear_weights.cat_rows`), else fuses each run of consecutive parts that do and holds the runs as
  one `onecat.kernels.weights.RowParts` (a Q4_K_M qkv: [q | k] in q4_k, v in q6_k), then prepares
  each weight once for the device (`linear_method.process_weights_after_loading`). Either way a
  projection is one weight object: model code calls the ops alike, and the ops pick the kernels.

Vectors (norms, biases) are always dense buffers.
"""

from __future__ import annotations

import torch

from onecat.kernels import ops
from onecat.kernels.weights import RowParts
from onecat.quant.linear_method import describe_weight, process_weights_after_loading
from onecat.quant.linear_weights import cat_rows

from .gguf_file import CheckpointError

TOP_LEVEL = {"model.embed_tokens.weight": "embed", "model.norm.weight": "norm", "lm_head.weight": "lm_head"}


def fused_linear(x: torch.Tensor, weight, sizes: list[int], bias: torch.Tensor | None = None) -> list[torch.Tensor]:
    """Outputs of a fused projection (one weight object: dense, quantized or a RowParts) split into its parts."""
    return list(ops.linear(x, weight, bias).split(sizes, dim=-1))


def _fuse_consecutive(parts: list) -> list:
    """Each run of consecutive parts that `cat_rows` can fuse, fused: q4_k q, q4_k k, q6_k v -> [[q | k], v]
    (fusability is one format and identical per-tensor parameters, so a run extends one part at a time)."""
    runs = [parts[0]]
    for part in parts[1:]:
        fused = cat_rows([runs[-1], part])
        if fused is None:
            runs.append(part)
        else:
            runs[-1] = fused
    return runs


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor | None, norm_weight: torch.Tensor, eps: float):
    """(rms_norm(x + residual), new residual stream): x itself without a residual (the first layer)."""
    if residual is None:
        return ops.rms_norm(x, norm_weight, eps), x
    return ops.rms_norm(x, norm_weight, eps, residual)


def matrix_shapes(spec) -> dict[str, tuple[int, int]]:
    """(N, K) of a decoder layer's projections: fused q/k/v, o, fused gate/up, down."""
    H, I, q, kv = spec.hidden_size, spec.intermediate_size, spec.q_size, spec.kv_size
    return {"qkv": (q + 2 * kv, H), "o_proj": (H, q), "gate_up": (2 * I, H), "down": (H, I)}


class HFNamedWeights:
    GGUF_TO_HF: dict[str, str] = {}  # GGUF name (per block: without "blk.N.") -> HF name
    MATRICES: tuple[str, ...] = ()  # layer attributes that are projections (held quantized)

    def _init_buffers(self, spec, dtype: torch.dtype, device, layer_cls, quantized: bool = False) -> None:
        """The weights every decoder has: embedding, layers, final norm and the (tied) LM head."""
        self.spec, self.dtype, self.device = spec, dtype, torch.device(device)
        self.quantized = quantized
        self.embed = None if quantized else torch.empty(spec.vocab_size, spec.hidden_size, dtype=dtype, device=device)
        self.layers = [layer_cls(spec, dtype, device, quantized) for _ in range(spec.num_layers)]
        self.norm = torch.empty(spec.hidden_size, dtype=dtype, device=device)
        if spec.tie_word_embeddings:
            self.lm_head = self.embed
        else:
            self.lm_head = None if quantized else torch.empty_like(self.embed)
        self._loaded: set[str] = set()
        self._parts: dict[tuple[int, str], dict[int, object]] = {}  # (layer or -1, attr) -> {part: weight}

    # -- supplied by the adapter ----------------------------------------------------------------
    def _layer_parts(self) -> dict[str, tuple[str, int]]:
        """HF name within a layer -> (layer attribute, part index within a fused projection)."""
        raise NotImplementedError

    def _splits(self) -> dict[str, list[int]]:
        """Fused attribute -> row counts of its parts (unfused attributes: absent)."""
        raise NotImplementedError

    def _matrix_shapes(self) -> dict[str, tuple[int, int]]:
        """Projection attribute -> (N, K) of the whole (fused) matrix; "embed"/"lm_head" included."""
        raise NotImplementedError

    def _prepare(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        """Hook for per-name transforms at load (e.g. a norm offset)."""
        return tensor

    # -- shared ---------------------------------------------------------------------------------
    @classmethod
    def hf_name_for_gguf(cls, name: str) -> str | None:
        if name.startswith("blk."):
            _, idx, rest = name.split(".", 2)
            hf = cls.GGUF_TO_HF.get(rest)
            return None if hf is None else f"model.layers.{idx}.{hf}"
        return cls.GGUF_TO_HF.get(name)

    def _optional(self, attr: str) -> bool:
        return attr.endswith("_bias") and not self.spec.attention_bias

    def expected_weights(self) -> set[str]:
        names = {n for n, a in TOP_LEVEL.items() if not (a == "lm_head" and self.spec.tie_word_embeddings)}
        per_layer = [n for n, (attr, _) in self._layer_parts().items() if not self._optional(attr)]
        for i in range(len(self.layers)):
            names.update(f"model.layers.{i}.{n}" for n in per_layer)
        return names

    def _resolve(self, name: str):
        """-> (owner object, layer index or -1, attribute, part index) or None if the name is not ours."""
        if name.startswith("model.layers."):
            _, _, idx, rest = name.split(".", 3)
            if not idx.isdigit() or int(idx) >= len(self.layers):
                return None
            slot = self._layer_parts().get(rest)
            if slot is None or self._optional(slot[0]):
                return None
            return self.layers[int(idx)], int(idx), slot[0], slot[1]
        attr = TOP_LEVEL.get(name)
        return None if attr is None else (self, -1, attr, 0)

    def is_projection(self, name: str) -> bool:
        """Whether `name` is a matrix this model may hold quantized (a projection, embedding or head)."""
        r = self._resolve(name)
        return r is not None and (r[2] in self.MATRICES or r[2] in ("embed", "lm_head"))

    def load_weight(self, name: str, value) -> bool:
        """Place one checkpoint tensor (HF name): a dense tensor, or (quantized route) a weight object
        from onecat.quant. False if the name is not ours."""
        r = self._resolve(name)
        if r is None:
            return False
        owner, idx, attr, part = r
        if attr == "lm_head" and self.spec.tie_word_embeddings:
            return True  # tied: the embedding serves
        sizes = self._splits().get(attr)
        dst = getattr(owner, attr)
        if isinstance(dst, torch.Tensor):  # a dense buffer: copy (dequantizing a quantized object)
            if not isinstance(value, torch.Tensor):
                value = value.dequantize(torch.float32)
            if sizes is not None:
                start = sum(sizes[:part])
                dst = dst[start:start + sizes[part]]
            self._check_shape(name, value, tuple(dst.shape))
            dst.copy_(self._prepare(name, value))
        else:
            n, k = self._matrix_shapes()[attr]
            want = (n if sizes is None else sizes[part], k)
            self._check_shape(name, value, want)
            if isinstance(value, torch.Tensor):
                value = self._prepare(name, value).to(self.dtype)
            self._parts.setdefault((idx, attr), {})[part] = value
        self._loaded.add(name)
        return True

    @staticmethod
    def _check_shape(name: str, value, want: tuple) -> None:
        if tuple(value.shape) != tuple(want):
            raise CheckpointError(f"tensor {name!r}: shape {tuple(value.shape)} != expected {tuple(want)}")

    def missing_weights(self) -> set[str]:
        return self.expected_weights() - self._loaded

    def finish_loading(self) -> None:
        """Quantized route: fuse the collected parts (runs of them where the formats differ: a RowParts of the
        runs) and prepare each weight for the device, once."""
        for (idx, attr), parts in sorted(self._parts.items()):
            ordered = [parts[i] for i in sorted(parts)]
            fused = cat_rows(ordered)
            runs = [fused] if fused is not None else _fuse_consecutive(ordered)
            held = [process_weights_after_loading(w, self.device) for w in runs]
            setattr(self if idx < 0 else self.layers[idx], attr, held[0] if len(held) == 1 else RowParts(tuple(held)))
        self._parts.clear()
        if self.spec.tie_word_embeddings:
            self.lm_head = self.embed

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        return ops.embedding(self.embed, input_ids, self.dtype)

    def weight_formats(self) -> dict[str, int]:
        """Prepared format -> number of projections holding it (a fused matrix counts once, a RowParts once per
        part)."""
        out: dict[str, int] = {}
        held = [self.embed] + ([] if self.spec.tie_word_embeddings else [self.lm_head])
        held += [getattr(layer, a) for layer in self.layers for a in self.MATRICES]
        for w in held:
            for p in (w.parts if isinstance(w, RowParts) else (w,)):
                f = describe_weight(p)
                out[f] = out.get(f, 0) + 1
        return out
