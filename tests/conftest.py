"""Fixtures shared across the suite: the real SmolLM2 GGUF, loaded once per session by onecat
and (where a test compares) by HF transformers."""

from __future__ import annotations

import os

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none present; run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    from onecat.models.loader import default_model_path

    return default_model_path()


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_path) -> str:
    return os.path.dirname(smollm2_path)


@pytest.fixture(scope="session")
def hf_smollm2(smollm2_path):
    """(model, tokenizer) from HF transformers on the same GGUF, float32."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d, f = os.path.split(smollm2_path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.eval()
    return model, tok


@pytest.fixture(scope="session")
def llm():
    """onecat's offline LLM on the embedded default model (CPU, float32)."""
    from onecat.serve.llm import LLM

    return LLM(progress=False)
