"""GGUF "K-quant" super-block types (QK_K = 256 weights per block), dequantization in vectorized torch.

Layouts (byte offsets inside one block; all fp16 little-endian; element index e = 0..255)::

  Q2_K   84 B: scales[16] @0 | qs[64] @16 | d:f16 @80 | dmin:f16 @82
         16 sub-blocks of 16. scales[s]: low nibble = scale, high nibble = min.
         q(e) = (qs[32*(e//128) + e%32] >> 2*((e%128)//32)) & 3
         x(e) = (d * sc[s]) * q - (dmin * mn[s]),  s = e // 16
  Q3_K  110 B: hmask[32] @0 | qs[64] @32 | scales[12] @96 | d:f16 @108
         16 sub-blocks of 16 with 6-bit signed scales (value - 32): scale s has its low 4 bits in
         nibble (s//8) of scales[s%8] and its high 2 bits at bits 2*(s//4) of scales[8 + s%4].
         low2(e) as Q2_K's q; hbit(e) = (hmask[e%32] >> (e//32)) & 1
         x(e) = (d * sc[s]) * (low2 - 4*(1 - hbit))          (the 4 is subtracted when hbit is 0)
  Q4_K  144 B: d:f16 @0 | dmin:f16 @2 | scales[12] @4 | qs[128] @16
         8 sub-blocks of 32 with 6-bit unsigned scale sc[j] and min mn[j] packed in 12 bytes:
         j < 4: sc = b[j] & 63,                        mn = b[j+4] & 63
         j >= 4: sc = (b[j+4] & 15) | ((b[j-4] >> 6) << 4), mn = (b[j+4] >> 4) | ((b[j] >> 6) << 4)
         q(e) = (qs[32*(e//64) + e%32] >> 4*((e%64)//32)) & 15
         x(e) = (d * sc[j]) * q - (dmin * mn[j]),  j = e // 32
  Q5_K  176 B: d:f16 @0 | dmin:f16 @2 | scales[12] @4 | qh[32] @16 | qs[128] @48
         as Q4_K plus a 5th bit: q(e) |= ((qh[e%32] >> (e//32)) & 1) << 4
  Q6_K  210 B: ql[128] @0 | qh[64] @128 | scales[16] int8 @192 | d:f16 @208
         lo4(e) = (ql[64*(e//128) + e%64] >> 4*((e%128)//64)) & 15
         hi2(e) = (qh[32*(e//128) + e%32] >> 2*((e%128)//32)) & 3
         x(e) = (d * scales[e//16]) * ((lo4 | hi2 << 4) - 32)

The float operations (products formed in this order, in float32) are the ones of ggml's
``dequantize_row_*`` and gguf-py, so results are bit-identical. gguf-py ships no quantizer for these
types (ggml's are iterative searches), so only dequantization is provided here.
"""

from __future__ import annotations

import torch

from ._common import f16_at

__all__ = ["DEQUANTIZERS", "QK_K"]

QK_K = 256


def _i64(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.int64)


def _u8(*v: int) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.uint8)


def _crumbs(qs: torch.Tensor) -> torch.Tensor:
    """[n, 64] bytes -> [n, 256] 2-bit values; e -> byte 32*(e//128) + e%32, shift 2*((e%128)//32)."""
    n = qs.shape[0]
    v = qs.reshape(n, 2, 1, 32) >> _u8(0, 2, 4, 6).reshape(1, 1, 4, 1)
    return (v & 3).reshape(n, 256)


def _nibbles64(qs: torch.Tensor) -> torch.Tensor:
    """[n, 128] bytes -> [n, 256] 4-bit values; e -> byte 32*(e//64) + e%32, shift 4*((e%64)//32)."""
    n = qs.shape[0]
    v = qs.reshape(n, 4, 1, 32) >> _u8(0, 4).reshape(1, 1, 2, 1)
    return (v & 15).reshape(n, 256)


def _bitplanes(h: torch.Tensor) -> torch.Tensor:
    """[n, 32] bytes -> [n, 256] bits; e -> bit e//32 of byte e%32."""
    n = h.shape[0]
    v = h.reshape(n, 1, 32) >> torch.arange(8, dtype=torch.uint8).reshape(1, 8, 1)
    return (v & 1).reshape(n, 256)


