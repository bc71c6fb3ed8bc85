"""Fixtures shared across the suite: the real SmolLM2 GGUF, loaded once per session by onecat
and (where a test compares) by HF transformers."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest
import torch


def _share_the_cores() -> None:
    """Under pytest-xdist each worker gets its share of the cores for torch's threads (and its subprocesses'): two
    workers each running as many threads as there are cores ran the CPU engine tests 3-6x slower than alone on the
    CI's 2 cores (test_async_scheduling: 116 s alone with 2 threads, 97 s with 1, 420 s beside another worker)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        n = max(1, (os.cpu_count() or 1) // workers)
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(n)
        torch.set_num_threads(n)


_share_the_cores()


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


class ServerThread:
    """uvicorn serving `app` on a free 127.0.0.1 port from a daemon thread (a real server, real sockets)."""

    def __init__(self, app, lifespan: str = "on") -> None:
        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan=lifespan, timeout_graceful_shutdown=5)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()


@pytest.fixture(scope="session")
def serve_app():
    """`with serve_app(app) as srv: srv.url` runs an ASGI app under uvicorn on loopback."""
    return ServerThread
