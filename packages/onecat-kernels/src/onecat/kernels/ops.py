"""The ops model code calls. Each is declared once (reference = semantics) and dispatched per
problem through the registry; model code never names a kernel.

Hot path: building a Problem (the `_params_*` function of the op) and a dict lookup per call; the
selection itself is cached. Providers register in `cuda_ops` (imported at the end).
"""

from __future__ import annotations

import functools

import torch

from . import inputs
from . import reference as ref
from . import sampling_ops
from .attention_metadata import DECODE_MAX_QUERY, AttentionMetadata
from .registry import OpSpec, Problem, registry
from .x_stages import XStages

# ||out - ref|| / ||ref|| bounds per output; argmax must match exactly.
_ELEMENTWISE = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5}
_TOLERANCES = {
    "rms_norm": _ELEMENTWISE,
    "rotary_embedding": _ELEMENTWISE,
    "rotary_and_cache": _ELEMENTWISE,
    "silu_and_mul": _ELEMENTWISE,
    "gelu_and_mul": _ELEMENTWISE,
    "linear": {"float16": 5e-3, "bfloat16": 2e-2, "float32": 1e-4},
    "rms_norm_linear": {"float16": 5e-3, "bfloat16": 2e-2, "float32": 1e-4},
    "rms_norm_qkv_rotary_cache": {"float16": 5e-3, "bfloat16": 2e-2, "float32": 1e-4},
    "linear_rms_norm_linear": {"float16": 5e-3, "bfloat16": 2e-2, "float32": 1e-4},
    "linear_rms_norm_qkv_rotary_cache": {"float16": 5e-3, "bfloat16": 2e-2, "float32": 1e-4},
    "reshape_and_cache": {"float16": 0.0, "bfloat16": 0.0, "float32": 0.0},
    "paged_attention": {"float16": 5e-3, "bfloat16": 2e-2, "float32": 1e-4},
    "argmax": {"float16": 0.0, "bfloat16": 0.0, "float32": 0.0},
    "embedding": {"float16": 0.0, "bfloat16": 0.0, "float32": 0.0},  # the format's own decode, rounded once
}
_OUTPUTS = {"reshape_and_cache": lambda case, result: [case.args[2], case.args[3]],
            "rotary_and_cache": lambda case, result: [result, case.args[7], case.args[8]],
            "rms_norm_qkv_rotary_cache": lambda case, result: [*result, case.args[10], case.args[11]],
            "linear_rms_norm_qkv_rotary_cache": lambda case, result: [*result, case.args[11], case.args[12]]}

for _name, _fn in [
    ("rms_norm", ref.rms_norm),
    ("rotary_embedding", ref.rotary_embedding),
    ("rotary_and_cache", ref.rotary_and_cache),
    ("silu_and_mul", ref.silu_and_mul),
    ("gelu_and_mul", ref.gelu_and_mul),
    ("linear", ref.linear),
    ("rms_norm_linear", ref.rms_norm_linear),
    ("rms_norm_qkv_rotary_cache", ref.rms_norm_qkv_rotary_cache),
    ("linear_rms_norm_linear", ref.linear_rms_norm_linear),
    ("linear_rms_norm_qkv_rotary_cache", ref.linear_rms_norm_qkv_rotary_cache),
    ("reshape_and_cache", ref.reshape_and_cache),
    ("paged_attention", ref.paged_attention),
    ("argmax", ref.argmax),
    ("embedding", ref.embedding),
]:
    registry.declare(OpSpec(_name, _fn, doc=(_fn.__doc__ or "").strip(), make_inputs=getattr(inputs, _name),
                            tolerances=_TOLERANCES[_name], outputs=_OUTPUTS.get(_name)))
# sample: the reference and its input generator live in sampling_ops; token ids must match exactly.
registry.declare(OpSpec("sample", sampling_ops.sample_reference,
                        doc=(sampling_ops.sample_reference.__doc__ or "").strip(), make_inputs=sampling_ops.sample_inputs,
                        tolerances={"float16": 0.0, "bfloat16": 0.0, "float32": 0.0}))


@functools.lru_cache(maxsize=None)
def _capability(device: torch.device) -> tuple[int, int] | None:
    if device.type != "cuda":
        return None
    return torch.cuda.get_device_capability(device)


