"""Quantized Linear weights as the engine holds them: the checkpoint's own tensors, decoded on demand.

Three classes, all ``[N, K]`` (nn.Linear layout) with the interface ``onecat.kernels.ops.linear``
expects of a quantized weight (``format``, ``shape``, ``device``, ``dequantize(dtype)``), plus what
loading and the reference route need:

* :class:`GGMLWeight` -- rows of GGUF blocks of any ggml type (raw bytes ``uint8 [N, row_bytes]``).
  Q4_0 / Q4_1 / Q5_0 / Q8_0 decode with a few whole-tensor torch ops on the weight's device (the
  reference linear decodes per call, so this is the CPU decode path); every other type goes through
  :func:`onecat.quant.ggml.dequantize` (CPU). Bit-exact with gguf-py either way.
* :class:`ByteCodeWeight` -- GGUF Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 unpacked once to one byte per weight
  plus float32 block scales: the CPU route's layout (decode = `codes.float() * d (+ m)`).
* :class:`CodecWeight` -- the tensors of one HF-quantized Linear (AWQ, GPTQ, compressed-tensors,
  NVFP4, FP8, MXFP4) under their checkpoint key names, decoded by the format's codec in
  :data:`onecat.quant.formats.FORMATS`.

``select_rows(rows)`` gives the weight restricted to some output rows (an embedding lookup, or the
reference linear's cache-sized chunks); :func:`cat_rows` fuses projections that share an input
(q/k/v, gate/up) into one matrix by concatenating their quantized rows, or returns None when the
parts cannot be fused without requantizing (different types, per-tensor scales that differ).
Format names: ``ggml_<type>``, ``bytecode_<type>`` (not ``gguf_<type>``: that name belongs to kernels' GGUFWeight, whose
raw-pointer GEMV these objects must not be handed to) and ``codec_<format>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import torch

from . import ggml
from .formats import get_format

__all__ = ["GGMLWeight", "ByteCodeWeight", "CodecWeight", "cat_rows"]


# -- GGUF blocks -----------------------------------------------------------------------------------
def _f16(blocks: torch.Tensor, off: int) -> torch.Tensor:
    """fp16 at byte `off` of each block -> float32 [..., 1]."""
    return blocks[..., off:off + 2].view(torch.float16).float()


def _nibble_planes(bl: torch.Tensor, off: int) -> torch.Tensor:
    """The 16 qs bytes at byte `off` of each block -> codes uint8 [..., 2, 16] (low nibbles = elements
    0..15, high nibbles = 16..31). Works on 16- or 32-bit words (4 or 2 bytes' nibbles per op)."""
    wide = torch.int32 if off % 4 == 0 and bl.shape[-1] % 4 == 0 else torch.int16
    size = 4 if wide == torch.int32 else 2
    words = bl.view(wide)[..., off // size:(off + 16) // size]
    mask = 0x0F0F0F0F if wide == torch.int32 else 0x0F0F
    out = torch.empty(*words.shape[:-1], 2, words.shape[-1], dtype=wide, device=bl.device)
    torch.bitwise_and(words, mask, out=out[..., 0, :])
    torch.bitwise_and(words >> 4, mask, out=out[..., 1, :])  # arithmetic shift: the mask drops the sign bits
    return out.view(torch.uint8).view(*words.shape[:-1], 2, 16)


def _q4_0(bl: torch.Tensor) -> torch.Tensor:
    d = _f16(bl, 0).unsqueeze(-2)
    return _nibble_planes(bl, 2).float().sub_(8.0).mul_(d)


def _q4_1(bl: torch.Tensor) -> torch.Tensor:
    d, m = _f16(bl, 0).unsqueeze(-2), _f16(bl, 2).unsqueeze(-2)
    return _nibble_planes(bl, 4).float().mul_(d).add_(m)


def _q5_0(bl: torch.Tensor) -> torch.Tensor:
    d = _f16(bl, 0).unsqueeze(-2)
    qh = bl[..., 2:6].to(torch.int32)
    word = qh[..., 0] | (qh[..., 1] << 8) | (qh[..., 2] << 16) | (qh[..., 3] << 24)
    hi = ((word.unsqueeze(-1) >> torch.arange(32, device=bl.device, dtype=torch.int32)) & 1).to(torch.uint8)
    q = _nibble_planes(bl, 6) | (hi.view(*hi.shape[:-1], 2, 16) << 4)
    return q.float().sub_(16.0).mul_(d)


def _q8_0(bl: torch.Tensor) -> torch.Tensor:
    return bl[..., 2:34].view(torch.int8).float().mul_(_f16(bl, 0))


# ggml type -> (bytes per 32-weight block, decoder of blocks [..., bytes] -> float32 [..., 32 or 2x16])
_FAST = {"Q4_0": (18, _q4_0), "Q4_1": (20, _q4_1), "Q5_0": (22, _q5_0), "Q8_0": (34, _q8_0)}


@dataclass
class GGMLWeight:
    raw: torch.Tensor  # uint8 [N, K / block * bytes_per_block], the GGUF tensor's bytes
    ggml_type: str  # ggml name, e.g. "Q5_0"
    shape: tuple[int, int]  # logical (N, K)
    row_chunked_decode = True  # the reference linear may decode it a row block at a time (class attribute)

    def __post_init__(self) -> None:
        t = ggml.ggml_type(self.ggml_type)
        self.ggml_type = t.name
        n, k = self.shape = tuple(int(s) for s in self.shape)
        if k % t.block_size:
            raise ValueError(f"{t.name}: row length {k} is not a multiple of the block size {t.block_size}")
        want = (n, k // t.block_size * t.type_size)
        if self.raw.dtype != torch.uint8 or tuple(self.raw.shape) != want:
            raise ValueError(f"{t.name}: raw must be uint8 {want}, got {self.raw.dtype} {tuple(self.raw.shape)}")

    @property
    def format(self) -> str:
        return f"ggml_{self.ggml_type.lower()}"

    @property
    def device(self) -> torch.device:
        return self.raw.device

    @property
    def nbytes(self) -> int:
        return self.raw.numel()

    def to(self, device) -> "GGMLWeight":
        return GGMLWeight(self.raw.to(device), self.ggml_type, self.shape)

    def select_rows(self, rows) -> "GGMLWeight":
        """Rows `rows` (a slice or an index tensor) as a new weight."""
        raw = self.raw[rows] if isinstance(rows, slice) else self.raw.index_select(0, rows.to(self.raw.device))
        return GGMLWeight(raw, self.ggml_type, (raw.shape[0], self.shape[1]))

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[N, K] in `dtype` (float32 arithmetic of ggml / gguf-py)."""
        n, k = self.shape
        fast = _FAST.get(self.ggml_type)
        if fast is not None:
            w = fast[1](self.raw.view(n, k // 32, fast[0])).view(n, k)
        else:
            w = ggml.dequantize(self.raw.cpu(), (n, k), self.ggml_type).to(self.raw.device)
        return w if dtype == torch.float32 else w.to(dtype)


@dataclass
class ByteCodeWeight:
    """GGUF 32-weight blocks unpacked to one byte per weight, for the CPU reference: the same codes
    and block parameters as the GGUF tensor, laid out so a decode is two or three vectorized ops
    (`codes.float() * d (+ m)`) instead of nibble/bit unpacking. 1.125-1.25 bytes per weight
    (Q4/Q5: twice the GGUF size; dense float32 is 4). Bit-exact with the GGUF decode.

    codes int8 [N, K] (Q4_0: q-8, Q5_0: q-16, Q8_0: q) or uint8 [N, K] (Q4_1, Q5_1: q);
    d float32 [N, K/32]; m float32 [N, K/32] for Q4_1/Q5_1 (w = d*q + m), else None (w = d*q).
    """

    ggml_type: str
    codes: torch.Tensor
    d: torch.Tensor
    m: torch.Tensor | None
    shape: tuple[int, int]
    row_chunked_decode = True

    @property
    def format(self) -> str:
        return f"bytecode_{self.ggml_type.lower()}"

    @property
    def device(self) -> torch.device:
        return self.codes.device

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.codes, self.d, self.m) if t is not None)

    @classmethod
    def from_ggml(cls, w: GGMLWeight) -> "ByteCodeWeight":
        n, k = w.shape
        bl = w.raw.view(n, k // 32, -1)
        t = w.ggml_type
        d = _f16(bl, 0).reshape(n, k // 32)
        if t == "Q8_0":
            return cls(t, bl[..., 2:34].view(torch.int8).reshape(n, k).contiguous(), d, None, (n, k))
        if t in ("Q4_0", "Q4_1"):
            q = _nibble_planes(bl, 2 if t == "Q4_0" else 4)
        else:  # Q5_0 / Q5_1: the 5th bits
            off = 2 if t == "Q5_0" else 4
            qh = bl[..., off:off + 4].to(torch.int32)
            word = qh[..., 0] | (qh[..., 1] << 8) | (qh[..., 2] << 16) | (qh[..., 3] << 24)
            hi = ((word.unsqueeze(-1) >> torch.arange(32, dtype=torch.int32, device=bl.device)) & 1).to(torch.uint8)
            q = _nibble_planes(bl, off + 4) | (hi.view(n, k // 32, 2, 16) << 4)
        q = q.reshape(n, k)
        if t in ("Q4_1", "Q5_1"):
            return cls(t, q.contiguous(), d, _f16(bl, 2).reshape(n, k // 32), (n, k))
        return cls(t, (q.to(torch.int8) - (8 if t == "Q4_0" else 16)).contiguous(), d, None, (n, k))

    def to(self, device) -> "ByteCodeWeight":
        mv = lambda t: None if t is None else t.to(device)  # noqa: E731
        return ByteCodeWeight(self.ggml_type, self.codes.to(device), self.d.to(device), mv(self.m), self.shape)

    def select_rows(self, rows) -> "ByteCodeWeight":
        if isinstance(rows, slice):
            sel = lambda t: None if t is None else t[rows]  # noqa: E731
        else:
            sel = lambda t: None if t is None else t.index_select(0, rows.to(t.device))  # noqa: E731
        codes = sel(self.codes)
        return ByteCodeWeight(self.ggml_type, codes, sel(self.d), sel(self.m), (codes.shape[0], self.shape[1]))

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        n, k = self.shape
        w = self.codes.view(n, k // 32, 32).float().mul_(self.d.unsqueeze(-1))
        if self.m is not None:
            w.add_(self.m.unsqueeze(-1))
        w = w.view(n, k)
        return w if dtype == torch.float32 else w.to(dtype)


BYTECODE_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")


# -- HF quantized Linear tensors -------------------------------------------------------------------
# For each format: the dim of each checkpoint tensor that runs over output features N (row
# concatenation and row selection act on it), with the pack factor along that dim; None: the
# tensor has no N axis (per-tensor scales, g_idx) and must be equal across fused parts.
_N_AXIS: dict[str, dict[str, tuple[int, int] | None]] = {
    "awq": {"qweight": (1, 8), "qzeros": (1, 8), "scales": (1, 1)},
    "gptq": {"qweight": (1, 1), "qzeros": (1, 8), "scales": (1, 1), "g_idx": None},
    "compressed_tensors_pack_quantized": {"weight_packed": (0, 1), "weight_scale": (0, 1),
                                          "weight_zero_point": (0, 8), "weight_g_idx": None},
    "nvfp4": {"weight": (0, 1), "weight_scale": (0, 1), "weight_scale_2": None},
    "fp8_e4m3": {"weight": (0, 1), "weight_scale": (0, 1)},
    "mxfp4": {"blocks": (0, 1), "scales": (0, 1)},
}


@dataclass
class CodecWeight:
    """One quantized Linear: checkpoint tensors (key names of `fmt`) and the codec's parameters."""

    fmt: str  # a FORMATS name: awq | gptq | gptq_v2 | compressed_tensors_pack_quantized | nvfp4 | fp8_e4m3 | mxfp4
    tensors: dict[str, torch.Tensor]
    shape: tuple[int, int]  # (N, K)
    params: dict = field(default_factory=dict)  # codec keywords (group_size, bits, num_bits, ...)
    name: str | None = None  # the checkpoint module, for error messages

    @property
    def format(self) -> str:
        return f"codec_{self.fmt}"

    @property
    def device(self) -> torch.device:
        return next(iter(self.tensors.values())).device

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def to(self, device) -> "CodecWeight":
        return CodecWeight(self.fmt, {k: v.to(device) for k, v in self.tensors.items()}, self.shape,
                           dict(self.params), self.name)

    def _axes(self) -> dict[str, tuple[int, int] | None]:
        return _N_AXIS[self.fmt.replace("gptq_v2", "gptq")]

    def _n_axis(self, key: str, t: torch.Tensor):
        ax = self._axes().get(key)
        if ax is None or t.dim() <= ax[0] or (self.fmt == "fp8_e4m3" and t.dim() < 2):
            return None  # no output-feature axis (a per-tensor scale, g_idx, weight_shape)
        return ax

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[N, K] in `dtype`, the codec's float32 decode of the stored tensors (on CPU)."""
        cpu = {k: v.cpu() for k, v in self.tensors.items()}
        if self.fmt == "compressed_tensors_pack_quantized":
            cpu["weight_shape"] = torch.tensor(self.shape)
        w = get_format(self.fmt).dequantize_tensors(cpu, name=self.name, **self.params)
        return w.reshape(self.shape).to(device=self.device, dtype=dtype)

    def select_rows(self, rows) -> "CodecWeight | torch.Tensor":
        """Rows `rows` as a new weight; where rows share packed words (AWQ/GPTQ/CT zero points) the
        decoded rows instead (float32)."""
        idx = torch.arange(self.shape[0])[rows] if isinstance(rows, slice) else rows.cpu().long()
        out = {}
        for key, t in self.tensors.items():
            ax = self._n_axis(key, t)
            if ax is None:
                out[key] = t
            elif ax[1] != 1:
                w = self.dequantize()
                return w.index_select(0, idx.to(w.device))
            else:
                out[key] = t.index_select(ax[0], idx.to(t.device))
        return CodecWeight(self.fmt, out, (len(idx), self.shape[1]), dict(self.params), self.name)


def cat_rows(parts: list) -> object | None:
    """Fuse weights that share an input into one [sum N, K] weight by concatenating their stored rows.

    Dense tensors concatenate as tensors. Quantized parts fuse only when they have one format, one K
    and identical per-tensor parameters (ggml type; codec params; per-tensor scales, g_idx): then the
    fused weight decodes to exactly the concatenation of the parts' decodes. Otherwise None.
    """
    first = parts[0]
    if len(parts) == 1:
        return first
    if any(p.shape[1] != first.shape[1] for p in parts):
        return None
    if isinstance(first, torch.Tensor):
        ok = all(isinstance(p, torch.Tensor) and p.dtype == first.dtype for p in parts)
        return torch.cat(parts, dim=0) if ok else None
    if isinstance(first, GGMLWeight):
        if not all(isinstance(p, GGMLWeight) and p.ggml_type == first.ggml_type for p in parts):
            return None
        raw = torch.cat([p.raw for p in parts], dim=0)
        return GGMLWeight(raw, first.ggml_type, (raw.shape[0], first.shape[1]))
    if isinstance(first, CodecWeight):
        if not all(isinstance(p, CodecWeight) and p.fmt == first.fmt and p.params == first.params
                   and p.tensors.keys() == first.tensors.keys() for p in parts):
            return None
        out: dict[str, torch.Tensor] = {}
        for key, t in first.tensors.items():
            ax = first._n_axis(key, t)
            if ax is None:
                if not all(torch.equal(p.tensors[key], t) for p in parts):
                    return None  # e.g. NVFP4 weight_scale_2 / FP8 per-tensor scales that differ
                out[key] = t
            else:
                if any(p.shape[0] % ax[1] for p in parts):
                    return None
                out[key] = torch.cat([p.tensors[key] for p in parts], dim=ax[0])
        n = sum(p.shape[0] for p in parts)
        return CodecWeight(first.fmt, out, (n, first.shape[1]), dict(first.params), first.name)
    return None
