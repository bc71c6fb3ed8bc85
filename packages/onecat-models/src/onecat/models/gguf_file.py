"""A GGUF checkpoint: header parsed here, tensors memory-mapped and decoded one at a time.

The header (metadata and tensor table) is read with struct from a memory map: gguf-py's
GGUFReader builds a numpy view per metadata item and takes seconds on a 49k-token vocabulary;
this takes tens of milliseconds. Tensors are decoded with onecat.quant's codecs (bit-exact with
gguf-py). Every failure names the file and the problem (truncated, corrupt, unknown type, ...).
Layout (GGUF v2/v3, little-endian): magic "GGUF", u32 version, u64 tensor count, u64 metadata
count, metadata (key string, u32 type, value), tensor infos (name, u32 ndims, u64 dims (fastest
first), u32 ggml type, u64 offset), then tensor data aligned to `general.alignment` (32).
"""

from __future__ import annotations

import mmap
import os
import struct
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
    offset: int = 0  # from the start of the file

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}


class _Parser:
    def __init__(self, buf, path: str):
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, fmt: str):
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self) -> str:
        n = self.take("<Q")
        if self.pos + n > len(self.buf):
            raise CheckpointError(f"{self.path}: a string runs past the end of the file")
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return s

    def value(self, t: int):
        if t in _SCALARS:
            return self.take(_SCALARS[t])
        if t == 8:
            return self.string()
        if t == 9:
            item, n = self.take("<I"), self.take("<Q")
            if item in _NUMPY:
                arr = np.frombuffer(self.buf, dtype=_NUMPY[item], count=n, offset=self.pos)
                self.pos += arr.nbytes
                return arr.tolist()
            return [self.value(item) for _ in range(n)]
        raise CheckpointError(f"{self.path}: unknown GGUF metadata value type {t}")


class GGUFFile:
    def __init__(self, path: str | os.PathLike):
        from onecat.quant.ggml import GGML_TYPES

        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise CheckpointError(f"{self.path}: no such GGUF file")
        size = os.path.getsize(self.path)
        if size < 24:
            raise CheckpointError(f"{self.path}: not a readable GGUF file ({size} bytes)")
        with open(self.path, "rb") as fh:
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        p = _Parser(memoryview(self._map), self.path)
        try:
            if bytes(self._map[:4]) != b"GGUF":
                raise CheckpointError(f"{self.path}: not a readable GGUF file (bad magic {bytes(self._map[:4])!r})")
            p.pos = 4
            version = p.take("<I")
            if version not in (2, 3):
                raise CheckpointError(f"{self.path}: not a readable GGUF file (version {version})")
            n_tensors, n_kv = p.take("<Q"), p.take("<Q")
            self.metadata: dict[str, Any] = {}
            for _ in range(n_kv):
                key = p.string()
                self.metadata[key] = p.value(p.take("<I"))
            infos = []
            for _ in range(n_tensors):
                name = p.string()
                dims = [p.take("<Q") for _ in range(p.take("<I"))]
                infos.append((name, dims, p.take("<I"), p.take("<Q")))
        except CheckpointError:
            raise
        except (struct.error, UnicodeDecodeError, ValueError, OverflowError, MemoryError) as e:
            raise CheckpointError(f"{self.path}: not a readable GGUF file ({type(e).__name__}: {e})") from None
        align = int(self.metadata.get("general.alignment", 32))
        data_start = -(-p.pos // align) * align
        by_id = {t.type_id: t for t in GGML_TYPES.values()}
        self.tensors: dict[str, GGUFTensorInfo] = {}
        for name, dims, type_id, offset in infos:
            t = by_id.get(type_id)
            if t is None:
                raise CheckpointError(f"{self.path}: tensor {name!r} has unknown GGML type {type_id}")
            numel = 1
            for d in dims:
                numel *= d
            if dims and dims[0] % t.block_size:
                raise CheckpointError(f"{self.path}: tensor {name!r}: row length {dims[0]} is not a multiple of "
                                      f"the {t.name} block size {t.block_size}")
            info = GGUFTensorInfo(name, t.name, tuple(reversed(dims)), numel // t.block_size * t.type_size,
                                  data_start + offset)
            if info.offset + info.n_bytes > size:
                raise CheckpointError(f"{self.path}: tensor {name!r} is truncated "
                                      f"({max(0, size - info.offset)} of {info.n_bytes} bytes present)")
            self.tensors[name] = info

    @property
    def architecture(self) -> str:
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str):
            raise CheckpointError(f"{self.path}: metadata has no general.architecture")
        return arch

    @property
    def total_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors.values())

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def require(self, key: str) -> Any:
        if key not in self.metadata:
            raise CheckpointError(f"{self.path}: required metadata key {key!r} is missing")
        return self.metadata[key]

    def _info(self, name: str) -> GGUFTensorInfo:
        info = self.tensors.get(name)
        if info is None:
            raise CheckpointError(f"{self.path}: tensor {name!r} not found")
        return info

    def raw(self, name: str) -> np.ndarray:
        """The tensor's stored bytes, memory-mapped (read-only, uint8)."""
        info = self._info(name)
        return np.frombuffer(self._map, dtype=np.uint8, count=info.n_bytes, offset=info.offset)

    def dequantize(self, name: str) -> np.ndarray:
        """The tensor as float32 in torch order (rows first), bit-exact with gguf-py."""
        from onecat.quant.ggml import dequantize

        info = self._info(name)
        try:
            t = dequantize(self.raw(name), info.shape, info.ggml_type, name=name)
        except (ValueError, NotImplementedError) as e:
            raise CheckpointError(f"{self.path}: tensor {name!r} ({info.ggml_type}) cannot be decoded: {e}") from e
        return t.numpy()
