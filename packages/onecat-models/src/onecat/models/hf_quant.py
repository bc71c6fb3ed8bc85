"""HF safetensors checkpoints with a `quantization_config`: which format each Linear is stored in,
and its checkpoint tensors gathered into one onecat.quant weight object (CodecWeight).

Recognised configs (config.json `quantization_config`, or ModelOpt's hf_quant_config.json):

| quant_method | fields read | tensors per quantized Linear `<m>` |
|---|---|---|
| awq (AutoAWQ) | bits 4, group_size, version gemm, zero_point, modules_to_not_convert | `<m>.qweight` `<m>.qzeros` `<m>.scales` |
| gptq (AutoGPTQ / GPTQModel) | bits 4/8, group_size, desc_act, sym, checkpoint_format gptq/gptq_v2 | `<m>.qweight` `<m>.qzeros` `<m>.scales` (`<m>.g_idx`) |
| compressed-tensors | format pack-quantized; config_groups.*.weights: num_bits, type int, strategy group/channel, group_size, symmetric; ignore | `<m>.weight_packed` `<m>.weight_scale` `<m>.weight_shape` (`<m>.weight_zero_point`, `<m>.weight_g_idx`) |
| modelopt | quant_algo NVFP4 (group_size 16) or FP8; exclude_modules | NVFP4: `<m>.weight` (uint8 E2M1 pairs) `<m>.weight_scale` (E4M3 per 16) `<m>.weight_scale_2` (fp32) (`<m>.input_scale`); FP8: `<m>.weight` (E4M3) `<m>.weight_scale` (fp32) |
| mxfp4 (gpt-oss) | modules_to_not_convert | `<m>.weight_blocks` or `<m>_blocks` (uint8 [N, K/32, 16]) and `..._scales` (E8M0 [N, K/32]) |

A Linear whose quantized tensors are absent is read as a dense `<m>.weight` (unquantized modules:
embeddings, norms, excluded ones). Activation scales (`input_scale`) are not used: Volta runs these
formats weight-only (activations stay in the model dtype). Errors name the file, the tensor and
the reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Callable

import torch

from onecat.quant.linear_method import CodecMethod

from .gguf_file import CheckpointError

SUPPORTED_METHODS = ("awq", "gptq", "compressed-tensors", "modelopt", "mxfp4")


@dataclass
class HFQuantScheme:
    quant_method: str
    fmt: str  # onecat.quant FORMATS name
    params: dict = field(default_factory=dict)
    skip: tuple[str, ...] = ()  # module names / patterns left unquantized

    @property
    def method(self) -> CodecMethod:
        return CodecMethod(self.fmt, dict(self.params))

    @property
    def primary(self) -> tuple[str, ...]:
        """Checkpoint suffixes whose presence marks a module as quantized (the first one found wins)."""
        return {"awq": ("qweight",), "gptq": ("qweight",), "gptq_v2": ("qweight",),
                "compressed_tensors_pack_quantized": ("weight_packed",), "nvfp4": ("weight_scale",),
                "fp8_e4m3": ("weight_scale",), "mxfp4": ("weight_blocks", "_blocks")}[self.fmt]


def read_quant_config(path: str, cfg: dict) -> HFQuantScheme | None:
    """The checkpoint's quantization scheme (None: not quantized)."""
    q = cfg.get("quantization_config")
    source = os.path.join(path, "config.json")
    mo = os.path.join(path, "hf_quant_config.json")
    if q is None and os.path.isfile(mo):
        source = mo
        try:
            with open(mo) as fh:
                q = json.load(fh)
        except (OSError, json.JSONDecodeError) as e:
            raise CheckpointError(f"{mo}: unreadable ({e})") from e
        q = {"quant_method": "modelopt", **q.get("quantization", {})}
    if not q:
        return None
    if "quantization" in q and "quant_algo" not in q:  # hf_quant_config.json content pasted as is
        q = {"quant_method": "modelopt", **q["quantization"]}
    method = str(q.get("quant_method", "")).lower()
    where = f"{source}: quantization_config"
    if method not in SUPPORTED_METHODS:
        raise CheckpointError(f"{where}: quant_method {q.get('quant_method')!r} is not supported "
                              f"(supported: {', '.join(SUPPORTED_METHODS)})")
    return _PARSERS[method](q, where)


def _awq(q: dict, where: str) -> HFQuantScheme:
    bits, version = int(q.get("bits", q.get("w_bit", 4))), str(q.get("version", "gemm")).lower()
    if bits != 4:
        raise CheckpointError(f"{where}: awq bits={bits} is not supported (4 only)")
    if version != "gemm":
        raise CheckpointError(f"{where}: awq version {version!r} is not supported (gemm only)")
    if not q.get("zero_point", True):
        raise CheckpointError(f"{where}: awq zero_point=false is not supported")
    gs = int(q.get("group_size", q.get("q_group_size", 128)))
    return HFQuantScheme("awq", "awq", {"group_size": gs}, tuple(q.get("modules_to_not_convert") or ()))


def _gptq(q: dict, where: str) -> HFQuantScheme:
    bits = int(q.get("bits", 4))
    if bits not in (4, 8):
        raise CheckpointError(f"{where}: gptq bits={bits} is not supported (4 or 8)")
    ckpt = str(q.get("checkpoint_format", "gptq")).lower()
    if ckpt not in ("gptq", "gptq_v2"):
        raise CheckpointError(f"{where}: gptq checkpoint_format {ckpt!r} is not supported (gptq, gptq_v2)")
    gs = int(q.get("group_size", 128))
    return HFQuantScheme("gptq", ckpt, {"bits": bits, "group_size": gs}, tuple(q.get("modules_to_not_convert") or ()))


