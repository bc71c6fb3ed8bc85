"""compressed-tensors ``pack-quantized`` integer weights (llm-compressor W4A16 / W8A16).

Checkpoint tensors of one Linear (``format: pack-quantized``, ``num_bits`` b in {4, 8})::

  weight_packed      int32 [N, ceil(K*b/32)]  packed along the input dim, sequential: value k of a row
                     in bits [b*(k % pf), ...) of word k // pf (pf = 32/b); rows padded with zeros
  weight_scale       float [N, G]             G = ceil(K / group_size) ("group"), or 1 ("channel")
  weight_zero_point  int32 [ceil(N*b/32), G]  asymmetric only: packed along the *output* dim (dim 0)
  weight_shape       int   [2]                the unpacked (N, K)
  weight_g_idx       int   [K]                optional (actorder "group"): group of each input column

Values are signed in [-2**(b-1), 2**(b-1)-1] and stored offset-binary: nibble = value + 2**(b-1)
(``pack_to_int32`` adds the offset, ``unpack_from_int32`` subtracts it). Zero points are stored the
same way. Dequantization: ``W[n, k] = (q[n, k] - zp[n, g(k)]) * scale[n, g(k)]``, ``g(k) = k // group_size``
or ``weight_g_idx[k]``.

Quantizer (compressed-tensors ``calculate_qparams`` + ``quantize``, RTN): per group
``min = min(x.min, 0)``, ``max = max(x.max, 0)``; symmetric: ``scale = max(|min|, |max|) / (range/2)``
with range = 2**b - 1 (7.5 for 4 bits), zp = 0; asymmetric: ``scale = (max - min) / range``,
``zp = round(clamp(qmin - min/scale, qmin, qmax))``. Zero scales become the storage dtype's eps.
``q = clamp(round(x / scale + zp), qmin, qmax)``, computed with the scale already rounded to its
storage dtype (bfloat16 by default, the usual checkpoint dtype).
"""

from __future__ import annotations

import math

import torch

from ._common import where
from .int4 import _weight_2d, check_int, check_shape, group_minmax, pack_int32, store_scale, unpack_int32

__all__ = ["ct_dequantize", "ct_quantize"]

FMT = "compressed-tensors pack-quantized"


def _bits(num_bits: int, name: str | None) -> int:
    if num_bits not in (4, 8):
        raise ValueError(f"{where(FMT, name)}: num_bits must be 4 or 8, got {num_bits}")
    return num_bits


def _pack_rows(values: torch.Tensor, bits: int) -> torch.Tensor:
    """Signed [R, C] -> int32 [R, ceil(C/pf)] with the offset and zero padding of pack_to_int32."""
    pf = 32 // bits
    r, c = values.shape
    padded = torch.zeros(r, math.ceil(c / pf) * pf, dtype=torch.int64)
    padded[:, :c] = values.to(torch.int64) + (1 << (bits - 1))
    return pack_int32(padded, bits)


def _unpack_rows(packed: torch.Tensor, bits: int, cols: int) -> torch.Tensor:
    return unpack_int32(packed, bits)[:, :cols] - (1 << (bits - 1))


def _groups(k: int, n_groups: int, group_size, g_idx, name: str | None) -> torch.Tensor:
    if g_idx is not None:
        gi = torch.as_tensor(g_idx).to(torch.int64)
        check_shape(gi, (k,), FMT, "weight_g_idx", name)
        if gi.numel() and (int(gi.min()) < 0 or int(gi.max()) >= n_groups):
            raise ValueError(f"{where(FMT, name)}: weight_g_idx values must lie in [0, {n_groups})")
        return gi
    if group_size in (None, -1):
        if n_groups == 1:
            group_size = k
        elif k % n_groups == 0:
            group_size = k // n_groups
        else:
            raise ValueError(f"{where(FMT, name)}: cannot infer group_size from in_features {k} and {n_groups} "
                             f"scale groups; pass group_size")
    group_size = int(group_size)
    if group_size <= 0 or math.ceil(k / group_size) != n_groups:
        raise ValueError(f"{where(FMT, name)}: {n_groups} scale groups do not match in_features {k} "
                         f"with group_size {group_size}")
    return torch.arange(k) // group_size


