"""The OpenAI server on the embedded SmolLM2 for the API test files: an AsyncLLM, the app under uvicorn on
loopback and an OpenAI client of it, one set per test file (module scope)."""

from __future__ import annotations

import pytest



@pytest.fixture(scope="module")
def api_llm():
    from onecat.serve.async_llm import AsyncLLM
    from onecat.serve.config import EngineConfig

    return AsyncLLM.from_config(EngineConfig(), progress=False)


@pytest.fixture(scope="module")
def api_server(api_llm, serve_app):
    from onecat.serve.api_server import build_app  # (imports here: the GPU machine has no fastapi / openai)
    from onecat.serve.config import ServerConfig

    with serve_app(build_app(api_llm, ServerConfig())) as s:
        yield s


@pytest.fixture(scope="module")
def api_client(api_server):
    import openai

    return openai.OpenAI(base_url=api_server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