def _compressed_tensors(q: dict, where: str) -> HFQuantScheme:
    fmt = q.get("format")
    if fmt != "pack-quantized":
        raise CheckpointError(f"{where}: compressed-tensors format {fmt!r} is not supported (pack-quantized only)")
    groups = q.get("config_groups") or {}
    weights = [g.get("weights") for g in groups.values() if g.get("weights")]
    if len(weights) != 1:
        raise CheckpointError(f"{where}: expected one config group with weights, found {len(weights)}")
    w = weights[0]
    bits, typ, strategy = int(w.get("num_bits", 4)), w.get("type", "int"), w.get("strategy", "group")
    if typ != "int" or bits not in (4, 8):
        raise CheckpointError(f"{where}: compressed-tensors weights type={typ!r} num_bits={bits} are not supported "
                              f"(int 4 or 8)")
    if strategy not in ("group", "channel"):
        raise CheckpointError(f"{where}: compressed-tensors strategy {strategy!r} is not supported (group, channel)")
    gs = int(w["group_size"]) if strategy == "group" else None
    return HFQuantScheme("compressed-tensors", "compressed_tensors_pack_quantized",
                         {"num_bits": bits, "group_size": gs}, tuple(q.get("ignore") or ()))


def _modelopt(q: dict, where: str) -> HFQuantScheme:
    algo = str(q.get("quant_algo", "")).upper()
    skip = tuple(q.get("exclude_modules") or q.get("ignore") or ())
    if algo == "NVFP4":
        gs = int(q.get("group_size", 16))
        if gs != 16:
            raise CheckpointError(f"{where}: modelopt NVFP4 group_size={gs} is not supported (16)")
        return HFQuantScheme("modelopt", "nvfp4", {}, skip)
    if algo == "FP8":
        return HFQuantScheme("modelopt", "fp8_e4m3", {}, skip)
    raise CheckpointError(f"{where}: modelopt quant_algo {q.get('quant_algo')!r} is not supported (NVFP4, FP8)")


def _mxfp4(q: dict, where: str) -> HFQuantScheme:
    return HFQuantScheme("mxfp4", "mxfp4", {}, tuple(q.get("modules_to_not_convert") or ()))


_PARSERS: dict[str, Callable[[dict, str], HFQuantScheme]] = {
    "awq": _awq, "gptq": _gptq, "compressed-tensors": _compressed_tensors, "modelopt": _modelopt, "mxfp4": _mxfp4}


# -- one module's tensors ----------------------------------------------------------------------------
def _name(module: str, suffix: str) -> str:
    return module + suffix if suffix.startswith("_") else f"{module}.{suffix}"


def quantized_module(scheme: HFQuantScheme, module: str, has: Callable[[str], bool]) -> str | None:
    """The primary tensor name if `module` is stored quantized, else None."""
    for suffix in scheme.primary:
        if has(_name(module, suffix)):
            return _name(module, suffix)
    return None


def load_module(scheme: HFQuantScheme, module: str, get: Callable[[str], torch.Tensor | None]):
    """Gather `module`'s checkpoint tensors into a CodecWeight (codec key names); `get(name)` returns
    a tensor or None when the checkpoint has no such tensor. Raises ValueError naming what is wrong."""
    f = scheme.fmt
    t: dict[str, torch.Tensor] = {}

    def need(suffix: str, key: str | None = None, optional: bool = False):
        v = get(_name(module, suffix))
        if v is None and not optional:
            raise ValueError(f"module {module!r} ({scheme.quant_method}): tensor {_name(module, suffix)!r} is missing")
        if v is not None:
            t[key or suffix] = v
        return v

    if f == "awq":
        qw = need("qweight"), need("qzeros"), need("scales")
        shape = (qw[0].shape[1] * 8, qw[0].shape[0])
    elif f in ("gptq", "gptq_v2"):
        qw = need("qweight")
        need("qzeros"), need("scales"), need("g_idx", optional=True)
        shape = (qw.shape[1], qw.shape[0] * 32 // scheme.params["bits"])
    elif f == "compressed_tensors_pack_quantized":
        need("weight_packed"), need("weight_scale")
        ws = need("weight_shape")
        need("weight_zero_point", optional=True), need("weight_g_idx", optional=True)
        t.pop("weight_shape")
        shape = tuple(int(v) for v in ws.reshape(-1).tolist())
        if len(shape) != 2:
            raise ValueError(f"module {module!r}: tensor {module}.weight_shape holds {ws.tolist()}, not (out, in)")
    elif f == "nvfp4":
        w = need("weight")
        need("weight_scale"), need("weight_scale_2")
        shape = (w.shape[0], 2 * w.shape[-1])
    elif f == "fp8_e4m3":
        w = need("weight")
        need("weight_scale")
        if w.dtype == torch.float8_e4m3fn:
            t["weight"] = w.view(torch.uint8)
        shape = tuple(w.shape)
    else:  # mxfp4: [N, K/32, 16] blocks, [N, K/32] scales
        suffix = "weight_blocks" if get(_name(module, "weight_blocks")) is not None else "_blocks"
        b = need(suffix, "blocks")
        need(suffix.replace("blocks", "scales"), "scales")
        if b.dim() != 3 or b.shape[-1] != 16:
            raise ValueError(f"module {module!r}: tensor {_name(module, suffix)!r} has shape {tuple(b.shape)}, "
                             f"expected [out, in/32, 16]")
        t["blocks"] = b.reshape(b.shape[0], -1)
        shape = (b.shape[0], b.shape[1] * 32)
    return scheme.method.create_weights(t, shape, name=module)
