"""Registry of quantized-weight formats: ``FORMATS[name] -> QuantFormat`` (plain data + two callables).

Each entry says which checkpoint tensors the format uses (``tensor_keys`` required, ``optional_keys``
optional -- the names after the module prefix, e.g. ``model.layers.0.mlp.down_proj.qweight``), how many
weights share a scale (``block_size``), the storage cost, a one-line layout summary (the full bit
layout is in the codec module's docstring, ``module``), and the reference codec:

* ``fmt.dequantize(**tensors, **fmt.params, **kw)`` -- keyword arguments named like ``tensor_keys``;
  returns float32 (GGUF: the logical ``shape``; packed Linear formats: ``[out_features, in_features]``).
* ``fmt.quantize(w, **fmt.params, **kw)`` -> ``dict`` keyed by ``tensor_keys``/``optional_keys``,
  or ``None`` where the format has no standard closed-form quantizer (GGUF K-/I-quants).
* :meth:`QuantFormat.dequantize_tensors` takes a mapping of checkpoint tensors and checks that the
  required keys are present; :meth:`QuantFormat.quantize_tensor` applies ``params`` for you.

GGUF types are registered under their ggml names (``"Q4_K"``; lookup is case-insensitive) with the
single tensor key ``"raw"`` (a GGUF tensor's data) and need ``shape=`` at dequantization.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import torch

from . import fp4, fp8, ggml, int4, int4_ct

__all__ = ["QuantFormat", "FORMATS", "get_format"]


@dataclass(frozen=True)
class QuantFormat:
    name: str
    family: str                       # "gguf" | "fp8" | "fp4" | "int"
    block_size: int | None            # weights per scale group (None: per tensor / per channel)
    bits_per_weight: float            # storage incl. per-block scales/zeros (not per-tensor extras)
    tensor_keys: tuple[str, ...]
    layout: str
    module: str                       # where the bit layout is documented
    dequantize: Callable[..., torch.Tensor]
    quantize: Callable[..., dict[str, torch.Tensor]] | None
    optional_keys: tuple[str, ...] = ()
    bytes_per_block: int | None = None
    ggml_type: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    def dequantize_tensors(self, tensors: Mapping[str, torch.Tensor], *, name: str | None = None, **kw) -> torch.Tensor:
        missing = [k for k in self.tensor_keys if k not in tensors]
        if missing:
            label = f"tensor {name!r} ({self.name})" if name else f"format {self.name}"
            raise ValueError(f"{label}: missing checkpoint tensor(s) {missing}; this format needs {list(self.tensor_keys)}")
        args = {k: tensors[k] for k in (*self.tensor_keys, *self.optional_keys) if k in tensors}
        return self.dequantize(**args, **self.params, name=name, **kw)

    def quantize_tensor(self, w: torch.Tensor, *, name: str | None = None, **kw) -> dict[str, torch.Tensor]:
        if self.quantize is None:
            label = f"tensor {name!r} ({self.name})" if name else f"format {self.name}"
            raise ValueError(f"{label}: no standard quantizer for this format (dequantization only)")
        return self.quantize(w, **self.params, name=name, **kw)


# ---- adapters: checkpoint key names -> codec arguments ------------------------------------------

def _gguf_quant(w, *, qtype, name=None):
    return {"raw": ggml.quantize(w, qtype, name=name)}


def _fp8_deq(weight, weight_scale, *, fmt, block_size=None, name=None):
    return fp8.dequantize(weight, weight_scale, fmt, block_size=block_size, name=name)


def _fp8_quant(w, *, fmt, granularity="channel", block_size=(128, 128), name=None):
    codes, scale = fp8.quantize(w, fmt, granularity=granularity, block_size=block_size, name=name)
    return {"weight": codes, "weight_scale": scale}


def _fp8_block_deq(weight, weight_scale_inv, *, fmt, block_size=(128, 128), name=None):
    return fp8.dequantize(weight, weight_scale_inv, fmt, block_size=block_size, name=name)


def _fp8_block_quant(w, *, fmt, block_size=(128, 128), name=None):
    codes, scale = fp8.quantize(w, fmt, granularity="block", block_size=block_size, name=name)
    return {"weight": codes, "weight_scale_inv": scale}


def _nvfp4_quant(w, *, name=None):
    packed, sf, gs = fp4.nvfp4_quantize(w, name=name)
    return {"weight": packed, "weight_scale": sf, "weight_scale_2": gs}


def _mxfp4_quant(w, *, name=None):
    blocks, scales = fp4.mxfp4_quantize(w, name=name)
    return {"blocks": blocks, "scales": scales}


# ---- the table -----------------------------------------------------------------------------------

def _gguf_entries() -> dict[str, QuantFormat]:
    out = {}
    for t in ggml.GGML_TYPES.values():
        kind = "float" if t.block_size == 1 else ("K-quant" if t.name.endswith("_K") else
                                                  "I-quant" if t.name.startswith("IQ") else "legacy block")
        module = ("onecat.quant.gguf_kquants" if kind == "K-quant" else
                  "onecat.quant.gguf_iquants" if kind == "I-quant" else "onecat.quant.gguf_blocks")
        out[t.name] = QuantFormat(
            name=t.name, family="gguf", block_size=t.block_size,
            bits_per_weight=8 * t.type_size / t.block_size, tensor_keys=("raw",),
            layout=f"GGUF {kind} type {t.name}: {t.type_size} bytes per {t.block_size} weights, blocks along the row",
            module=module, dequantize=functools.partial(ggml.dequantize, qtype=t.name),
            quantize=functools.partial(_gguf_quant, qtype=t.name) if t.quantize_blocks else None,
            bytes_per_block=t.type_size, ggml_type=t.type_id,
        )
    return out


def _build() -> dict[str, QuantFormat]:
    f = _gguf_entries()
    for fname, spec in (("fp8_e4m3", fp8.E4M3FN), ("fp8_e5m2", fp8.E5M2)):
        f[fname] = QuantFormat(
            name=fname, family="fp8", block_size=None, bits_per_weight=8.0,
            tensor_keys=("weight", "weight_scale"),
            layout=f"{spec.name.upper()} codes (uint8/float8) x float32 weight_scale, per tensor [] or per "
                   f"output channel [N, 1]; weight = decode(code) * scale",
            module="onecat.quant.fp8", dequantize=_fp8_deq, quantize=_fp8_quant, params={"fmt": spec.name},
        )
    f["fp8_e4m3_block128"] = QuantFormat(
        name="fp8_e4m3_block128", family="fp8", block_size=128 * 128, bits_per_weight=8.0 + 32 / (128 * 128),
        tensor_keys=("weight", "weight_scale_inv"),
        layout="DeepSeek-V3 style: E4M3FN codes [N, K] x float32 weight_scale_inv [ceil(N/128), ceil(K/128)] "
               "(a multiplier despite its name), one per 128x128 tile",
        module="onecat.quant.fp8", dequantize=_fp8_block_deq, quantize=_fp8_block_quant,
        params={"fmt": "e4m3fn"},
    )
    f["nvfp4"] = QuantFormat(
        name="nvfp4", family="fp4", block_size=fp4.NVFP4_BLOCK, bits_per_weight=4.0 + 8 / fp4.NVFP4_BLOCK,
        tensor_keys=("weight", "weight_scale", "weight_scale_2"),
        layout="ModelOpt NVFP4: E2M1 pairs uint8 [N, K/2] (low nibble = even element), E4M3 weight_scale "
               "[N, K/16], float32 weight_scale_2; w = e2m1 * (e4m3(scale) * scale_2)",
        module="onecat.quant.fp4", dequantize=fp4.nvfp4_dequantize, quantize=_nvfp4_quant,
        bytes_per_block=fp4.NVFP4_BLOCK // 2 + 1,
    )
    f["mxfp4"] = QuantFormat(
        name="mxfp4", family="fp4", block_size=fp4.MXFP4_BLOCK, bits_per_weight=4.0 + 8 / fp4.MXFP4_BLOCK,
        tensor_keys=("blocks", "scales"),
        layout="OCP MXFP4: E2M1 pairs uint8 [..., K/2] (low nibble = even element), E8M0 scales "
               "[..., K/32]; w = e2m1 * 2**(scale - 127)",
        module="onecat.quant.fp4", dequantize=fp4.mxfp4_dequantize, quantize=_mxfp4_quant,
        bytes_per_block=fp4.MXFP4_BLOCK // 2 + 1,
    )
    f["awq"] = QuantFormat(
        name="awq", family="int", block_size=128, bits_per_weight=4.0 + (16 + 4) / 128,
        tensor_keys=("qweight", "qzeros", "scales"),
        layout="AutoAWQ GEMM: qweight int32 [K, N/8] interleaved (0,2,4,6,1,3,5,7), qzeros int32 [K/G, N/8] "
               "same packing, scales fp16 [K/G, N]; w = (q - z) * s",
        module="onecat.quant.int4", dequantize=int4.awq_dequantize, quantize=int4.awq_quantize,
    )
    for fname, ckpt in (("gptq", "gptq"), ("gptq_v2", "gptq_v2")):
        f[fname] = QuantFormat(
            name=fname, family="int", block_size=128, bits_per_weight=4.0 + (16 + 4) / 128,
            tensor_keys=("qweight", "qzeros", "scales"), optional_keys=("g_idx",),
            layout="GPTQ: qweight int32 [K/8, N] packed along K, qzeros int32 [G, N/8], scales fp16 [G, N], "
                   "g_idx int32 [K]; w = (q - Z[g_idx]) * s[g_idx], "
                   + ("Z = stored + 1 (v1 off-by-one)" if ckpt == "gptq" else "Z = stored"),
            module="onecat.quant.int4", dequantize=int4.gptq_dequantize, quantize=int4.gptq_quantize,
            params={"checkpoint_format": ckpt},
        )
    f["compressed_tensors_pack_quantized"] = QuantFormat(
        name="compressed_tensors_pack_quantized", family="int", block_size=128, bits_per_weight=4.0 + 16 / 128,
        tensor_keys=("weight_packed", "weight_scale", "weight_shape"),
        optional_keys=("weight_zero_point", "weight_g_idx"),
        layout="compressed-tensors pack-quantized (W4A16): weight_packed int32 [N, ceil(K/8)] offset-binary "
               "along K, weight_scale [N, G], weight_zero_point int32 [ceil(N/8), G] (asym), weight_shape [2]",
        module="onecat.quant.int4_ct", dequantize=int4_ct.ct_dequantize, quantize=int4_ct.ct_quantize,
    )
    return f


FORMATS: Mapping[str, QuantFormat] = MappingProxyType(_build())
_ALIASES = {"pack-quantized": "compressed_tensors_pack_quantized", "w4a16": "compressed_tensors_pack_quantized",
            "fp8": "fp8_e4m3", "fp8_e4m3fn": "fp8_e4m3", "modelopt_fp4": "nvfp4", "gptq_v1": "gptq"}
_LOWER = {k.lower(): k for k in FORMATS}


def get_format(name: str) -> QuantFormat:
    """Look a format up by name (case-insensitive; a few common aliases accepted)."""
    if isinstance(name, str):
        key = _ALIASES.get(name.lower(), name.lower())
        if key in _LOWER:
            return FORMATS[_LOWER[key]]
    raise ValueError(f"unknown quantization format {name!r}; known formats: {', '.join(FORMATS)}")