def _dt(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def problem_for(op: str, x: torch.Tensor, **params) -> Problem:
    dev = x.device
    return Problem(op=op, device=dev.type, capability=_capability(dev),
                   dtype=_dt(x), params=tuple(sorted(params.items())),
                   graph_capture=dev.type == "cuda" and torch.cuda.is_current_stream_capturing())


# -- per-op problem facts (what providers need to admit or refuse a call) ------------------------
def _params_rms_norm(x, weight, eps, residual=None):
    return x, dict(hidden=x.shape[-1], residual=residual is not None, weight_dtype=_dt(weight),
                   residual_dtype=_dt(residual) if residual is not None else None,
                   contiguous=x.is_contiguous() and weight.is_contiguous()
                   and (residual is None or residual.is_contiguous()))


def _params_rotary_embedding(positions, q, k, head_dim, cos_sin_cache, is_neox=True):
    return q, dict(head_dim=head_dim, rotary_dim=cos_sin_cache.shape[-1], neox=is_neox,
                   cache_dtype=_dt(cos_sin_cache), pos_dtype=_dt(positions), k_dtype=_dt(k),
                   layout_ok=q.dim() == 2 and k.dim() == 2 and q.stride(-1) == 1 and k.stride(-1) == 1
                   and q.stride(0) % 2 == 0 and k.stride(0) % 2 == 0 and q.data_ptr() % 4 == 0
                   and k.data_ptr() % 4 == 0 and cos_sin_cache.is_contiguous() and positions.is_contiguous())


def _params_silu_and_mul(x):
    return x, dict(d=x.shape[-1] // 2, contiguous=x.is_contiguous())


def _params_gelu_and_mul(x, approximate="tanh"):
    return x, dict(d=x.shape[-1] // 2, approximate=approximate, contiguous=x.is_contiguous())


def linear_rows(m: int) -> int | str:
    """linear's `rows` fact: M itself up to 16 (the GEMV kernels' range), then the buckets the packed
    GEMM providers split at: "17-64" (decode batches: the register-direct tiles) and "65+"."""
    return m if m <= 16 else "17-64" if m <= 64 else "65+"


def _format_facts(weight, fmt: str) -> dict:
    """The facts only some formats have: AWQ's scale group; a RowParts' (format, rows) per part."""
    if fmt == "packed_awq":
        return {"group": weight.group_size}
    if fmt == "row_parts":
        return {"parts": tuple(zip(weight.part_formats, weight.part_rows))}
    return {}


def _params_linear(x, weight, bias=None):
    fmt = getattr(weight, "format", "dense")
    dense = fmt == "dense"
    raw = weight if dense else getattr(weight, "raw", None)  # GGUFWeight: the block bytes (RowParts: none)
    m = x.numel() // max(1, x.shape[-1])
    return x, dict(format=fmt, n=weight.shape[0], k=weight.shape[-1], rows=linear_rows(m),
                   bias=_dt(bias) if bias is not None else None, weight_dtype=_dt(weight) if dense else fmt,
                   contiguous=x.is_contiguous() and (raw is None or raw.is_contiguous())
                   and (bias is None or bias.is_contiguous()),
                   aligned16=x.data_ptr() % 16 == 0 and (raw is None or raw.data_ptr() % (16 if dense else 2) == 0),
                   weight_aligned32=weight.data_ptr() % 32 == 0 if dense else None, **_format_facts(weight, fmt))


def _params_rms_norm_linear(x, norm_weight, eps, weight, residual=None, bias=None, act=None):
    """linear's facts plus the norm's: the residual's and norm weight's dtypes, the activation, and
    whether x, the residual and the norm weight are contiguous, 16-byte aligned, K wide."""
    _, facts = _params_linear(x, weight, bias)
    k = x.shape[-1]
    return x, dict(facts, residual_dtype=_dt(residual) if residual is not None else None, norm_dtype=_dt(norm_weight),
                   act=act, norm_layout_ok=x.is_contiguous() and norm_weight.is_contiguous()
                   and norm_weight.numel() == k and norm_weight.data_ptr() % 16 == 0
                   and (residual is None or (residual.is_contiguous() and residual.shape == x.shape
                                             and residual.data_ptr() % 16 == 0)))


def _params_rms_norm_qkv_rotary_cache(x, norm_weight, eps, weight, residual, bias, positions, head_dim,
                                      cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads,
                                      num_kv_heads):
    """rms_norm_linear's facts plus the rotary's and the cache write's."""
    _, facts = _params_rms_norm_linear(x, norm_weight, eps, weight, residual, bias)
    facts.pop("act")  # no activation here
    kv = num_kv_heads * head_dim
    return x, dict(facts, head_dim=head_dim, rotary_dim=cos_sin_cache.shape[-1], neox=bool(is_neox),
                   cache_dtype=_dt(cos_sin_cache), pos_dtype=_dt(positions), kv_dtype=_dt(key_cache),
                   slot_dtype=_dt(slot_mapping), heads=(num_heads, num_kv_heads),
                   cache_layout_ok=key_cache.is_contiguous() and value_cache.is_contiguous()
                   and value_cache.dtype == key_cache.dtype and key_cache.shape[2] * key_cache.shape[3] == kv
                   and weight.shape[0] == (num_heads + 2 * num_kv_heads) * head_dim
                   and cos_sin_cache.is_contiguous() and positions.is_contiguous() and slot_mapping.is_contiguous())


def _with_in_linear(x, weight_in, facts: dict) -> tuple:
    """A composite op's facts: those of its normed projection, plus linear's facts of the projection in front
    under linear_norm_ops.IN_PREFIX (its x is the op's x)."""
    _, fin = _params_linear(x, weight_in)
    return x, dict(facts, **{f"in_{k}": v for k, v in fin.items()})


def _params_linear_rms_norm_linear(x, weight_in, residual, norm_weight, eps, weight, bias=None, act=None, feeds=None):
    """linear's facts of (x, weight_in) under in_, and rms_norm_linear's of its output (the residual's shape)."""
    return _with_in_linear(x, weight_in, _params_rms_norm_linear(residual, norm_weight, eps, weight, residual, bias,
                                                                 act)[1])


def _params_linear_rms_norm_qkv_rotary_cache(x, weight_in, residual, norm_weight, eps, weight, bias, positions,
                                             head_dim, cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping,
                                             num_heads, num_kv_heads):
    return _with_in_linear(x, weight_in, _params_rms_norm_qkv_rotary_cache(
        residual, norm_weight, eps, weight, residual, bias, positions, head_dim, cos_sin_cache, is_neox, key_cache,
        value_cache, slot_mapping, num_heads, num_kv_heads)[1])


def _params_reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, k_scale=1.0, v_scale=1.0):
    inner = all(t.dim() == 3 and t.stride(2) == 1 and t.stride(1) == t.shape[2] for t in (key, value))
    return key, dict(kv_dtype=_dt(key_cache), head_dim=key.shape[-1], value_dtype=_dt(value),
                     slot_dtype=_dt(slot_mapping), layout_ok=inner and key_cache.is_contiguous()
                     and value_cache.is_contiguous() and slot_mapping.is_contiguous())


def _params_rotary_and_cache(positions, q, k, v, head_dim, cos_sin_cache, is_neox, key_cache, value_cache,
                             slot_mapping, k_scale=1.0, v_scale=1.0):
    """rotary_embedding's facts (its layout_ok covers q and k) plus v's and the caches'."""
    _, facts = _params_rotary_embedding(positions, q, k, head_dim, cos_sin_cache, is_neox)
    v_ok = v.dim() == 2 and v.stride(-1) == 1 and v.stride(0) % 2 == 0 and v.data_ptr() % 4 == 0
    return q, dict(facts, neox=bool(is_neox), kv_dtype=_dt(key_cache), v_dtype=_dt(v), slot_dtype=_dt(slot_mapping),
                   cache_layout_ok=v_ok and key_cache.is_contiguous() and value_cache.is_contiguous()
                   and value_cache.dtype == key_cache.dtype and slot_mapping.is_contiguous()
                   and key_cache.shape[2] * key_cache.shape[3] == k.shape[1] == v.shape[1])


def _params_paged_attention(query, key_cache, value_cache, metadata, scale, sliding_window=None,
                            logit_soft_cap=None, k_scale=1.0, v_scale=1.0):
    mq = metadata.max_query_len
    return query, dict(head_dim=query.shape[-1], kv_dtype=_dt(key_cache),
                       gqa=query.shape[1] // key_cache.shape[2], sliding_window=bool(sliding_window),
                       soft_cap=bool(logit_soft_cap), block_size=key_cache.shape[1],
                       phase="decode" if mq <= 1 else "verify" if mq <= DECODE_MAX_QUERY else "prefill",
                       layout_ok=query.dim() == 3 and query.stride(2) == 1 and query.stride(1) == query.shape[2]
                       and key_cache.is_contiguous() and value_cache.is_contiguous()
                       and value_cache.dtype == key_cache.dtype)


def _params_argmax(logits):
    return logits, dict(vocab=logits.shape[-1], row_contiguous=logits.stride(-1) == 1
                        and (logits.dim() <= 2 or logits.is_contiguous()))


def _params_embedding(weight, ids, dtype):
    fmt = getattr(weight, "format", "dense")
    planes = [weight] if fmt == "dense" else getattr(weight, "planes", None) or []
    return ids, dict(format=fmt, k=weight.shape[-1], out_dtype=str(dtype).removeprefix("torch."),
                     table_dtype=_dt(weight) if fmt == "dense" else fmt, ids_contiguous=ids.dim() == 1
                     and ids.is_contiguous(), planes_ok=bool(planes) and all(
                         p.is_contiguous() and p.data_ptr() % 16 == 0 for p in planes))


def _params_sample(logits, temperature, top_k, top_p, min_p, seed, offset):
    return sampling_ops.problem_facts(logits, temperature, top_k, top_p, min_p, seed, offset)


_PARAMS = {name: globals()[f"_params_{name}"] for name in registry.ops}


def problem(op: str, *args, **kwargs) -> Problem:
    """The Problem a call `ops.<op>(*args, **kwargs)` presents to the registry."""
    x, params = _PARAMS[op](*args, **kwargs)
    return problem_for(op, x, **params)


def _dispatch(op: str, *args):
    x, params = _PARAMS[op](*args)
    dev = x.device
    capturing = dev.type == "cuda" and torch.cuda.is_current_stream_capturing()
    sel = registry.select_keyed((op, dev, x.dtype, capturing, *params.items()),
                                lambda: problem_for(op, x, **params))
    if isinstance(args[0], XStages) and not sel.provider.takes_x_stages:  # x in a wgmma tile's layout: row-major
        args = (args[0].tensor(), *args[1:])
    return sel.provider.fn(*args)


# -- the ops (signatures are the contract with model code) ---------------------------------------
def rms_norm(x, weight, eps, residual=None):
    return _dispatch("rms_norm", x, weight, eps, residual)


def rotary_embedding(positions, q, k, head_dim, cos_sin_cache, is_neox=True):
    return _dispatch("rotary_embedding", positions, q, k, head_dim, cos_sin_cache, is_neox)


def silu_and_mul(x):
    return _dispatch("silu_and_mul", x)


def gelu_and_mul(x, approximate="tanh"):
    return _dispatch("gelu_and_mul", x, approximate)


def linear(x, weight, bias=None):
    return _dispatch("linear", x, weight, bias)


def rms_norm_linear(x, norm_weight, eps, weight, residual=None, bias=None, act=None):
    """rms_norm (after adding the residual) then a projection (then silu_and_mul when act says so):
    (y, new residual stream)."""
    return _dispatch("rms_norm_linear", x, norm_weight, eps, weight, residual, bias, act)


def rms_norm_qkv_rotary_cache(x, norm_weight, eps, weight, residual, bias, positions, head_dim, cos_sin_cache,
                              is_neox, key_cache, value_cache, slot_mapping, num_heads, num_kv_heads):
    """rms_norm_linear onto [q | k | v], then rotary_and_cache: (rotated q, new residual stream)."""
    return _dispatch("rms_norm_qkv_rotary_cache", x, norm_weight, eps, weight, residual, bias, positions, head_dim,
                     cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads, num_kv_heads)


def linear_rms_norm_linear(x, weight_in, residual, norm_weight, eps, weight, bias=None, act=None, feeds=None):
    """linear(x, weight_in) into the residual stream, then rms_norm_linear: (y, new residual stream). feeds: the weight
    y goes to next (a layout hint: y may come back as x_stages.XStages, which linear and
    linear_rms_norm_qkv_rotary_cache take as x)."""
    return _dispatch("linear_rms_norm_linear", x, weight_in, residual, norm_weight, eps, weight, bias, act, feeds)


def linear_rms_norm_qkv_rotary_cache(x, weight_in, residual, norm_weight, eps, weight, bias, positions, head_dim,
                                     cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads,
                                     num_kv_heads):
    """linear(x, weight_in) into the residual stream, then rms_norm_qkv_rotary_cache: (rotated q, new residual
    stream)."""
    return _dispatch("linear_rms_norm_qkv_rotary_cache", x, weight_in, residual, norm_weight, eps, weight, bias,
                     positions, head_dim, cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping, num_heads,
                     num_kv_heads)


def rotary_and_cache(positions, q, k, v, head_dim, cos_sin_cache, is_neox, key_cache, value_cache, slot_mapping,
                     k_scale=1.0, v_scale=1.0):
    """Rotate q and k, write rotated k and v into the paged caches; returns the rotated q."""
    fp8 = (k_scale, v_scale) if ref.is_fp8(key_cache) else ()
    return _dispatch("rotary_and_cache", positions, q, k, v, head_dim, cos_sin_cache, is_neox, key_cache,
                     value_cache, slot_mapping, *fp8)


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, k_scale=1.0, v_scale=1.0):
    """FP8 caches (dtype torch.float8_e4m3fn / float8_e5m2) store fp8(x / scale); see reference.py."""
    fp8 = (k_scale, v_scale) if ref.is_fp8(key_cache) else ()  # scales reach providers for FP8 caches only
    return _dispatch("reshape_and_cache", key, value, key_cache, value_cache, slot_mapping, *fp8)


def paged_attention(query, key_cache, value_cache, metadata: AttentionMetadata, scale,
                    sliding_window=None, logit_soft_cap=None, k_scale=1.0, v_scale=1.0):
    """A mixed step (decode rows ahead of prompt chunks) runs as two problems: the decode rows on
    the decode route (keys split across blocks), the prompts on the prefill route; one launch for
    both would give each decode row a prefill tile, or a per-request loop where the prefill route
    has one (torch SDPA)."""
    fp8 = (k_scale, v_scale) if ref.is_fp8(key_cache) else ()  # scales reach providers for FP8 caches only
    n = metadata.num_leading_decodes if metadata.max_query_len > DECODE_MAX_QUERY else 0
    if not 0 < n < metadata.num_requests:
        return _dispatch("paged_attention", query, key_cache, value_cache, metadata, scale,
                         sliding_window, logit_soft_cap, *fp8)
    head, tail = metadata.split(n)
    r = head.query_start_loc_cpu[-1]
    out = torch.empty_like(query)
    for part, rows in ((head, slice(0, r)), (tail, slice(r, None))):
        out[rows] = _dispatch("paged_attention", query[rows], key_cache, value_cache, part, scale,
                              sliding_window, logit_soft_cap, *fp8)
    return out


def argmax(logits):
    return _dispatch("argmax", logits)


def embedding(weight, ids, dtype):
    """Rows `ids` (int64 [T]) of an embedding table (dense or quantized) as `dtype` [T, K]."""
    return _dispatch("embedding", weight, ids, dtype)


def sample(logits, temperature, top_k, top_p, min_p, seed, offset):
    """One token id per row (int64 [B]): min-p, top-k, top-p, then a seeded Gumbel-max draw; see
    sampling_ops.sample_reference for the exact semantics and argument dtypes."""
    return _dispatch("sample", logits, temperature, top_k, top_p, min_p, seed, offset)


from . import cuda_ops  # noqa: E402  (registers the CUDA providers)

cuda_ops.register(registry)
from . import gemm_ops  # noqa: E402
gemm_ops.register(registry)
from . import row_parts_ops  # noqa: E402

row_parts_ops.register(registry)
from . import attention_ops  # noqa: E402,F401  (registers the attention providers)

sampling_ops.register(registry)
from . import rotary_cache_ops  # noqa: E402

rotary_cache_ops.register(registry)
from . import linear_fused_ops  # noqa: E402

linear_fused_ops.register(registry)
from . import linear_norm_ops  # noqa: E402

linear_norm_ops.register(registry)
from . import embedding_ops  # noqa: E402

embedding_ops.register(registry)
