"""x in the wgmma tiles' shared-memory stage layout (csrc/gemm_wg.cu), written so by the kernel in front and copied
whole, one bulk copy a step, by the tile behind (its XB entries; gemm_ops):

* o's _norm epilogue writes x~ so for gate_up (`_glu_xb`; s51, H100: gate_up M 64 48.8 -> 44.7 us);
* gate_up's `_glu_xb_xs` writes its GLU output so for down (`_norm_xb` / `_xb` on the w64 tile; s53).

`XStages` carries such an x between ops. It answers the few tensor facts the ops layer reads to pick a provider
(shape, dtype, device, numel, contiguity, alignment), and `tensor()` gives x back row-major, which ops hands to any
provider that does not take stages (registry.Provider.takes_x_stages), so a route never depends on where the stages
end up."""

from __future__ import annotations

from typing import NamedTuple

import torch

from .cuda_ops import _empty

WG_X_SLICE = 2048 + 16  # bytes of a k16 slice of 64 rows in a stage, padded as the producers store it (csrc SLP)


def wg_x_stages(x: torch.Tensor) -> torch.Tensor:
    """x [M, K] fp16 -> uint8 [ceil(M / 64), K / 128, 8 x WG_X_SLICE]: each 64-row tile's 128-K steps in the wgmma
    tiles' shared-memory stage layout (csrc/gemm_wg.cu: slice 2j + h // 2, core matrix h % 2, 8-row group, row, then
    the 4-byte pairs x[32 i + 8 j + 2 h + {0, 1}] for i = 0..3), rows past M zero. A bulk copy moves a step as is."""
    m, k = x.shape
    mt, steps = -(-m // 64), k // 128
    xp = torch.zeros((mt * 64, k), dtype=torch.float16, device=x.device)
    xp[:m] = x
    # n = 64 tile + 8 rg + g; k = 128 step + 32 i + 8 j + 2 (2 hs + hc) + e
    v = xp.view(mt, 8, 8, steps, 4, 4, 2, 2, 2)  # tile, rg, g, step, i, j, hs, hc, e
    v = v.permute(0, 3, 5, 6, 1, 7, 2, 4, 8).reshape(mt, steps, 8, 1024)  # tile, step, (j, hs), (rg, hc, g, i, e)
    out = torch.zeros((mt, steps, 8, WG_X_SLICE // 2), dtype=torch.float16, device=x.device)
    out[..., :1024] = v
    return out.view(torch.uint8).reshape(mt, steps, 8 * WG_X_SLICE)


def x_from_stages(stages: torch.Tensor, m: int, k: int) -> torch.Tensor:
    """wg_x_stages' inverse: the stages of x [m, k] -> x, FP16 row-major (the slices' padding and rows past m left
    out)."""
    mt, steps = -(-m // 64), k // 128
    v = stages.view(mt, steps, 8, WG_X_SLICE).view(torch.float16)[..., :1024]  # tile, step, (j, hs), 1024
    v = v.reshape(mt, steps, 4, 2, 8, 2, 8, 4, 2)  # tile, step, j, hs, rg, hc, g, i, e
    return v.permute(0, 4, 6, 1, 7, 2, 3, 5, 8).reshape(mt * 64, k)[:m].contiguous()


class XStages(NamedTuple):
    """x [m, k] (FP16) as the wgmma tile's x stages (wg_x_stages' layout: uint8 [ceil(m / 64), k / 128, 8 WG_X_SLICE]),
    the x a _norm entry writes with NormIn(stages=True), a GLU entry with gemm_launch(out_stages=True), and an XB entry
    copies whole. Rows past m are never read into an output row that is stored, so they need no zeros."""
    stages: torch.Tensor
    m: int
    k: int

    @staticmethod
    def layout(m: int, k: int) -> tuple[int, int, int]:
        """The stages' shape for x [m, k]."""
        return -(-m // 64), k // 128, 8 * WG_X_SLICE

    @staticmethod
    def empty(m: int, k: int, device: torch.device) -> "XStages":
        return XStages(_empty(XStages.layout(m, k), torch.uint8, device), m, k)

    @staticmethod
    def of(x: torch.Tensor) -> "XStages":
        return XStages(wg_x_stages(x), x.shape[0], x.shape[1])

    def tensor(self) -> torch.Tensor:
        """x row-major [m, k] FP16 (a copy)."""
        return x_from_stages(self.stages, self.m, self.k)

    # the tensor facts ops reads of an x to pick a provider (ops._params_linear, _dispatch)
    @property
    def shape(self) -> tuple[int, int]:
        return self.m, self.k

    @property
    def dtype(self) -> torch.dtype:
        return torch.float16

    @property
    def device(self) -> torch.device:
        return self.stages.device

    def numel(self) -> int:
        return self.m * self.k

    def dim(self) -> int:
        return 2

    def is_contiguous(self) -> bool:
        return True

    def data_ptr(self) -> int:
        return self.stages.data_ptr()
