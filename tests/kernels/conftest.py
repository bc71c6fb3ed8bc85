"""tests/kernels: GPU tests (marked `gpu`) skip with a reason when torch sees no CUDA device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords and HERE in Path(item.fspath).parents:
            item.add_marker(skip)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


@pytest.fixture
def any_nvrtc(monkeypatch):
    """Judge fake devices by the problem alone, whichever NVRTC this machine has (the H200 has no
    NVRTC 12.9, so a fake sm_70 would be refused there for its toolchain)."""
    from onecat.kernels import build

    monkeypatch.setattr(build, "toolchain_reasons", lambda arch: [])
