"""Torch references: the semantics of every op, and the route on CPU.

Plain torch, accumulating in float32 and returning the input dtype. GPU providers are tested
against exactly these functions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .attention_metadata import AttentionMetadata
from .weights import RowParts


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None):
    """y = x / sqrt(mean(x^2) + eps) * weight. With `residual`, first x = x + residual and return
    (y, x) so the caller carries the new residual stream (kept in the residual's dtype)."""
    if residual is not None:
        x = (x.float() + residual.float()).to(residual.dtype)
        new_residual = x
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = (y * weight.float()).to(x.dtype)
    return (y, new_residual) if residual is not None else y


def rope_cos_sin(head_dim: int, rotary_dim: int, max_positions: int, base: float,
                 device=None) -> torch.Tensor:
    """cos/sin cache [max_positions, rotary_dim] (first half cos, second half sin), float32."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64, device=device) / rotary_dim))
    t = torch.arange(max_positions, dtype=torch.float64, device=device)
    freqs = torch.outer(t, inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1).float()


def rotary_embedding(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, head_dim: int,
                     cos_sin_cache: torch.Tensor, is_neox: bool = True):
    """Rotate the first `rotary_dim` dims of each head of q [T, Hq*D] and k [T, Hk*D].

    NeoX style rotates (x[:r/2], x[r/2:]) pairs, GPT-J style interleaved (x[0::2], x[1::2]).
    """
    rotary_dim = cos_sin_cache.shape[-1]
    cs = cos_sin_cache.index_select(0, positions.long())
    cos, sin = cs[:, : rotary_dim // 2], cs[:, rotary_dim // 2:]

    def rotate(x: torch.Tensor) -> torch.Tensor:
        T = x.shape[0]
        xh = x.view(T, -1, head_dim)
        rot, rest = xh[..., :rotary_dim].float(), xh[..., rotary_dim:]
        c, s = cos[:, None, :], sin[:, None, :]
        if is_neox:
            x1, x2 = rot[..., : rotary_dim // 2], rot[..., rotary_dim // 2:]
            out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
        else:
            x1, x2 = rot[..., 0::2], rot[..., 1::2]
            out = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
        return torch.cat([out.to(x.dtype), rest], dim=-1).view(T, -1)

    return rotate(q), rotate(k)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """x = [gate | up] along the last dim -> silu(gate) * up."""
    d = x.shape[-1] // 2
    return (F.silu(x[..., :d].float()) * x[..., d:].float()).to(x.dtype)


def gelu_and_mul(x: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """x = [gate | up] -> gelu(gate) * up (tanh approximation by default, as Gemma uses)."""
    d = x.shape[-1] // 2
    return (F.gelu(x[..., :d].float(), approximate=approximate) * x[..., d:].float()).to(x.dtype)


def rms_norm_linear(x: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight,
                    residual: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                    act: str | None = None):
    """A normed projection: h = rms_norm(x (+ residual)), y = linear(h, weight, bias), then
    silu_and_mul(y) when act == "silu_and_mul". Returns (y, new residual stream): x + residual, or x
    itself without a residual. The decode layer's qkv (input norm) and gate_up (post-attention norm)."""
    if residual is None:
        h, new_residual = rms_norm(x, norm_weight, eps), x
    else:
        h, new_residual = rms_norm(x, norm_weight, eps, residual)
    y = linear(h, weight, bias)
    if act is not None:
        if act != "silu_and_mul":
            raise ValueError(f"rms_norm_linear: activation {act!r} is not 'silu_and_mul' or None")
        y = silu_and_mul(y)
    return y, new_residual


def rms_norm_qkv_rotary_cache(x: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight,
                              residual: torch.Tensor | None, bias: torch.Tensor | None, positions: torch.Tensor,
                              head_dim: int, cos_sin_cache: torch.Tensor, is_neox: bool, key_cache: torch.Tensor,
                              value_cache: torch.Tensor, slot_mapping: torch.Tensor, num_heads: int,
                              num_kv_heads: int):
    """An attention layer's input as one op: rms_norm_linear onto [q | k | v] (num_heads and
    num_kv_heads heads of head_dim), then rotary_and_cache. Returns (rotated q [T, Hq*D], new
    residual stream)."""
    y, new_residual = rms_norm_linear(x, norm_weight, eps, weight, residual, bias)
    q, k, v = y.split([num_heads * head_dim, num_kv_heads * head_dim, num_kv_heads * head_dim], dim=-1)
    q = rotary_and_cache(positions, q, k, v, head_dim, cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping)
    return q, new_residual


def linear_rms_norm_linear(x: torch.Tensor, weight_in, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                           weight, bias: torch.Tensor | None = None, act: str | None = None, feeds=None):
    """A projection into the residual stream, then the normed projection behind it: y = linear(x, weight_in),
    then rms_norm_linear(y, norm_weight, eps, weight, residual, bias, act). Returns (its output, new residual
    stream y + residual). The decode layer's o_proj with the post-attention norm and gate_up behind. feeds (the
    weight the output goes to next, down) is a layout hint: a GPU route may return the output as
    x_stages.XStages, the same values, which every op taking x accepts."""
    return rms_norm_linear(linear(x, weight_in), norm_weight, eps, weight, residual, bias, act)


def linear_rms_norm_qkv_rotary_cache(x: torch.Tensor, weight_in, residual: torch.Tensor, norm_weight: torch.Tensor,
                                     eps: float, weight, bias: torch.Tensor | None, positions: torch.Tensor,
                                     head_dim: int, cos_sin_cache: torch.Tensor, is_neox: bool,
                                     key_cache: torch.Tensor, value_cache: torch.Tensor, slot_mapping: torch.Tensor,
                                     num_heads: int, num_kv_heads: int):
    """A projection into the residual stream, then the next attention layer's input: y = linear(x, weight_in),
    then rms_norm_qkv_rotary_cache(y, norm_weight, eps, weight, residual, ...). Returns (rotated q, new residual
    stream). The decode layer's down with the next layer's input norm, qkv, rotary and cache write behind."""
    return rms_norm_qkv_rotary_cache(linear(x, weight_in), norm_weight, eps, weight, residual, bias, positions,
                                     head_dim, cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads,
                                     num_kv_heads)


# A quantized weight that offers `select_rows` and sets `row_chunked_decode` is decoded for a few
# rows of x (decode) in blocks of about this many weights, each used while it is still in cache.
_ROW_CHUNK_WEIGHTS = 1 << 18


def linear(x: torch.Tensor, weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """y = x @ weight.T (+ bias) for a dense weight [N, K] or a quantized one with `.dequantize()`
    (e.g. `GGUFWeight`: dequantized to float32, then to x.dtype). A `weights.RowParts` goes part by part, each
    part's rows with its share of the bias, concatenated along N: the same torch calls as the `row_parts` provider
    makes on the CPU, so the two agree bit for bit. One product over the decoded concatenation need not: a BLAS
    sums a sub-matrix's rows in another order than the whole's once it threads (MKL with >= 4 threads; s43 saw the
    16-core GPU machine's CPU differ where the 2-core CI's did not)."""
    if isinstance(weight, RowParts):
        return weight.linear_by_parts(linear, x, bias)
    if not isinstance(weight, torch.Tensor) and hasattr(weight, "dequantize"):
        n, k = weight.shape
        if getattr(weight, "row_chunked_decode", False) and n * k > _ROW_CHUNK_WEIGHTS and x.numel() <= 16 * k:
            return _linear_row_chunks(x, weight, bias)
        weight = weight.dequantize(torch.float32)
    return F.linear(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))


def _linear_row_chunks(x: torch.Tensor, weight, bias: torch.Tensor | None) -> torch.Tensor:
    n, k = weight.shape
    out = torch.empty(*x.shape[:-1], n, dtype=x.dtype, device=x.device)
    step = max(1, _ROW_CHUNK_WEIGHTS // k)
    for r in range(0, n, step):
        e = min(n, r + step)
        w = weight.select_rows(slice(r, e)).dequantize(torch.float32).to(x.dtype)
        out[..., r:e] = F.linear(x, w, None if bias is None else bias[r:e].to(x.dtype))
    return out


def embedding(weight, ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Rows `ids` (int64 [T]) of an embedding table [N, K], in `dtype`: a dense tensor's rows, or a
    quantized table's rows (its `select_rows(ids)`: onecat.quant's weights and this package's
    PackedWeight / GGUFWeight) decoded with the format's own float32 arithmetic, rounded once."""
    if isinstance(weight, torch.Tensor):
        return weight.index_select(0, ids).to(dtype)
    if not hasattr(weight, "select_rows"):
        raise TypeError(f"cannot select rows of a {type(weight).__name__}")
    rows = weight.select_rows(ids)
    return rows.to(dtype) if isinstance(rows, torch.Tensor) else rows.dequantize(dtype)


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """Greedy sampling: index (int64) of the largest logit along the last dim; first on ties."""
    return torch.argmax(logits, dim=-1)


# -- FP8 KV caches --------------------------------------------------------------------------------
# An FP8 cache is a tensor of dtype torch.float8_e4m3fn or torch.float8_e5m2 (one byte per element;
# kernels see the bytes), so the format travels with the tensor. One float scale per tensor
# (k_scale, v_scale): stored = fp8(x / scale), read = float(stored) * scale. Quantization divides in
# float32, rounds to nearest even and saturates to the largest finite value (448, 57344); no NaN or
# inf is ever written for finite inputs.
FP8_DTYPES = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}


def is_fp8(t: torch.Tensor) -> bool:
    return t.dtype in FP8_DTYPES


def fp8_quantize(x: torch.Tensor, scale: float, dtype: torch.dtype) -> torch.Tensor:
    """x / scale in float32 -> FP8 `dtype`, round to nearest even, saturating."""
    m = FP8_DTYPES[dtype]
    return (x.float() / scale).clamp(-m, m).to(dtype)


def rotary_and_cache(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, head_dim: int,
                     cos_sin_cache: torch.Tensor, is_neox: bool, key_cache: torch.Tensor, value_cache: torch.Tensor,
                     slot_mapping: torch.Tensor, k_scale: float = 1.0, v_scale: float = 1.0) -> torch.Tensor:
    """An attention layer's step before attention, as one op: rotate q [T, Hq*D] and k [T, Hk*D]
    (rotary_embedding), write the rotated k and v [T, Hk*D] into the paged caches at slot_mapping
    (reshape_and_cache; slots < 0 skipped, FP8 caches quantized). Returns the rotated q."""
    q_rot, k_rot = rotary_embedding(positions, q, k, head_dim, cos_sin_cache, is_neox)
    t = q.shape[0]
    reshape_and_cache(k_rot.reshape(t, -1, head_dim), v.reshape(t, -1, head_dim), key_cache, value_cache,
                      slot_mapping, k_scale, v_scale)
    return q_rot


def kv_dequantize(t: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """float32 values of a cache slice (FP8: float(stored) * scale; others: float, unscaled)."""
    return t.float() * scale if is_fp8(t) else t.float()


def reshape_and_cache(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                      value_cache: torch.Tensor, slot_mapping: torch.Tensor, k_scale: float = 1.0,
                      v_scale: float = 1.0) -> None:
    """Write key/value [T, Hk, D] into caches [num_blocks, block_size, Hk, D] at flat slots.

    Slots < 0 are padding and are skipped. FP8 caches store fp8(x / scale) (see FP8_DTYPES);
    the scales are ignored for other cache dtypes."""
    nb, bs = key_cache.shape[:2]
    valid = slot_mapping >= 0
    slots = slot_mapping[valid].long()
    for src, cache, sc in ((key, key_cache, k_scale), (value, value_cache, v_scale)):
        flat = cache.view(nb * bs, *cache.shape[2:])
        if is_fp8(cache):  # index_put on bytes: not every torch build has FP8 indexing kernels
            flat.view(torch.uint8)[slots] = fp8_quantize(src[valid], sc, cache.dtype).view(torch.uint8)
        else:
            flat[slots] = src[valid].to(cache.dtype)


def _gather_kv(cache: torch.Tensor, blocks: torch.Tensor, ctx: int, scale: float) -> torch.Tensor:
    nblk, (bs, hk, d) = len(blocks), cache.shape[1:]
    if is_fp8(cache):
        rows = cache.view(torch.uint8)[blocks].view(cache.dtype)
    else:
        rows = cache[blocks]
    return kv_dequantize(rows.reshape(nblk * bs, hk, d)[:ctx], scale)


def paged_attention(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                    metadata: AttentionMetadata, scale: float, sliding_window: int | None = None,
                    logit_soft_cap: float | None = None, k_scale: float = 1.0,
                    v_scale: float = 1.0) -> torch.Tensor:
    """Causal attention of each request's new queries over its whole paged context.

    query [T, Hq, D] holds the requests' new tokens back to back (query_start_loc); request i
    has seq_lens[i] tokens in the cache (its new ones included), and its j-th new query sits at
    position seq_lens[i] - q_len + j. Keys at or before that position are visible, and with a
    sliding window only the last `sliding_window` of them. Softmax in float32. FP8 caches are
    read as float(stored) * k_scale / v_scale (see FP8_DTYPES).
    """
    T, Hq, D = query.shape
    bs, Hk = key_cache.shape[1], key_cache.shape[2]
    group = Hq // Hk
    out = torch.empty_like(query)
    qsl, seq_lens = metadata.query_start_loc_cpu, metadata.seq_lens_cpu
    for i in range(len(seq_lens)):
        qs, qe, ctx = qsl[i], qsl[i + 1], seq_lens[i]
        if qe == qs:
            continue
        nblk = (ctx + bs - 1) // bs
        blocks = metadata.block_tables[i, :nblk].long()
        k = _gather_kv(key_cache, blocks, ctx, k_scale)
        v = _gather_kv(value_cache, blocks, ctx, v_scale)
        q = query[qs:qe].float()  # [q, Hq, D]
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        s = torch.einsum("qhd,khd->hqk", q, k) * scale
        if logit_soft_cap:
            s = logit_soft_cap * torch.tanh(s / logit_soft_cap)
        qpos = torch.arange(ctx - (qe - qs), ctx, device=query.device)[:, None]
        kpos = torch.arange(ctx, device=query.device)[None, :]
        mask = kpos <= qpos
        if sliding_window:
            mask &= kpos > qpos - sliding_window
        s = s.masked_fill(~mask, -math.inf)
        p = torch.softmax(s, dim=-1)
        out[qs:qe] = torch.einsum("hqk,khd->qhd", p, v).to(query.dtype)
    return out
