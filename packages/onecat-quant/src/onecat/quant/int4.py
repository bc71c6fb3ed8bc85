"""Integer weight-only formats packed into int32: AWQ (AutoAWQ "GEMM") and GPTQ (AutoGPTQ/GPTQModel).
compressed-tensors ``pack-quantized`` lives in :mod:`onecat.quant.int4_ct` and shares the helpers here.

All dequantizers return float32 in ``nn.Linear`` layout ``[out_features N, in_features K]`` and
compute ``(q - zero) * scale`` (integer difference, then one float32 multiply). Quantizers are
round-to-nearest (RTN, ``torch.round`` = half to even) with the format's own scale/zero rule; they
return a dict keyed by the checkpoint tensor names. Scales are rounded to their storage dtype
(float16 by default) *before* the integer codes are computed, so ``dequantize(quantize(w))`` is
exactly the grid the codes were chosen on, and quantizing a dequantized tensor with the same
``scales``/``zeros`` gives back the same codes. (GPTQ/AWQ's calibration -- Hessian error feedback,
activation-aware scale search -- is an algorithm on top of this storage format, not part of it.)

Packing: ``pf = 32 // bits`` values per int32 word, value ``j`` of a word in bits
``[bits*slot(j), bits*slot(j) + bits)``; ``slot`` is the identity ("sequential") except for AWQ.

AWQ (AutoAWQ GEMM; ``bits = 4``, ``group_size`` G usually 128)::

  qweight int32 [K, N/8]   row k = input channel; word c holds output columns 8c..8c+7 in the
                           interleaved order AWQ_PACK_ORDER = (0, 2, 4, 6, 1, 3, 5, 7):
                           nibble i (bits 4i..4i+3) holds column 8c + AWQ_PACK_ORDER[i]
  qzeros  int32 [K/G, N/8] packed exactly like qweight (4-bit zero points, no offset)
  scales  fp16  [K/G, N]
  W[n, k] = (q[k, n] - z[k // G, n]) * s[k // G, n]
  quantizer (AutoAWQ pseudo_quantize_tensor, zero_point=True): per group
  s = max(max - min, 1e-5) / 15, z = clamp(-round(min / s), 0, 15), q = clamp(round(w / s) + z, 0, 15)

GPTQ (``bits`` 4 or 8; 4 is the common case)::

  qweight int32 [K/pf, N]  packed along K, sequential: bits [b*i, b*i+b) of qweight[r, n] = q[r*pf + i, n]
  qzeros  int32 [G, N/pf]  packed along N, sequential
  scales  fp16  [G, N]
  g_idx   int32 [K]        group of each input channel; absent/None = k // group_size. With act-order
                           (desc_act) the groups follow a permutation: g_idx[perm[i]] = i // group_size.
  W[n, k] = (q[k, n] - Z[g_idx[k], n]) * s[g_idx[k], n]

  Zero-point convention: ``checkpoint_format="gptq"`` (v1, every AutoGPTQ checkpoint and the
  default of GPTQModel exports) stores ``Z - 1``, and readers (AutoGPTQ's CUDA/exllama kernels,
  vLLM) use ``Z = stored + 1`` -- a historical off-by-one. So a symmetric 4-bit model (Z = 8) has
  nibbles 7 (qzeros words 0x77777777), and Z = 0 cannot be stored (its nibble 15 reads back as 16).
  ``"gptq_v2"`` (GPTQModel's internal format) stores Z as is.
  Quantizer: per group over the g_idx sets, ``xmin = min(min, 0)``, ``xmax = max(max, 0)`` (both 0 ->
  -1, +1). sym: ``s = 2*max(|xmin|, xmax) / maxq``, ``Z = (maxq+1)/2``; asym: ``s = (xmax - xmin) / maxq``,
  ``Z = round(-xmin / s)`` (for v1 clamped to >= 1, the smallest storable zero);
  ``q = clamp(round(w / s) + Z, 0, maxq)``. This is GPTQ's ``Quantizer.find_params`` for every group
  holding a negative weight (for an all-non-negative group GPTQ's sym rule leaves xmin = 0 and
  clips; this reference uses the symmetric range instead).
"""

from __future__ import annotations

import torch

from ._common import as_float32, where

