"""The ops model code calls. Each is declared once (reference = semantics) and dispatched per
problem through the registry; model code never names a kernel.

Hot path: building a Problem and a dict lookup per call; the selection itself is cached.
"""

from __future__ import annotations

import functools

import torch

from . import reference as ref
from .attention_metadata import AttentionMetadata
from .registry import OpSpec, Problem, registry

for _name, _fn in [
    ("rms_norm", ref.rms_norm),
    ("rotary_embedding", ref.rotary_embedding),
    ("silu_and_mul", ref.silu_and_mul),
    ("gelu_and_mul", ref.gelu_and_mul),
    ("linear", ref.linear),
    ("reshape_and_cache", ref.reshape_and_cache),
    ("paged_attention", ref.paged_attention),
]:
    registry.declare(OpSpec(_name, _fn, doc=(_fn.__doc__ or "").strip()))


@functools.lru_cache(maxsize=None)
def _capability(device: torch.device) -> tuple[int, int] | None:
    if device.type != "cuda":
        return None
    return torch.cuda.get_device_capability(device)


def problem_for(op: str, x: torch.Tensor, **params) -> Problem:
    dev = x.device
    return Problem(op=op, device=dev.type, capability=_capability(dev),
                   dtype=str(x.dtype).removeprefix("torch."),
                   params=tuple(sorted(params.items())),
                   graph_capture=dev.type == "cuda" and torch.cuda.is_current_stream_capturing())


def _impl(op: str, x: torch.Tensor, **params):
    return registry.select(problem_for(op, x, **params)).provider.fn


def rms_norm(x, weight, eps, residual=None):
    return _impl("rms_norm", x, hidden=x.shape[-1], residual=residual is not None)(x, weight, eps, residual)


def rotary_embedding(positions, q, k, head_dim, cos_sin_cache, is_neox=True):
    return _impl("rotary_embedding", q, head_dim=head_dim, rotary_dim=cos_sin_cache.shape[-1],
                 neox=is_neox)(positions, q, k, head_dim, cos_sin_cache, is_neox)


def silu_and_mul(x):
    return _impl("silu_and_mul", x)(x)


def gelu_and_mul(x, approximate="tanh"):
    return _impl("gelu_and_mul", x, approximate=approximate)(x, approximate)


def linear(x, weight, bias=None):
    fmt = getattr(weight, "format", "dense")
    return _impl("linear", x, format=fmt, n=weight.shape[0], k=weight.shape[-1])(x, weight, bias)


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping):
    return _impl("reshape_and_cache", key, kv_dtype=str(key_cache.dtype).removeprefix("torch."),
                 head_dim=key.shape[-1])(key, value, key_cache, value_cache, slot_mapping)


def paged_attention(query, key_cache, value_cache, metadata: AttentionMetadata, scale,
                    sliding_window=None, logit_soft_cap=None):
    return _impl("paged_attention", query, head_dim=query.shape[-1],
                 kv_dtype=str(key_cache.dtype).removeprefix("torch."),
                 gqa=query.shape[1] // key_cache.shape[2], sliding_window=bool(sliding_window),
                 soft_cap=bool(logit_soft_cap))(query, key_cache, value_cache, metadata, scale,
                                                  sliding_window, logit_soft_cap)
