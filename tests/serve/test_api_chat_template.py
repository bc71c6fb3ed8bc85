"""The server's chat-template controls, as vLLM's: `continue_final_message`, `chat_template_kwargs`,
`documents`, the server-wide `serve.chat_template` override, and /version; on the embedded SmolLM2."""

from __future__ import annotations

import importlib.metadata

import httpx
import pytest

from onecat.serve.api_server import build_app, load_chat_template
from onecat.serve.config import ServerConfig

FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
OPEN = FRANCE + [{"role": "assistant", "content": "The capital of France is"}]
# A template that reads a variable of its own, a document list and the generation prompt.
PERSONA = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ persona | default('plain') }}: {{ m['content'] }}"
           "<|im_end|>\n{% endfor %}{% for d in documents or [] %}[doc {{ d['title'] }}] {% endfor %}"
           "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def persona_server(api_llm, api_server, serve_app):  # (tests/serve/conftest.py)
    # The same engine behind a second app whose chat template is replaced; the first server's lifespan owns it.
    with serve_app(build_app(api_llm, ServerConfig(chat_template=PERSONA)), lifespan="off") as s:
        yield s


def tokenize(srv, **body) -> httpx.Response:
    return httpx.post(srv.url + "/tokenize", json=body, timeout=60)


def test_continue_final_message_renders_the_open_turn(api_server, api_llm):
    r = tokenize(api_server, messages=OPEN, continue_final_message=True, add_generation_prompt=False)
    assert r.status_code == 200, r.text
    ids = r.json()["tokens"]
    assert ids == api_llm.tokenizer.apply_chat_template(OPEN, continue_final_message=True, tokenize=True)
    text = api_llm.tokenizer.decode(ids)
    assert text.endswith("<|im_start|>assistant\nThe capital of France is"), text
    closed = tokenize(api_server, messages=OPEN, add_generation_prompt=False).json()["tokens"]
    assert closed != ids and api_llm.tokenizer.decode(closed).endswith("<|im_end|>\n")


def test_chat_continues_the_final_message(api_server, api_llm):
    body = {"model": api_llm.model_name, "messages": OPEN, "temperature": 0, "max_tokens": 8,
            "continue_final_message": True, "add_generation_prompt": False}
    r = httpx.post(api_server.url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    content = r.json()["choices"][0]["message"]["content"]
    assert "Paris" in content and "<|im_start|>" not in content, content
    # The same tokens as a plain completion of the rendered prefix.
    prompt = api_llm.tokenizer.apply_chat_template(OPEN, continue_final_message=True, tokenize=True)
    plain = httpx.post(api_server.url + "/v1/completions", timeout=120,
                       json={"model": api_llm.model_name, "prompt": prompt, "temperature": 0, "max_tokens": 8}).json()
    assert plain["choices"][0]["text"] == content


@pytest.mark.parametrize("body", [
    {"messages": OPEN, "continue_final_message": True},  # add_generation_prompt defaults to true
    {"messages": FRANCE, "continue_final_message": True, "add_generation_prompt": False},  # a user turn last
    {"messages": FRANCE, "chat_template_kwargs": {"messages": []}},
    {"messages": FRANCE, "chat_template_kwargs": {"chat_template": "{{ 1 }}"}},
    {"messages": FRANCE, "chat_template_kwargs": ["enable_thinking"]},
    {"messages": FRANCE, "documents": "not a list"},
], ids=["with-generation-prompt", "user-last", "kwargs-messages", "kwargs-template", "kwargs-list", "documents-str"])
def test_bad_template_controls_are_400(api_server, api_llm, body):
    for route, extra in (("/v1/chat/completions", {"model": api_llm.model_name, "max_tokens": 2}), ("/tokenize", {})):
        r = httpx.post(api_server.url + route, json=body | extra, timeout=60)
        assert r.status_code == 400, (route, r.text)
        assert "error" in r.json()


def test_server_template_reads_request_kwargs_and_documents(persona_server, api_server, api_llm):
    plain = api_llm.tokenizer.decode(tokenize(persona_server, messages=FRANCE).json()["tokens"])
    assert "plain: What is the capital of France?" in plain and plain.endswith("<|im_start|>assistant\n")
    named = tokenize(persona_server, messages=FRANCE, chat_template_kwargs={"persona": "Zorblax"},
                     documents=[{"title": "atlas", "text": "..."}]).json()["tokens"]
    named = api_llm.tokenizer.decode(named)
    assert "Zorblax: What is the capital of France?" in named and "[doc atlas]" in named
    # The model's own template is untouched for the first app on the same engine.
    own = api_llm.tokenizer.decode(tokenize(api_server, messages=FRANCE, chat_template_kwargs={"persona": "Zorblax"})
                               .json()["tokens"])
    assert "Zorblax" not in own and own == api_llm.tokenizer.apply_chat_template(FRANCE, add_generation_prompt=True)
    r = httpx.post(persona_server.url + "/v1/chat/completions", timeout=120,
                   json={"model": api_llm.model_name, "messages": FRANCE, "temperature": 0, "max_tokens": 4})
    assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == len(api_llm.tokenizer.encode(plain)), r.text


def test_load_chat_template(tmp_path):
    f = tmp_path / "t.jinja"
    f.write_text(PERSONA)
    assert load_chat_template(str(f)) == PERSONA and load_chat_template(PERSONA) == PERSONA
    assert load_chat_template(None) is None
    with pytest.raises(ValueError, match="no such file"):
        load_chat_template(str(tmp_path / "missing.jinja"))
    with pytest.raises(ValueError, match="does not compile"):
        load_chat_template("{% for m in messages %}")
    with pytest.raises(ValueError, match="does not compile"):
        build_app(object(), ServerConfig(chat_template="{{ unclosed"))


def test_version(api_server):
    r = httpx.get(api_server.url + "/version")
    assert r.status_code == 200 and r.json() == {"version": importlib.metadata.version("onecat-serve")}
