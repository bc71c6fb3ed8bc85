"""A GGUF checkpoint opened with the `gguf` library: metadata as plain Python values, tensors
memory-mapped and materialized one at a time.

Every failure names the file and the problem (truncated, corrupt, unknown tensor type, ...).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np


class CheckpointError(ValueError):
    """A checkpoint cannot be used; the message names the file and the reason."""


@dataclass(frozen=True)
class GGUFTensorInfo:
    name: str
    ggml_type: str  # e.g. "Q4_1", "F32"
    shape: tuple[int, ...]  # torch order (rows first), i.e. GGUF's dims reversed
    n_bytes: int


class GGUFFile:
    def __init__(self, path: str | os.PathLike):
        import gguf

        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise CheckpointError(f"{self.path}: no such GGUF file")
        try:
            self._reader = gguf.GGUFReader(self.path, "r")
        except Exception as e:  # the reader raises ValueError/IndexError/struct errors on bad files
            raise CheckpointError(f"{self.path}: not a readable GGUF file ({type(e).__name__}: {e})") from e
        self.metadata: dict[str, Any] = {}
        for key, field in self._reader.fields.items():
            if key.startswith("GGUF."):
                continue
            try:
                self.metadata[key] = field.contents()
            except Exception as e:
                raise CheckpointError(f"{self.path}: metadata key {key!r} is corrupt ({e})") from e
        self._tensors = {t.name: t for t in self._reader.tensors}
        self.tensors: dict[str, GGUFTensorInfo] = {}
        for t in self._reader.tensors:
            try:
                type_name = gguf.GGMLQuantizationType(int(t.tensor_type)).name
            except ValueError:
                raise CheckpointError(f"{self.path}: tensor {t.name!r} has unknown GGML type {int(t.tensor_type)}") from None
            shape = tuple(int(d) for d in reversed(t.shape.tolist()))
            self.tensors[t.name] = GGUFTensorInfo(t.name, type_name, shape, int(t.n_bytes))
            if t.data.nbytes != t.n_bytes:
                raise CheckpointError(f"{self.path}: tensor {t.name!r} is truncated "
                                      f"({t.data.nbytes} of {t.n_bytes} bytes present)")

    @property
    def architecture(self) -> str:
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str):
            raise CheckpointError(f"{self.path}: metadata has no general.architecture")
        return arch

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def require(self, key: str) -> Any:
        if key not in self.metadata:
            raise CheckpointError(f"{self.path}: required metadata key {key!r} is missing")
        return self.metadata[key]

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes (quantized types) or values (float types) as stored, memory-mapped."""
        if name not in self._tensors:
            raise CheckpointError(f"{self.path}: tensor {name!r} not found")
        return self._tensors[name].data

    def dequantize(self, name: str) -> np.ndarray:
        """The tensor as float32 in torch order (rows first)."""
        from gguf.quants import dequantize

        info = self.tensors.get(name)
        if info is None:
            raise CheckpointError(f"{self.path}: tensor {name!r} not found")
        t = self._tensors[name]
        try:
            arr = dequantize(t.data, t.tensor_type)
        except NotImplementedError as e:
            raise CheckpointError(f"{self.path}: tensor {name!r}: GGML type {info.ggml_type} "
                                  f"cannot be decoded ({e})") from e
        arr = np.ascontiguousarray(arr.reshape(info.shape), dtype=np.float32)
        return arr if arr.flags.writeable else arr.copy()  # F32 tensors come back as the read-only map