__all__ = [
    "AWQ_PACK_ORDER", "pack_int32", "unpack_int32",
    "awq_dequantize", "awq_quantize", "gptq_dequantize", "gptq_quantize",
]

AWQ_PACK_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _slots(bits: int, order) -> torch.Tensor:
    pf = 32 // bits
    if order is None:
        return torch.arange(pf)
    slots = torch.empty(pf, dtype=torch.int64)
    slots[torch.tensor(order)] = torch.arange(pf)  # column order[i] sits in slot i
    return slots


def unpack_int32(packed: torch.Tensor, bits: int = 4, order=None) -> torch.Tensor:
    """int32 [..., C] -> int64 [..., C * 32/bits] unsigned values, along the last dim."""
    p = packed.to(torch.int64) & 0xFFFFFFFF
    v = (p.unsqueeze(-1) >> (bits * _slots(bits, order))) & ((1 << bits) - 1)
    return v.reshape(*packed.shape[:-1], -1)


def pack_int32(values: torch.Tensor, bits: int = 4, order=None) -> torch.Tensor:
    """int [..., C * 32/bits] values in [0, 2**bits) -> int32 [..., C] (inverse of :func:`unpack_int32`)."""
    pf = 32 // bits
    v = values.to(torch.int64) & ((1 << bits) - 1)
    v = v.reshape(*values.shape[:-1], values.shape[-1] // pf, pf)
    word = (v << (bits * _slots(bits, order))).sum(dim=-1)
    return torch.where(word >= 2**31, word - 2**32, word).to(torch.int32)


def check_int(t, fmt: str, what: str, name: str | None, dtype=torch.int32) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{where(fmt, name)}: {what} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise ValueError(f"{where(fmt, name)}: {what} must be {dtype}, got {t.dtype}")
    return t


def check_shape(t: torch.Tensor, want, fmt: str, what: str, name: str | None) -> None:
    if tuple(t.shape) != tuple(want):
        raise ValueError(f"{where(fmt, name)}: {what} has shape {tuple(t.shape)}, expected {tuple(want)}")


def store_scale(s: torch.Tensor, dtype: torch.dtype, fmt: str, name: str | None) -> torch.Tensor:
    """Round scales to their storage dtype; refuse ones that overflow it."""
    stored = s.to(dtype)
    if not bool(torch.isfinite(stored).all()):
        raise ValueError(f"{where(fmt, name)}: a group scale overflows {dtype}; the weights are too large for this format")
    return stored


def group_minmax(w: torch.Tensor, g_idx: torch.Tensor, n_groups: int):
    """Per-row min/max over the input channels of each group: [N, K] -> two [N, G]."""
    idx = g_idx.to(torch.int64).unsqueeze(0).expand_as(w)
    init = torch.zeros(w.shape[0], n_groups, dtype=w.dtype)
    mx = init.scatter_reduce(1, idx, w, reduce="amax", include_self=False)
    mn = init.scatter_reduce(1, idx, w, reduce="amin", include_self=False)
    return mn, mx


def _group_size(k: int, group_size, fmt: str, name: str | None) -> int:
    gs = k if group_size in (None, -1) else int(group_size)
    if gs <= 0 or k % gs:
        raise ValueError(f"{where(fmt, name)}: in_features {k} is not a multiple of group_size {gs}")
    return gs


def _weight_2d(w, fmt: str, name: str | None) -> torch.Tensor:
    w = as_float32(w, fmt, name)
    if w.dim() != 2:
        raise ValueError(f"{where(fmt, name)}: expected a 2-D [out_features, in_features] weight, got shape {tuple(w.shape)}")
    if not bool(torch.isfinite(w).all()):
        raise ValueError(f"{where(fmt, name)}: cannot quantize a weight containing inf/NaN")
    return w


# ---- AWQ -----------------------------------------------------------------------------------------

def awq_dequantize(qweight, qzeros, scales, *, group_size: int | None = 128, name: str | None = None) -> torch.Tensor:
    fmt = "awq"
    qweight = check_int(qweight, fmt, "qweight", name)
    qzeros = check_int(qzeros, fmt, "qzeros", name)
    if qweight.dim() != 2:
        raise ValueError(f"{where(fmt, name)}: qweight must be 2-D [in_features, out_features/8], got {tuple(qweight.shape)}")
    k, n = qweight.shape[0], qweight.shape[1] * 8
    gs = _group_size(k, group_size, fmt, name)
    check_shape(qzeros, (k // gs, n // 8), fmt, "qzeros", name)
    check_shape(scales, (k // gs, n), fmt, "scales", name)
    q = unpack_int32(qweight, 4, AWQ_PACK_ORDER)                          # [K, N]
    z = unpack_int32(qzeros, 4, AWQ_PACK_ORDER).repeat_interleave(gs, 0)  # [K, N]
    s = scales.to(torch.float32).repeat_interleave(gs, 0)
    return ((q - z).to(torch.float32) * s).t().contiguous()


def awq_quantize(w, *, group_size: int | None = 128, scales=None, zeros=None,
                 scale_dtype: torch.dtype = torch.float16, name: str | None = None) -> dict[str, torch.Tensor]:
    """``w [N, K]`` -> ``{"qweight", "qzeros", "scales"}``; give ``scales`` [K/G, N] and ``zeros``
    (int, [K/G, N]) to encode onto an existing grid."""
    fmt = "awq"
    w = _weight_2d(w, fmt, name)
    n, k = w.shape
    if n % 8:
        raise ValueError(f"{where(fmt, name)}: out_features {n} is not a multiple of 8 (AWQ packs 8 columns per int32)")
    gs = _group_size(k, group_size, fmt, name)
    wg = w.t().reshape(k // gs, gs, n)                                    # [G, gs, N]
    if scales is None:
        mx, mn = wg.amax(dim=1), wg.amin(dim=1)
        s16 = store_scale((mx - mn).clamp(min=1e-5) / 15, scale_dtype, fmt, name)
        s = s16.to(torch.float32)
        z = (-torch.round(mn / s)).clamp(0, 15)
    else:
        s16 = scales
        s = scales.to(torch.float32)
        z = torch.as_tensor(zeros).to(torch.float32)
        check_shape(s, (k // gs, n), fmt, "scales", name)
        check_shape(z, (k // gs, n), fmt, "zeros", name)
    q = torch.clamp(torch.round(wg / s.unsqueeze(1)) + z.unsqueeze(1), 0, 15).reshape(k, n)
    return {
        "qweight": pack_int32(q, 4, AWQ_PACK_ORDER),
        "qzeros": pack_int32(z, 4, AWQ_PACK_ORDER),
        "scales": s16,
    }


# ---- GPTQ ----------------------------------------------------------------------------------------

_GPTQ_OFFSET = {"gptq": 1, "gptq_v1": 1, "v1": 1, "gptq_v2": 0, "v2": 0}


def _zero_offset(checkpoint_format: str, name: str | None) -> int:
    if checkpoint_format not in _GPTQ_OFFSET:
        raise ValueError(f"{where('gptq', name)}: unknown checkpoint_format {checkpoint_format!r}; expected 'gptq' (v1) or 'gptq_v2'")
    return _GPTQ_OFFSET[checkpoint_format]


def _check_bits(bits: int, fmt: str, name: str | None) -> int:
    if bits not in (4, 8):
        raise ValueError(f"{where(fmt, name)}: bits must be 4 or 8, got {bits}")
    return bits


def gptq_dequantize(qweight, qzeros, scales, g_idx=None, *, bits: int = 4, group_size: int | None = None,
                    checkpoint_format: str = "gptq", name: str | None = None) -> torch.Tensor:
    fmt = "gptq"
    _check_bits(bits, fmt, name)
    off = _zero_offset(checkpoint_format, name)
    pf = 32 // bits
    qweight = check_int(qweight, fmt, "qweight", name)
    qzeros = check_int(qzeros, fmt, "qzeros", name)
    if qweight.dim() != 2 or scales.dim() != 2:
        raise ValueError(f"{where(fmt, name)}: qweight and scales must be 2-D, got {tuple(qweight.shape)}, {tuple(scales.shape)}")
    k, n = qweight.shape[0] * pf, qweight.shape[1]
    n_groups = scales.shape[0]
    check_shape(scales, (n_groups, n), fmt, "scales", name)
    check_shape(qzeros, (n_groups, n // pf), fmt, "qzeros", name)
    if g_idx is None:
        gs = k // n_groups if group_size in (None, -1) and n_groups and k % n_groups == 0 else group_size
        gs = _group_size(k, gs, fmt, name)
        if k // gs != n_groups:
            raise ValueError(f"{where(fmt, name)}: {n_groups} scale groups do not match in_features {k} / group_size {gs}")
        gi = torch.arange(k) // gs
    else:
        gi = torch.as_tensor(g_idx).to(torch.int64)
        check_shape(gi, (k,), fmt, "g_idx", name)
        if gi.numel() and (int(gi.min()) < 0 or int(gi.max()) >= n_groups):
            raise ValueError(f"{where(fmt, name)}: g_idx values must lie in [0, {n_groups}), got [{int(gi.min())}, {int(gi.max())}]")
    q = unpack_int32(qweight.t(), bits)                                   # [N, K]
    z = unpack_int32(qzeros, bits) + off                                  # [G, N]
    s = scales.to(torch.float32)
    return (q - z.t()[:, gi]).to(torch.float32) * s.t()[:, gi]


def gptq_quantize(w, *, bits: int = 4, group_size: int | None = 128, sym: bool = True, g_idx=None, perm=None,
                  checkpoint_format: str = "gptq", scales=None, zeros=None,
                  scale_dtype: torch.dtype = torch.float16, name: str | None = None) -> dict[str, torch.Tensor]:
    """``w [N, K]`` -> ``{"qweight", "qzeros", "scales", "g_idx"}`` (RTN, see module docstring).

    Groups: ``g_idx`` [K] if given; else from an act-order permutation ``perm`` (``g_idx[perm[i]] =
    i // group_size``); else contiguous. ``scales`` [G, N] / ``zeros`` [G, N] (true zero points) may be
    given to encode onto an existing grid.
    """
    fmt = "gptq"
    _check_bits(bits, fmt, name)
    off = _zero_offset(checkpoint_format, name)
    w = _weight_2d(w, fmt, name)
    n, k = w.shape
    pf, maxq = 32 // bits, (1 << bits) - 1
    if k % pf or n % pf:
        raise ValueError(f"{where(fmt, name)}: in_features {k} and out_features {n} must be multiples of {pf}")
    gs = _group_size(k, group_size, fmt, name)
    if g_idx is not None:
        gi = torch.as_tensor(g_idx).to(torch.int64)
        check_shape(gi, (k,), fmt, "g_idx", name)
    elif perm is not None:
        perm = torch.as_tensor(perm).to(torch.int64)
        if not torch.equal(torch.sort(perm).values, torch.arange(k)):
            raise ValueError(f"{where(fmt, name)}: perm must be a permutation of range({k})")
        gi = torch.empty(k, dtype=torch.int64)
        gi[perm] = torch.arange(k) // gs
    else:
        gi = torch.arange(k) // gs
    n_groups = int(gi.max()) + 1 if k else 0
    if scales is None:
        mn, mx = group_minmax(w, gi, n_groups)                                 # [N, G]
        xmin, xmax = mn.clamp(max=0), mx.clamp(min=0)
        if sym:
            amax = torch.maximum(xmin.abs(), xmax)
            xmin, xmax = -amax, amax
        both0 = (xmin == 0) & (xmax == 0)
        xmin, xmax = torch.where(both0, -1.0, xmin), torch.where(both0, 1.0, xmax)
        s_st = store_scale(((xmax - xmin) / maxq).t(), scale_dtype, fmt, name)  # [G, N]
        s = s_st.to(torch.float32)
        if sym:
            z = torch.full_like(s, (maxq + 1) // 2)
        else:
            z = torch.round(-xmin.t() / s).clamp(off, maxq)
    else:
        s_st = scales
        s = scales.to(torch.float32)
        z = torch.as_tensor(zeros).to(torch.float32)
        check_shape(s, (n_groups, n), fmt, "scales", name)
        check_shape(z, (n_groups, n), fmt, "zeros", name)
        if bool((z < off).any()) or bool((z > maxq).any()):
            raise ValueError(f"{where(fmt, name)}: zero points must lie in [{off}, {maxq}] for {checkpoint_format}")
    q = torch.clamp(torch.round(w / s.t()[:, gi]) + z.t()[:, gi], 0, maxq)     # [N, K]
    return {
        "qweight": pack_int32(q, bits).t().contiguous(),                     # [K/pf, N]
        "qzeros": pack_int32(z - off, bits),                                 # [G, N/pf]
        "scales": s_st,
        "g_idx": gi.to(torch.int32),
    }
