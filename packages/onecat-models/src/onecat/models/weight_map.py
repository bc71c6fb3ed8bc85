"""Placing checkpoint tensors (under HF names) into an adapter's fused buffers.

An adapter says where each name goes (`_top_level` and `_layer_slices`: a buffer and, for fused
buffers, the row range); this mixin does the rest for every adapter alike: the GGUF -> HF name
translation, the shape check, the copy, and the bookkeeping of what is still missing.
"""

from __future__ import annotations

import torch

from .gguf_file import CheckpointError

Slot = tuple[torch.Tensor | None, tuple[int, int] | None]  # buffer (None: not in this model), rows


class HFNamedWeights:
    GGUF_TO_HF: dict[str, str] = {}  # GGUF name (per block: without "blk.N.") -> HF name

    def _init_buffers(self, spec, dtype: torch.dtype, device, layer_cls) -> None:
        """The buffers every decoder has: embedding, layers, final norm and the (tied) LM head."""
        self.spec, self.dtype, self.device = spec, dtype, torch.device(device)
        self.embed = torch.empty(spec.vocab_size, spec.hidden_size, dtype=dtype, device=device)
        self.layers = [layer_cls(spec, dtype, device) for _ in range(spec.num_layers)]
        self.norm = torch.empty(spec.hidden_size, dtype=dtype, device=device)
        self.lm_head = self.embed if spec.tie_word_embeddings else torch.empty_like(self.embed)
        self._loaded: set[str] = set()

    def _top_level(self) -> dict[str, torch.Tensor | None]:
        return {"model.embed_tokens.weight": self.embed, "model.norm.weight": self.norm,
                "lm_head.weight": None if self.spec.tie_word_embeddings else self.lm_head}

    # -- supplied by the adapter ----------------------------------------------------------------

    def _layer_slices(self, layer) -> dict[str, Slot]:
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

    def expected_weights(self) -> set[str]:
        names = {n for n, buf in self._top_level().items() if buf is not None}
        per_layer = [n for n, (buf, _) in self._layer_slices(self.layers[0]).items() if buf is not None]
        for i in range(len(self.layers)):
            names.update(f"model.layers.{i}.{n}" for n in per_layer)
        return names

    def load_weight(self, name: str, tensor: torch.Tensor) -> bool:
        """Copy one checkpoint tensor (HF name) into place; False if the name is not ours."""
        if name.startswith("model.layers."):
            _, _, idx, rest = name.split(".", 3)
            if not idx.isdigit() or int(idx) >= len(self.layers):
                return False
            dst, rows = self._layer_slices(self.layers[int(idx)]).get(rest, (None, None))
        else:
            dst, rows = self._top_level().get(name), None
            if name == "lm_head.weight" and self.spec.tie_word_embeddings:
                return True  # tied: the embedding serves
        if dst is None:
            return False
        if rows is not None:
            dst = dst[rows[0]:rows[1]]
        if tuple(dst.shape) != tuple(tensor.shape):
            raise CheckpointError(f"tensor {name!r}: shape {tuple(tensor.shape)} != expected {tuple(dst.shape)}")
        dst.copy_(self._prepare(name, tensor))
        self._loaded.add(name)
        return True

    def missing_weights(self) -> set[str]:
        return self.expected_weights() - self._loaded
