"""A server whose engine thread died (something a step's error handling does not catch): the request in flight
and every later one get a 503 instead of waiting forever, and /health says 503, as vLLM's does for a dead engine."""

from __future__ import annotations

import httpx
import pytest

from onecat.serve.api_server import build_app
from onecat.serve.async_llm import AsyncLLM
from onecat.serve.config import EngineConfig, ServerConfig


class _Fatal(BaseException):
    """Escapes the engine thread's `except Exception` as a fatal error would."""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_dead_engine_answers_503(serve_app):
    llm = AsyncLLM.from_config(EngineConfig(), progress=False)
    with serve_app(build_app(llm, ServerConfig())) as srv:
        body = {"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}
        assert httpx.post(srv.url + "/v1/completions", json=body, timeout=120).status_code == 200
        assert httpx.get(srv.url + "/health").status_code == 200

        def fatal(*args, **kw):
            raise _Fatal("fatal")

        llm.engine.add_request = fatal
        r = httpx.post(srv.url + "/v1/completions", json=body, timeout=60)  # the request that kills the thread
        assert r.status_code == 503 and "engine thread stopped" in r.json()["error"]["message"], r.text
        assert not llm.healthy()
        h = httpx.get(srv.url + "/health")
        assert h.status_code == 503 and h.json()["error"]["type"] == "service_unavailable"
        for route, extra in (("/v1/completions", {}), ("/v1/chat/completions", {"messages": [{"role": "user",
                                                                                              "content": "hi"}]})):
            r = httpx.post(srv.url + route, json=body | extra | {"stream": False}, timeout=60)
            assert r.status_code == 503, (route, r.text)
