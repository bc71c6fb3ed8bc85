"""onecat.models.chat_template renders exactly what transformers renders, and fails with ValueError."""

from __future__ import annotations

import pytest

from onecat.models.chat_template import ChatTemplateError, compile_chat_template, render_chat_template

SYSTEM = {"role": "system", "content": "You are terse."}
USER_1 = {"role": "user", "content": "What is 2+2?"}
ASSISTANT_1 = {"role": "assistant", "content": "4."}
USER_2 = {"role": "user", "content": "And in French, with <b>tags</b> & “quotes” 😀?"}

CONVERSATIONS = {
    "system_user": [SYSTEM, USER_1],
    "system_user_assistant": [SYSTEM, USER_1, ASSISTANT_1],
    "multi_turn": [SYSTEM, USER_1, ASSISTANT_1, USER_2],
    "no_system": [USER_1],  # SmolLM2's template inserts its default system prompt
    "no_system_multi_turn": [USER_1, ASSISTANT_1, USER_2],
}

# Meta-Llama-3-8B-Instruct's template (bos_token, loop.index0, the trim filter).
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

# Mistral-7B-Instruct-v0.1's template: raise_exception on roles that do not alternate user/assistant.
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)

# A multi-line tool-calling template in the style of Qwen's: whitespace control under trim_blocks/lstrip_blocks,
# namespace, loop controls, tojson with options, strftime_now, dict(), {% generation %}, and extra variables.
TOOLS_TEMPLATE = """\
{%- set ns = namespace(last_user=-1) %}
{%- for message in messages %}
    {%- if message.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}
{%- endfor %}
{%- if tools %}
<|im_start|>system
Year {{ strftime_now("%Y") }}. {{ messages[0].content if messages[0].role == 'system' else 'Tools:' }}
    {% for tool in tools %}
{{ tool | tojson(indent=2, sort_keys=True) }}
    {% endfor %}
<|im_end|>
{% endif %}
{% for message in messages %}
    {% if message.role == 'system' and tools %}{% continue %}{% endif %}
    {% if loop.index0 > 6 %}{% break %}{% endif %}
<|im_start|>{{ message.role }}
    {% if message.reasoning_content is defined and loop.index0 > ns.last_user %}
<think>{{ message.reasoning_content | trim }}</think>
    {% endif %}
{% if message.role == 'assistant' %}{% generation %}{{ message.content }}{% endgeneration %}{% else %}{{ message.content }}{% endif %}
    {% for call in message.tool_calls | default([]) %}
<tool_call>{{ dict(name=call.function.name, arguments=call.function.arguments) | tojson }}</tool_call>
    {% endfor %}
<|im_end|>
{% endfor %}
{% if add_generation_prompt %}
<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif %}
{% endif %}"""

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city (°C)",
                                                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                                "required": ["city"]}}}
TOOL_CONVERSATION = [
    SYSTEM, USER_1,
    {"role": "assistant", "content": None, "reasoning": "  Need the weather.  ",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "assistant", "content": "21 °C <sunny> & dry."},
]


@pytest.fixture(scope="module")
def hf_render():
    from transformers.utils.chat_template_utils import render_jinja_template

    def render(template, messages, **kwargs):
        rendered, _ = render_jinja_template(conversations=[messages], chat_template=template, **kwargs)
        return rendered[0]

    return render


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_smollm2_template_matches_transformers(name, add_generation_prompt, smollm2_tokenizer, smollm2_hf_tokenizer):
    messages = CONVERSATIONS[name]
    ours = smollm2_tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    assert ours == smollm2_hf_tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                                            tokenize=False)
    assert ours.endswith("<|im_start|>assistant\n") == add_generation_prompt
    assert ("You are a helpful AI assistant named SmolLM" in ours) == (messages[0]["role"] != "system")
    ids = smollm2_tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=True)
    assert ids == smollm2_hf_tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                                           tokenize=True, return_dict=False)
    assert ids.count(smollm2_tokenizer.token_to_id("<|im_start|>")) == len(messages) + add_generation_prompt + (
        messages[0]["role"] != "system")


def test_continue_final_message_matches_transformers(smollm2_tokenizer, smollm2_hf_tokenizer):
    messages = [USER_1, {"role": "assistant", "content": "The answer is "}]
    ours = smollm2_tokenizer.apply_chat_template(messages, continue_final_message=True)
    assert ours == smollm2_hf_tokenizer.apply_chat_template(messages, continue_final_message=True, tokenize=False)
    assert ours.endswith("<|im_start|>assistant\nThe answer is ")  # left open: no <|im_end|>
    blocks_template = ("{% for m in messages %}<{{ m.role }}>{% for b in m.content %}{{ b.text | trim }}{% endfor %}"
                       "</{{ m.role }}>{% endfor %}")
    blocks = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
              {"role": "assistant", "content": [{"type": "text", "text": "Sure: "}]}]
    ours = render_chat_template(blocks_template, blocks, continue_final_message=True)
    assert ours == smollm2_hf_tokenizer.apply_chat_template(blocks, chat_template=blocks_template,
                                                            continue_final_message=True, tokenize=False)
    assert ours.endswith("<assistant>Sure:")  # the template did not keep the tag's space: trailing space trimmed
    with pytest.raises(ValueError, match="cannot be used together"):
        smollm2_tokenizer.apply_chat_template(messages, continue_final_message=True, add_generation_prompt=True)


