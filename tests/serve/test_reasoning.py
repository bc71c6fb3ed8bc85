"""serve.reasoning_parser: a reply's think block as the message's `reasoning` (vLLM's qwen3 / deepseek_r1
parsers): the split itself, and the server on the embedded SmolLM2 behind a Qwen3.5-style thinking template."""

from __future__ import annotations

import json

import httpx
import pytest

from onecat.serve.api_server import build_app
from onecat.serve.config import ServerConfig
from onecat.serve.chat_reply import ChoiceStream, ReplyRules
from onecat.serve.protocol import ChatCompletionRequest
from onecat.serve.reasoning import ReasoningParser, ReplySplit, drop_partial_tag

QWEN3 = ReasoningParser.named("qwen3")
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
# SmolLM2's ChatML with Qwen3.5's generation prompt: an open think block, or a closed empty one without thinking.
THINKING = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and not "
            "enable_thinking %}<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}{% endif %}")


@pytest.mark.parametrize("text,open_at_start,want", [
    ("plain answer", False, (None, "plain answer")),
    ("<think>hmm</think>Paris", False, ("hmm", "Paris")),
    ("\n<think>hmm\n</think>\n\nParis", False, ("hmm\n", "\n\nParis")),
    ("<think>still thinking", False, ("still thinking", None)),  # cut short: all reasoning
    ("hmm</think>Paris", True, ("hmm", "Paris")),
    ("hmm", True, ("hmm", None)),
    ("</think>Paris", True, ("", "Paris")),
    ("a <think> in the text", False, (None, "a <think> in the text")),  # only a leading block is reasoning
])
def test_split(text, open_at_start, want):
    assert QWEN3.split(text, open_at_start) == want


def test_streamed_pieces_add_up_to_the_split_at_every_cut():
    """Fed every prefix of a reply (as a stream grows), the pieces the server's ChoiceStream sends add up to the
    final split, and no piece ever holds part of a tag."""
    req = ChatCompletionRequest.model_validate({"messages": FRANCE})
    for text, open_at_start in (("<think>a</think>b", False), ("xy</think>\nParis.", True), ("<thi", False),
                                ("<think>never closed </thi", False), ("no think", False)):
        stream = ChoiceStream(ReplyRules(req, ReplySplit(QWEN3, open_at_start)))
        got_r, got_c = "", ""
        for cut in range(1, len(text) + 1):
            delta, _ = stream.next(text[:cut], "stop" if cut == len(text) else None)
            r, c = (delta.reasoning, delta.content) if delta is not None else (None, None)
            assert delta is None or delta.reasoning_content == r
            for piece in (r, c):
                assert piece is None or not any(t in piece for t in ("<think>", "</think>"))
            got_r, got_c = got_r + (r or ""), got_c + (c or "")
        want_r, want_c = QWEN3.split(text, open_at_start)
        assert (got_r, got_c) == (want_r or "", want_c or ""), text


def test_drop_partial_tag():
    assert drop_partial_tag("abc </thi", "</think>") == "abc " and drop_partial_tag("abc <", "<think>") == "abc "
    assert drop_partial_tag("abc", "<think>") == "abc" and drop_partial_tag("", "<think>") == ""
    assert drop_partial_tag("a <think>", "<think>") == "a <think>"  # a whole tag is not a partial one


def test_prompt_state_and_names():
    assert QWEN3.opens_in_prompt("<|im_start|>assistant\n<think>\n")
    assert not QWEN3.opens_in_prompt("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not QWEN3.opens_in_prompt("<think>old</think> turn <|im_start|>assistant\n")
    assert ReasoningParser.named(None) is None and ReasoningParser.named("deepseek_r1") == QWEN3
    with pytest.raises(ValueError, match="unknown reasoning parser 'nope'"):
        ReasoningParser.named("nope")


@pytest.fixture(scope="module")
def server(api_llm, serve_app):
    with serve_app(build_app(api_llm, ServerConfig(chat_template=THINKING, reasoning_parser="qwen3"))) as s:
        yield s


def _chat(server, llm, stream=False, **kw):
    body = {"model": llm.model_name, "messages": FRANCE, "temperature": 0, "max_tokens": 24, "stream": stream} | kw
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    if not stream:
        return r.json()["choices"][0]["message"]
    reasoning, content = "", ""
    for line in r.text.splitlines():
        if line.startswith("data: {"):
            for ch in json.loads(line[6:])["choices"]:
                d = ch["delta"]
                assert d.get("reasoning") == d.get("reasoning_content")
                reasoning, content = reasoning + (d.get("reasoning") or ""), content + (d.get("content") or "")
    return reasoning, content


def test_server_splits_a_closed_think_block(server, api_llm):
    # The prompt opens the block; a regex makes the model close it, so both parts are the model's own tokens.
    form = {"structured_outputs": {"regex": "[A-Za-z ,.]{4,40}</think>[A-Za-z ,.]{4,40}"}}
    m = _chat(server, api_llm, **form)
    assert m["reasoning"] and m["content"] and m["reasoning"] == m["reasoning_content"]
    assert "think>" not in m["reasoning"] + m["content"]
    assert _chat(server, api_llm, stream=True, **form) == (m["reasoning"], m["content"])


def test_server_reply_cut_short_is_all_reasoning(server, api_llm):
    m = _chat(server, api_llm, max_tokens=6)
    assert m["content"] is None and m["reasoning"]
    assert _chat(server, api_llm, stream=True, max_tokens=6) == (m["reasoning"], "")


def test_server_without_thinking_is_all_content(server, api_llm):
    m = _chat(server, api_llm, chat_template_kwargs={"enable_thinking": False})
    assert "reasoning" not in m and "reasoning_content" not in m and "Paris" in m["content"]
    assert _chat(server, api_llm, stream=True, chat_template_kwargs={"enable_thinking": False}) == ("", m["content"])


def test_unknown_parser_fails_at_startup(api_llm):
    with pytest.raises(ValueError, match="unknown reasoning parser"):
        build_app(api_llm, ServerConfig(reasoning_parser="r2d2"))
