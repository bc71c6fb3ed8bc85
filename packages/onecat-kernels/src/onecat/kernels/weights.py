"""Quantized weights as kernels see them: raw GGUF blocks, unchanged from the file.

A `GGUFWeight` holds rows of ggml blocks (32 weights each) exactly as a GGUF file stores them, so
a model can hand a memory-mapped tensor straight to the GEMV. Q4_0 block: fp16 scale d, then 16
bytes whose low nibbles are weights 0..15 and high nibbles weights 16..31, w = d * (q - 8).
Q8_0 block: fp16 d, then 32 int8 q, w = d * q.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

BLOCK = 32
BYTES_PER_BLOCK = {"q4_0": 18, "q8_0": 34}


@dataclass
class GGUFWeight:
    raw: torch.Tensor  # uint8 [N, K / 32 * bytes_per_block]
    ggml_type: str  # "q4_0" | "q8_0"
    shape: tuple[int, int]  # logical (N, K)

    def __post_init__(self) -> None:
        self.ggml_type = self.ggml_type.lower()
        if self.ggml_type not in BYTES_PER_BLOCK:
            raise ValueError(f"unsupported GGUF type {self.ggml_type!r} (have {sorted(BYTES_PER_BLOCK)})")
        n, k = self.shape = tuple(int(s) for s in self.shape)
        if k % BLOCK:
            raise ValueError(f"K={k} is not a multiple of the {BLOCK}-weight GGUF block")
        want = (n, k // BLOCK * BYTES_PER_BLOCK[self.ggml_type])
        if self.raw.dtype != torch.uint8 or tuple(self.raw.shape) != want:
            raise ValueError(f"raw must be uint8 {want}, got {self.raw.dtype} {tuple(self.raw.shape)}")

    @property
    def format(self) -> str:
        return f"gguf_{self.ggml_type}"

    @property
    def device(self) -> torch.device:
        return self.raw.device

    @property
    def nbytes(self) -> int:
        return self.raw.numel()

    def to(self, device) -> "GGUFWeight":
        return GGUFWeight(self.raw.to(device), self.ggml_type, self.shape)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[N, K] weights in `dtype` (computed in float32)."""
        n, k = self.shape
        blocks = self.raw.view(n, k // BLOCK, BYTES_PER_BLOCK[self.ggml_type])
        d = blocks[..., :2].contiguous().view(torch.float16).float()  # [n, nb, 1]
        qs = blocks[..., 2:]
        if self.ggml_type == "q4_0":
            q = torch.cat([qs & 0xF, qs >> 4], dim=-1).float() - 8.0
        else:
            q = qs.contiguous().view(torch.int8).float()
        return (q * d).reshape(n, k).to(dtype)

    @classmethod
    def random(cls, n: int, k: int, ggml_type: str = "q4_0", generator: torch.Generator | None = None,
               device="cpu", scale: float = 0.02) -> "GGUFWeight":
        """Random valid blocks (finite scales around `scale`), for tests and benchmarks."""
        nb = k // BLOCK
        d = (torch.rand(n, nb, 1, generator=generator) * scale + scale / 4).half()
        d = torch.where(torch.rand(n, nb, 1, generator=generator) < 0.5, d, -d)
        qbytes = BYTES_PER_BLOCK[ggml_type] - 2
        qs = torch.randint(0, 256, (n, nb, qbytes), dtype=torch.uint8, generator=generator)
        raw = torch.cat([d.view(torch.uint8), qs], dim=-1).reshape(n, nb * (qbytes + 2))
        return cls(raw.to(device), ggml_type, (n, k))