@pytest.mark.parametrize("template", [LLAMA3_TEMPLATE, MISTRAL_TEMPLATE, TOOLS_TEMPLATE], ids=["llama3", "mistral", "tools"])
@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_inline_templates_match_transformers_renderer(template, add_generation_prompt, hf_render):
    conversations = [[USER_1], [USER_1, ASSISTANT_1, USER_2], [USER_1, ASSISTANT_1]]
    if template is not MISTRAL_TEMPLATE:
        conversations.append([SYSTEM, USER_1, ASSISTANT_1, USER_2])
    special = {"bos_token": "<s>", "eos_token": "</s>"}
    for messages in conversations:
        ours = render_chat_template(template, messages, add_generation_prompt=add_generation_prompt, **special)
        assert ours == hf_render(template, messages, add_generation_prompt=add_generation_prompt, **special)
    if template is LLAMA3_TEMPLATE:
        assert ours.startswith("<s><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>")


@pytest.mark.parametrize("enable_thinking", [None, False])
def test_tools_template_with_tools_reasoning_and_extra_kwargs(enable_thinking, smollm2_tokenizer, smollm2_hf_tokenizer):
    """End to end through both tokenizers (which drop None values and alias reasoning fields)."""
    kwargs = {"tools": [WEATHER_TOOL], "add_generation_prompt": True, "chat_template": TOOLS_TEMPLATE}
    if enable_thinking is not None:
        kwargs["enable_thinking"] = enable_thinking
    ours = smollm2_tokenizer.apply_chat_template(TOOL_CONVERSATION, **kwargs)
    assert ours == smollm2_hf_tokenizer.apply_chat_template(TOOL_CONVERSATION, tokenize=False, **kwargs)
    assert '"description": "Weather in a city (°C)"' in ours  # tojson: no ASCII or HTML escaping
    assert '<tool_call>{"name": "get_weather", "arguments": {"city": "Zürich"}}</tool_call>' in ours
    assert "<think>Need the weather.</think>" in ours and "None" not in ours
    assert ours.endswith("<think>\n\n</think>\n\n") == (enable_thinking is False)


def test_documents_and_extra_variables(hf_render):
    template = ("{% for d in documents %}[{{ loop.index }}] {{ d.title }}: {{ d.text }}\n{% endfor %}"
                "{{ messages[-1].content }}{{ ' @' + date_string if date_string is defined }}")
    documents = [{"title": "A", "text": "first"}, {"title": "B", "text": "second"}]
    ours = render_chat_template(template, [USER_1], documents=documents, date_string="26 Jul 2024")
    assert ours == hf_render(template, [USER_1], documents=documents, date_string="26 Jul 2024")
    assert ours == "[1] A: first\n[2] B: second\nWhat is 2+2? @26 Jul 2024"


def test_compiled_templates_are_cached():
    assert compile_chat_template(LLAMA3_TEMPLATE) is compile_chat_template(LLAMA3_TEMPLATE)


@pytest.mark.parametrize("template, messages, message", [
    (MISTRAL_TEMPLATE, [SYSTEM, USER_1], "Conversation roles must alternate"),
    (MISTRAL_TEMPLATE, [USER_1, USER_2], "Conversation roles must alternate"),
    ("{% for m in messages %}{{ m.content }}", [USER_1], "syntax error at line 1"),
    ("{{ messages[0].nothing.here }}", [USER_1], "chat template error"),
    ("{{ messages[0].content + 1 }}", [USER_1], "TypeError"),
    ("{% set ns = namespace(_private=1) %}", [USER_1], "may not start with '_'"),
    ("{% set x = [] %}{{ x.append(1) }}", [USER_1], "chat template error"),  # immutable sandbox
    ("{{ ''.__class__.__mro__ }}", [USER_1], "chat template error"),  # sandbox hides dunder attributes
    ("{{ messages }}", [], "non-empty list"),
    ("{{ messages }}", ["not a dict"], "must be a dict"),
])
def test_errors_are_value_errors(template, messages, message, hf_render):
    with pytest.raises(ValueError, match=message) as caught:
        render_chat_template(template, messages, bos_token="<s>", eos_token="</s>")
    assert isinstance(caught.value, ChatTemplateError)
    if messages and isinstance(messages[0], dict):  # transformers refuses these templates too
        with pytest.raises(Exception):
            hf_render(template, messages, bos_token="<s>", eos_token="</s>")


def test_missing_template_and_bad_tools_are_value_errors():
    with pytest.raises(ValueError, match="no chat template"):
        render_chat_template(None, [USER_1])
    with pytest.raises(ValueError, match="tools must be a list"):
        render_chat_template(TOOLS_TEMPLATE, [USER_1], tools=["get_weather"])
    with pytest.raises(ValueError, match="documents must be a list"):
        render_chat_template(TOOLS_TEMPLATE, [USER_1], documents="doc")