def scale_min_k4(scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_K/Q5_K 12-byte packed 6-bit (scale, min) pairs -> two int64 [n, 8]."""
    b = _i64(scales)
    d, m, md = b[:, 0:4], b[:, 4:8], b[:, 8:12]
    sc = torch.cat([d & 63, (md & 15) | ((d >> 2) & 48)], dim=-1)
    mn = torch.cat([m & 63, (md >> 4) | ((m >> 2) & 48)], dim=-1)
    return sc, mn


def dequant_q2_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    sc = _i64(blocks[:, 0:16])
    d = f16_at(blocks, 80)
    dmin = f16_at(blocks, 82)
    dl = (d * (sc & 15).to(torch.float32)).reshape(n, 16, 1)
    ml = (dmin * (sc >> 4).to(torch.float32)).reshape(n, 16, 1)
    q = _crumbs(blocks[:, 16:80]).to(torch.float32).reshape(n, 16, 16)
    return (dl * q - ml).reshape(n, 256)


def _q3_k_scales(s: torch.Tensor) -> torch.Tensor:
    """12 packed bytes -> 16 signed 6-bit scales (int64 [n, 16])."""
    n = s.shape[0]
    b = _i64(s)
    low = (b[:, 0:8].reshape(n, 1, 8) >> torch.tensor([0, 4]).reshape(1, 2, 1)).reshape(n, 16) & 15
    high = (b[:, 8:12].reshape(n, 1, 4) >> torch.tensor([0, 2, 4, 6]).reshape(1, 4, 1)).reshape(n, 16) & 3
    return (low | (high << 4)) - 32


def dequant_q3_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d = f16_at(blocks, 108)
    dl = (d * _q3_k_scales(blocks[:, 96:108]).to(torch.float32)).reshape(n, 16, 1)
    low = _crumbs(blocks[:, 32:96])
    hbit = _bitplanes(blocks[:, 0:32])
    q = low.to(torch.float32) - ((hbit ^ 1) << 2).to(torch.float32)   # small integers: exact
    return (dl * q.reshape(n, 16, 16)).reshape(n, 256)


def _k4_scales(blocks: torch.Tensor):
    n = blocks.shape[0]
    d = f16_at(blocks, 0)
    dmin = f16_at(blocks, 2)
    sc, mn = scale_min_k4(blocks[:, 4:16])
    dl = (d * sc.to(torch.float32)).reshape(n, 8, 1)
    ml = (dmin * mn.to(torch.float32)).reshape(n, 8, 1)
    return dl, ml


def dequant_q4_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    dl, ml = _k4_scales(blocks)
    q = _nibbles64(blocks[:, 16:144]).reshape(n, 8, 32).to(torch.float32)
    return (dl * q - ml).reshape(n, 256)


def dequant_q5_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    dl, ml = _k4_scales(blocks)
    q = _nibbles64(blocks[:, 48:176]) | (_bitplanes(blocks[:, 16:48]) << 4)
    return (dl * q.reshape(n, 8, 32).to(torch.float32) - ml).reshape(n, 256)


def dequant_q6_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d = f16_at(blocks, 208)
    scales = blocks[:, 192:208].view(torch.int8).to(torch.float32)
    dl = (d * scales).reshape(n, 16, 1)
    ql = blocks[:, 0:128].reshape(n, 2, 1, 64) >> _u8(0, 4).reshape(1, 1, 2, 1)
    qh = blocks[:, 128:192].reshape(n, 2, 1, 32) >> _u8(0, 2, 4, 6).reshape(1, 1, 4, 1)
    q = (ql & 15).reshape(n, 256) | ((qh & 3).reshape(n, 256) << 4)
    return (dl * (q.to(torch.float32) - 32).reshape(n, 16, 16)).reshape(n, 256)


DEQUANTIZERS = {
    "Q2_K": dequant_q2_k,
    "Q3_K": dequant_q3_k,
    "Q4_K": dequant_q4_k,
    "Q5_K": dequant_q5_k,
    "Q6_K": dequant_q6_k,
}
