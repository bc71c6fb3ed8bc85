"""Per-layer quant method: how one Linear's weight is created from a checkpoint, prepared once for
the device, and applied.

    method = method_for_gguf("Q4_1")                # or CodecMethod("awq", group_size=128), DenseMethod()
    w = method.create_weights({"raw": raw}, (N, K), name=...)    # checkpoint tensors -> weight object
    w = process_weights_after_loading(w, device)                  # once, after fusing q/k/v, gate/up
    y = method.apply(w, x, bias)                                  # = onecat.kernels.ops.linear

`process_weights_after_loading` repacks into the layout the admitted kernel wants, and only where a
kernel for it exists: on CUDA, GGUF Q4_0/Q4_1/Q8_0/Q4_K/Q6_K become kernels' PackedWeight
(`pack`) and AWQ becomes PackedWeight("awq") (`pack_awq`); the packed GEMV serves decode (M <= 16)
and the torch reference (dequantize + matmul) everything else. On the CPU every format stays as
stored: the reference decodes per call (GGMLWeight's decode is a few whole-tensor ops per matrix).
Nothing is ever requantized: every layout decodes bit-exactly to the checkpoint's values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import torch

from .formats import get_format
from .linear_weights import BYTECODE_TYPES, ByteCodeWeight, CodecWeight, GGMLWeight

__all__ = ["DenseMethod", "GGUFMethod", "CodecMethod", "method_for_gguf", "process_weights_after_loading",
           "describe_weight"]

GGUF_FLOAT_TYPES = ("F32", "F16", "BF16")
_PACKED_GGUF = ("Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q6_K")  # kernels.weights.BYTES_PER_BLOCK, upper case


class _Apply:
    def apply(self, weight, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        from onecat.kernels import ops

        return ops.linear(x, weight, bias)


@dataclass
class DenseMethod(_Apply):
    """Unquantized (or dequantize-at-load): a dense tensor in the model dtype."""

    dtype: torch.dtype = torch.float32
    name: str = "dense"

    def create_weights(self, tensors: Mapping[str, torch.Tensor], shape, *, name: str | None = None):
        w = tensors["weight"]
        if tuple(w.shape) != tuple(shape):
            raise ValueError(f"tensor {name!r}: shape {tuple(w.shape)} != expected {tuple(shape)}")
        return w.to(self.dtype)


@dataclass
class GGUFMethod(_Apply):
    """A GGUF tensor kept as its blocks (GGMLWeight)."""

    ggml_type: str

    @property
    def name(self) -> str:
        return f"gguf:{self.ggml_type}"

    def create_weights(self, tensors: Mapping[str, torch.Tensor], shape, *, name: str | None = None):
        raw = tensors["raw"]
        n, k = shape
        return GGMLWeight(raw.reshape(n, -1), self.ggml_type, (n, k))


@dataclass
class CodecMethod(_Apply):
    """An HF-quantized Linear (awq, gptq, compressed-tensors, nvfp4, fp8, mxfp4) kept as its tensors."""

    fmt: str
    params: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.fmt

    def create_weights(self, tensors: Mapping[str, torch.Tensor], shape, *, name: str | None = None):
        spec = get_format(self.fmt)
        missing = [k for k in spec.tensor_keys if k not in tensors and k != "weight_shape"]
        if missing:
            raise ValueError(f"module {name!r} ({self.fmt}): missing checkpoint tensor(s) "
                             f"{[f'{name}.{k}' for k in missing]}")
        w = CodecWeight(spec.name, dict(tensors), tuple(int(s) for s in shape), dict(self.params), name)
        try:  # decode once: shapes, group sizes and bits are checked against the codec here, at load
            out = w.dequantize()
        except ValueError as e:
            raise ValueError(f"module {name!r}: {e}") from None
        if tuple(out.shape) != tuple(shape):
            raise ValueError(f"module {name!r} ({self.fmt}): decodes to {tuple(out.shape)}, expected {tuple(shape)}")
        return w


def method_for_gguf(ggml_type: str, dtype: torch.dtype = torch.float32):
    """GGUF float tensors load dense (they are not a quantized format); every other type keeps its blocks."""
    return DenseMethod(dtype) if ggml_type.upper() in GGUF_FLOAT_TYPES else GGUFMethod(ggml_type.upper())


def prepared_format(ggml_type: str, device_type: str) -> str:
    """The `format` a GGUF-typed projection shows the linear op once process_weights_after_loading
    has prepared it for a device of this type ("cpu" / "cuda"): the planner asks this too."""
    t = ggml_type.upper()
    if device_type == "cuda" and t in _PACKED_GGUF:
        return f"packed_{t.lower()}"
    if device_type == "cpu" and t in BYTECODE_TYPES:
        return f"bytecode_{t.lower()}"
    return f"ggml_{t.lower()}"


def process_weights_after_loading(weight, device: torch.device | str):
    """Move a (fused) weight to `device` in the layout its admitted kernel wants (see module doc)."""
    device = torch.device(device)
    if isinstance(weight, torch.Tensor):
        return weight.to(device)
    if device.type == "cuda":
        from onecat.kernels.weights import GGUFWeight, pack, pack_awq

        if isinstance(weight, GGMLWeight) and weight.ggml_type in _PACKED_GGUF:
            # raw blocks to the GPU first: pack() unpacks with torch ops there (seconds for 8B, minutes on the host)
            return pack(GGUFWeight(weight.raw.to(device), weight.ggml_type, weight.shape))
        if isinstance(weight, CodecWeight) and weight.fmt == "awq" and _awq_packable(weight):
            t = weight.tensors
            return pack_awq(t["qweight"].to(device), t["qzeros"].to(device), t["scales"].to(device),
                            weight.params.get("group_size", 128))
    if device.type == "cpu" and isinstance(weight, GGMLWeight) and weight.ggml_type in BYTECODE_TYPES:
        return ByteCodeWeight.from_ggml(weight)
    return weight.to(device)


def _awq_packable(weight: CodecWeight) -> bool:
    g = weight.params.get("group_size", 128)
    return g not in (None, -1) and g % 32 == 0 and weight.shape[1] % g == 0


def describe_weight(weight) -> str:
    """Short format name of a prepared weight (e.g. 'ggml_q4_1', 'packed_awq', 'dense:float16')."""
    if isinstance(weight, torch.Tensor):
        return f"dense:{str(weight.dtype).removeprefix('torch.')}"
    return getattr(weight, "format", type(weight).__name__)