def ct_dequantize(weight_packed, weight_scale, weight_shape, weight_zero_point=None, weight_g_idx=None, *,
                  num_bits: int = 4, group_size: int | None = None, name: str | None = None) -> torch.Tensor:
    bits = _bits(num_bits, name)
    pf = 32 // bits
    weight_packed = check_int(weight_packed, FMT, "weight_packed", name)
    try:
        n, k = (int(v) for v in torch.as_tensor(weight_shape).reshape(-1).tolist())
    except ValueError:
        raise ValueError(f"{where(FMT, name)}: weight_shape must hold two ints (out, in), got {weight_shape!r}") from None
    check_shape(weight_packed, (n, math.ceil(k / pf)), FMT, "weight_packed", name)
    if weight_scale.dim() != 2 or weight_scale.shape[0] != n:
        raise ValueError(f"{where(FMT, name)}: weight_scale has shape {tuple(weight_scale.shape)}, expected ({n}, groups)")
    n_groups = weight_scale.shape[1]
    gi = _groups(k, n_groups, group_size, weight_g_idx, name)
    q = _unpack_rows(weight_packed, bits, k)                                    # [N, K]
    if weight_zero_point is not None:
        zp_packed = check_int(weight_zero_point, FMT, "weight_zero_point", name)
        check_shape(zp_packed, (math.ceil(n / pf), n_groups), FMT, "weight_zero_point", name)
        zp = _unpack_rows(zp_packed.t(), bits, n).t()                           # [N, G]
        q = q - zp[:, gi]
    return q.to(torch.float32) * weight_scale.to(torch.float32)[:, gi]


def ct_quantize(w, *, num_bits: int = 4, group_size: int | None = 128, symmetric: bool = True, g_idx=None,
                scales=None, zero_points=None, scale_dtype: torch.dtype = torch.bfloat16,
                name: str | None = None) -> dict[str, torch.Tensor]:
    """``w [N, K]`` -> ``{"weight_packed", "weight_scale", "weight_shape"}`` (+ ``"weight_zero_point"``
    when asymmetric, + ``"weight_g_idx"`` when ``g_idx`` is given). ``group_size=None`` = per channel.
    ``scales`` [N, G] / ``zero_points`` [N, G] (signed) may be given to encode onto an existing grid."""
    bits = _bits(num_bits, name)
    w = _weight_2d(w, FMT, name)
    n, k = w.shape
    qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if g_idx is not None:
        gi = torch.as_tensor(g_idx).to(torch.int64)
        check_shape(gi, (k,), FMT, "g_idx", name)
    else:
        gs = k if group_size in (None, -1) else int(group_size)
        if gs <= 0:
            raise ValueError(f"{where(FMT, name)}: group_size must be positive, got {group_size}")
        gi = torch.arange(k) // gs
    n_groups = int(gi.max()) + 1 if k else 0
    if scales is None:
        mn, mx = group_minmax(w, gi, n_groups)
        mn, mx = mn.clamp(max=0), mx.clamp(min=0)
        rng = float(qmax - qmin)
        if symmetric:
            s = torch.maximum(mn.abs(), mx) / (rng / 2)
        else:
            s = (mx - mn) / rng
        s = torch.where(s == 0, torch.finfo(scale_dtype).eps, s)
        s_st = store_scale(s, scale_dtype, FMT, name)
        s = s_st.to(torch.float32)
        zp = None if symmetric else torch.round(torch.clamp(qmin - mn / s, qmin, qmax))
    else:
        s_st = scales
        s = scales.to(torch.float32)
        check_shape(s, (n, n_groups), FMT, "scales", name)
        zp = None if zero_points is None else torch.as_tensor(zero_points).to(torch.float32)
        if zp is not None:
            check_shape(zp, (n, n_groups), FMT, "zero_points", name)
    scaled = w / s[:, gi]
    if zp is not None:
        scaled = scaled + zp[:, gi]
    q = torch.clamp(torch.round(scaled), qmin, qmax)
    out = {
        "weight_packed": _pack_rows(q, bits),
        "weight_scale": s_st,
        "weight_shape": torch.tensor([n, k], dtype=torch.int64),
    }
    if zp is not None:
        out["weight_zero_point"] = _pack_rows(zp.t(), bits).t().contiguous()
    if g_idx is not None:
        out["weight_g_idx"] = gi.to(torch.int32)
    return out
