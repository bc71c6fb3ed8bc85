"""/v1/embeddings (serve.embeddings=true) on the embedded SmolLM2: the last token's final hidden state,
L2-normalized, computed on the engine thread between steps; OpenAI's request and response shapes."""

from __future__ import annotations

import base64
import struct

import httpx
import pytest
import torch

from onecat.serve.api_server import build_app
from onecat.serve.config import ServerConfig

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def embed_server(api_llm, api_server, serve_app):  # (tests/serve/conftest.py; api_server's lifespan owns the engine)
    with serve_app(build_app(api_llm, ServerConfig(embeddings=True)), lifespan="off") as s:
        yield s


def embed(srv, **body) -> httpx.Response:
    return httpx.post(srv.url + "/v1/embeddings", json=body, timeout=120)


def test_embedding_is_the_normed_last_hidden_state(embed_server, api_llm):
    r = embed(embed_server, input=PROMPT, model=api_llm.model_name)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "list" and body["model"] == api_llm.model_name
    n = len(api_llm.tokenizer.encode(PROMPT))
    assert body["usage"] == {"prompt_tokens": n, "total_tokens": n}
    (item,) = body["data"]
    v = torch.tensor(item["embedding"])
    assert item["object"] == "embedding" and item["index"] == 0
    assert v.shape == (api_llm.engine.spec.hidden_size,) and abs(float(v.norm()) - 1) < 1e-5
    # A positive scale leaves the LM head's argmax where it was: the vector's next token is the greedy one.
    runner = api_llm.engine.runner
    nxt = int(runner.model.compute_logits(v.to(runner.dtype)[None]).argmax())
    greedy = httpx.post(embed_server.url + "/v1/completions", timeout=120,
                        json={"prompt": PROMPT, "max_tokens": 1, "temperature": 0}).json()
    assert api_llm.tokenizer.decode([nxt]) == greedy["choices"][0]["text"]


def test_batches_token_ids_and_base64(embed_server, api_llm):
    ids = api_llm.tokenizer.encode(PROMPT)
    one = embed(embed_server, input=PROMPT).json()["data"][0]["embedding"]
    assert torch.allclose(torch.tensor(embed(embed_server, input=ids).json()["data"][0]["embedding"]), torch.tensor(one))
    r = embed(embed_server, input=[PROMPT, "Water boils at"]).json()
    assert [d["index"] for d in r["data"]] == [0, 1]
    assert torch.allclose(torch.tensor(r["data"][0]["embedding"]), torch.tensor(one))
    assert not torch.allclose(torch.tensor(r["data"][1]["embedding"]), torch.tensor(one))
    assert r["usage"]["prompt_tokens"] == len(ids) + len(api_llm.tokenizer.encode("Water boils at"))
    packed = embed(embed_server, input=PROMPT, encoding_format="base64").json()["data"][0]["embedding"]
    raw = base64.b64decode(packed)
    assert list(struct.unpack(f"<{len(raw) // 4}f", raw)) == pytest.approx(one, abs=1e-7)
    cut = embed(embed_server, input="Lorem ipsum dolor. " * 30 + PROMPT, truncate_prompt_tokens=len(ids)).json()
    assert cut["usage"]["prompt_tokens"] == len(ids)


@pytest.mark.parametrize("body, status", [
    ({"input": ""}, 400), ({"input": []}, 400), ({"input": [10**9]}, 400), ({"input": "x", "dimensions": 8}, 400),
    ({"input": "x", "encoding_format": "int8"}, 400), ({"input": [1] * 100_000}, 400), ({"input": "x", "model": "no"}, 400),
    ({"input": [[1, 2], "mixed"]}, 400),
])
def test_bad_embedding_requests(embed_server, body, status):
    r = embed(embed_server, **body)
    assert r.status_code == status and "error" in r.json(), r.text


def test_off_by_default(api_server):
    r = embed(api_server, input=PROMPT)
    assert r.status_code == 404 and "serve.embeddings=true" in r.json()["error"]["message"]
