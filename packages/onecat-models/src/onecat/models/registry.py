"""Architecture name -> model adapter, imported lazily so a checkpoint only pulls in its own code."""

from __future__ import annotations

import importlib

_ADAPTERS: dict[str, str] = {
    # GGUF general.architecture and HF config.json architectures[0]
    "llama": "onecat.models.llama:LlamaForCausalLM",
    "LlamaForCausalLM": "onecat.models.llama:LlamaForCausalLM",
    "MistralForCausalLM": "onecat.models.llama:LlamaForCausalLM",
    "gemma3": "onecat.models.gemma3:Gemma3ForCausalLM",
    "Gemma3ForCausalLM": "onecat.models.gemma3:Gemma3ForCausalLM",
}


def register_adapter(name: str, target: str) -> None:
    _ADAPTERS[name] = target


def supported_architectures() -> list[str]:
    return sorted(_ADAPTERS)


def resolve_adapter(name: str):
    target = _ADAPTERS.get(name)
    if target is None:
        raise ValueError(f"architecture {name!r} is not supported (supported: {', '.join(supported_architectures())})")
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)
