"""GGUF "I-quant" types (non-linear / lattice codebooks), dequantization in vectorized torch.

Codebooks: read at import time from gguf-py's own tables (``CODEBOOKS``), not copied here:

* ``IQ4_NL.kvalues`` (``gguf.quants.IQ4_NL.kvalues``): the 16 int8 levels of IQ4_NL/IQ4_XS;
* ``IQ3_XXS.grid`` / ``IQ3_S.grid`` (``gguf.quants.IQ3_XXS/IQ3_S.init_grid()`` decodes their
  ``grid_hex``): 256 resp. 512 rows of 4 unsigned magnitudes (ggml's ``iq3xxs_grid``/``iq3s_grid``);
* ``ksigns`` (``gguf.quants.IQ2_XXS.ksigns``): 128 bytes, 7 sign bits + a parity bit (ggml's
  ``ksigns_iq2xs``), used by IQ3_XXS.

Layouts (byte offsets in one block; fp16 little-endian)::

  IQ4_NL  18 B, 32 weights: d:f16 @0 | qs[16] @2
          x[j] = d * kvalues[nibble j]   (qs[j] low nibble -> element j, high nibble -> j+16)
  IQ4_XS 136 B, 256 weights: d:f16 @0 | scales_h:u16 @2 | scales_l[4] @4 | qs[128] @8
          8 sub-blocks of 32; ls[ib] = ((scales_l[ib//2] >> 4*(ib%2)) & 15
                                        | ((scales_h >> 2*ib) & 3) << 4) - 32
          sub-block ib uses qs[16*ib : 16*ib+16] like IQ4_NL; x = (d * ls[ib]) * kvalues[q]
  IQ3_XXS 98 B, 256 weights: d:f16 @0 | qs[64] @2 (grid indices) | aux[8]:u32 @66
          8 sub-blocks of 32 = 4 groups of 8 = 8 grid rows of 4.
          db[ib] = d * (0.5 + (aux[ib] >> 28)) * 0.5
          group l (0..3) of sub-block ib: signs = ksigns[(aux[ib] >> 7*l) & 127], bit k -> element k
          x = db * grid[qs[8*ib + 2*l + r]][k'] * (bit ? -1 : +1)
  IQ3_S  110 B, 256 weights: d:f16 @0 | qs[64] @2 | qh[8] @66 | signs[32] @74 | scales[4] @106
          grid index i(k) = qs[k] | ((qh[k//8] >> (k%8)) & 1) << 8   (9 bits, 512-row grid)
          db[ib] = d * (1 + 2*((scales[ib//2] >> 4*(ib%2)) & 15))
          sign of element e: bit (e%8) of signs[e//8] (1 = negative)
          x = db * grid[i] * sign

Float operations are done in float32 in the same order as ggml/gguf-py, so results are bit-exact.
No quantizer: ggml's I-quant quantizers are importance-weighted searches, not a closed-form rule, and
gguf-py has none to match.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ._common import f16_at, u16_at, u32_at

__all__ = ["DEQUANTIZERS", "CODEBOOKS", "codebooks"]


@functools.lru_cache(maxsize=1)
def codebooks() -> dict[str, torch.Tensor]:
    """The I-quant tables, read from gguf-py (see module docstring)."""
    try:
        from gguf import quants as gq
    except ImportError as e:  # pragma: no cover - gguf is a declared dependency
        raise ImportError("onecat.quant I-quant codecs take their codebooks from gguf-py; install `gguf`") from e
    tables = {}
    for name in ("IQ3_XXS", "IQ3_S"):
        cls = getattr(gq, name)
        cls.init_grid()
        tables[name] = torch.from_numpy(np.array(cls.grid, dtype=np.float32).reshape(cls.grid_shape))
    tables["kvalues"] = torch.tensor(gq.IQ4_NL.kvalues, dtype=torch.int64)
    tables["ksigns"] = torch.from_numpy(np.frombuffer(gq.IQ2_XXS.ksigns, dtype=np.uint8).astype(np.int64))
    return tables


CODEBOOKS = codebooks()


def _sign_from_bits(bits: torch.Tensor) -> torch.Tensor:
    return torch.where(bits == 0, 1.0, -1.0).to(torch.float32)


def dequant_iq4_nl(blocks: torch.Tensor) -> torch.Tensor:
    kv = CODEBOOKS["kvalues"]
    d = f16_at(blocks, 0)
    qs = blocks[:, 2:18].to(torch.int64)
    q = torch.cat([qs & 15, qs >> 4], dim=-1)
    return d * kv[q].to(torch.float32)


def dequant_iq4_xs(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    kv = CODEBOOKS["kvalues"]
    d = f16_at(blocks, 0)
    sh = u16_at(blocks, 2)                                   # [n, 1]
    sl = blocks[:, 4:8].to(torch.int64)
    ib = torch.arange(8)
    low = (sl[:, ib // 2] >> (4 * (ib % 2))) & 15
    high = (sh >> (2 * ib)) & 3
    ls = (low | (high << 4)) - 32
    dl = (d * ls.to(torch.float32)).reshape(n, 8, 1)
    qs = blocks[:, 8:136].to(torch.int64).reshape(n, 8, 1, 16) >> torch.tensor([0, 4]).reshape(1, 1, 2, 1)
    q = (qs & 15).reshape(n, 8, 32)
    return (dl * kv[q].to(torch.float32)).reshape(n, 256)


def dequant_iq3_xxs(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    tb = CODEBOOKS
    d = f16_at(blocks, 0)
    aux = u32_at(blocks, 66, 8)                              # [n, 8]
    db = (d * (0.5 + (aux >> 28).to(torch.float32)) * 0.5).reshape(n, 8, 1, 1)
    sidx = (aux.unsqueeze(-1) >> torch.tensor([0, 7, 14, 21])) & 127          # [n, 8, 4]
    sbits = (tb["ksigns"][sidx].unsqueeze(-1) >> torch.arange(8)) & 1        # [n, 8, 4, 8]
    grid = tb["IQ3_XXS"][blocks[:, 2:66].to(torch.int64)].reshape(n, 8, 4, 8)
    return (db * grid * _sign_from_bits(sbits)).reshape(n, 256)


def dequant_iq3_s(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    tb = CODEBOOKS
    d = f16_at(blocks, 0)
    sc = blocks[:, 106:110].to(torch.int64)
    ib = torch.arange(8)
    ls = (sc[:, ib // 2] >> (4 * (ib % 2))) & 15
    db = (d * (1 + 2 * ls).to(torch.float32)).reshape(n, 8, 1, 1)
    qh = (blocks[:, 66:74].to(torch.int64).unsqueeze(-1) >> torch.arange(8)) & 1   # [n, 8, 8]
    idx = blocks[:, 2:66].to(torch.int64) | (qh.reshape(n, 64) << 8)
    grid = tb["IQ3_S"][idx].reshape(n, 8, 4, 8)
    sbits = (blocks[:, 74:106].to(torch.int64).unsqueeze(-1) >> torch.arange(8)) & 1   # [n, 32, 8]
    return (db * grid * _sign_from_bits(sbits.reshape(n, 8, 4, 8))).reshape(n, 256)


DEQUANTIZERS = {
    "IQ4_NL": dequant_iq4_nl,
    "IQ4_XS": dequant_iq4_xs,
    "IQ3_XXS": dequant_iq3_xxs,
    "IQ3_S": dequant_iq3_s,
}
