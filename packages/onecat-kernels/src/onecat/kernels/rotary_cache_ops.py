"""Providers of the `rotary_and_cache` op (an attention layer's rotary embedding and KV-cache write
as one op; semantics: reference.rotary_and_cache).

* `cuda_fused`: csrc/rotary.cu's rotary_cache_* kernels, one launch per step and layer for an FP16 cache
  (rotated k goes straight into its cache row; nothing else reads it).
* `unfused`: ops.rotary_embedding then ops.reshape_and_cache, each through its own admitted
  provider: the GPU route for what the fused kernel refuses (FP8 caches, odd layouts).
* the torch reference everywhere else (the CPU route).
"""

from __future__ import annotations

from . import cuda_ops
from .cuda_ops import _aligned, _empty, _need, _round32, available
from .driver import Kernel
from .registry import KernelRegistry, Problem, Provider

_KERNELS = {(neox, vec): Kernel("rotary.cu", f"rotary_cache_{'neox' if neox else 'gptj'}_v{vec}",
                                "pppppppppqqqiiii", pdl=True)
            for neox in (True, False) for vec in (8, 2)}


def supports_fused(p: Problem) -> list[str]:
    """rotary_embedding's kernel conditions (q, k, positions, cos/sin) plus the FP16 cache write's."""
    r = cuda_ops.supports_rotary(p)
    _need(r, p.param("kv_dtype") == "float16", f"KV cache dtype {p.param('kv_dtype')} not float16 (FP8: unfused)")
    _need(r, p.param("v_dtype") == "float16", f"v dtype {p.param('v_dtype')} not float16")
    _need(r, p.param("slot_dtype") == "int64", f"slot_mapping dtype {p.param('slot_dtype')} not int64")
    _need(r, p.param("cache_layout_ok", True), "v not [T, Hk*D] rows with unit stride and even row stride, or "
          "caches not contiguous [blocks, block_size, Hk, D] of one dtype matching k and v")
    return r


def supports_unfused(p: Problem) -> list[str]:
    return [] if p.device == "cuda" else [f"device is {p.device}: the reference is the same composition"]


def rotary_and_cache_cuda(positions, q, k, v, head_dim, cos_sin_cache, is_neox, key_cache, value_cache,
                          slot_mapping):
    t, r = q.shape[0], cos_sin_cache.shape[-1]
    nq, nk = q.shape[1] // head_dim, k.shape[1] // head_dim
    q_out = _empty((t, nq * head_dim), q.dtype, q.device)
    if t:
        unit = r // 2 if is_neox else r
        wide = (unit % 8 == 0 and head_dim % 8 == 0 and all(x.stride(0) % 8 == 0 for x in (q, k, v))
                and _aligned(q, k, v, key_cache, value_cache))
        vec = 8 if wide else 2
        items = (nq + nk) * (unit // vec + (head_dim - r) // vec) + nk * head_dim // vec
        cuda_ops._launch(_KERNELS[(bool(is_neox), vec)], (t, 1, 1), (_round32(items, hi=256), 1, 1),
                         q_out.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(), positions.data_ptr(),
                         q.data_ptr(), k.data_ptr(), v.data_ptr(), cos_sin_cache.data_ptr(), slot_mapping.data_ptr(),
                         q.stride(0), k.stride(0), v.stride(0), nq, nk, head_dim, r, device=q.device)
    return q_out


def rotary_and_cache_unfused(positions, q, k, v, head_dim, cos_sin_cache, is_neox, key_cache, value_cache,
                             slot_mapping, k_scale=1.0, v_scale=1.0):
    from . import ops

    q_rot, k_rot = ops.rotary_embedding(positions, q, k, head_dim, cos_sin_cache, is_neox)
    t = q.shape[0]
    ops.reshape_and_cache(k_rot.view(t, -1, head_dim), v.view(t, -1, head_dim), key_cache, value_cache,
                          slot_mapping, k_scale, v_scale)
    return q_rot


def register(reg: KernelRegistry) -> None:
    reg.register(Provider("cuda_fused", "rotary_and_cache", rotary_and_cache_cuda, available=available,
                          supports=supports_fused))
    reg.register(Provider("unfused", "rotary_and_cache", rotary_and_cache_unfused, supports=supports_unfused))
    reg.priority.setdefault("rotary_and_cache", ["cuda_fused", "unfused"])
