"""The OpenAI API shapes we serve (completions, chat completions, models, errors) as pydantic v2
models. Requests are strict (a wrong type is a 400, never coerced) and ignore unknown fields, as
OpenAI-compatible servers do. `to_sampling_params` maps a request onto the engine's SamplingParams."""

from __future__ import annotations

import base64
import json
import struct
import time
from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer

from . import tool_calls
from .sampling_params import SamplingParams
from .structured import StructuredOutputs


class _Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- errors ------------------------------------------------------------------------------------
class ErrorInfo(_Response):
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | int | None = None


class ErrorResponse(_Response):
    error: ErrorInfo


def validation_message(e: ValidationError) -> tuple[str, str | None]:
    """A pydantic error as (one-line message, the first offending parameter)."""
    parts, param = [], None
    for err in e.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"])
        param = param or (str(err["loc"][0]) if err["loc"] else None)
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts), param


# -- shared request pieces -----------------------------------------------------------------------
class StreamOptions(_Request):
    include_usage: bool = False
    continuous_usage_stats: bool = False  # vLLM's: every chunk carries the usage so far


class JsonSchemaFormat(_Request):
    name: str | None = None
    description: str | None = None
    schema_: dict | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Request):
    """OpenAI's response_format: text (no constraint), json_object (an object), json_schema (that schema)."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class StructuredOutputsRequest(_Request):
    """vLLM's structured_outputs extension: exactly one of these."""

    json_: dict | str | None = Field(None, alias="json")
    json_object: bool | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None


class _SamplingFields(_Request):
    """What completions and chat requests share."""

    model: str | None = None  # None: the served model
    n: int = 1
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)  # int64, as OpenAI; torch refuses more
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None  # accepted and ignored
    response_format: ResponseFormat | None = None
    structured_outputs: StructuredOutputsRequest | None = None
    logit_bias: dict[str, float] | None = None  # token id (as JSON writes keys: a string) -> bias
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    truncate_prompt_tokens: int | None = None
    priority: int = 0  # scheduler.policy=priority: lower first (vLLM's); any other value is a 400 under fcfs

    def _logit_bias(self) -> dict[int, float] | None:
        if not self.logit_bias:
            return None
        bad = [k for k in self.logit_bias if not k.isdigit()]
        if bad:
            raise ValueError(f"logit_bias keys must be token ids, got {bad[0]!r}")
        return {int(k): v for k, v in self.logit_bias.items()}

    def _structured(self) -> StructuredOutputs | None:
        rf, so = self.response_format, self.structured_outputs
        if so is not None:
            if rf is not None and rf.type != "text":
                raise ValueError("give response_format or structured_outputs, not both")
            return StructuredOutputs(json=so.json_, json_object=bool(so.json_object), regex=so.regex,
                                     choice=so.choice, grammar=so.grammar)
        if rf is None or rf.type == "text":
            return None
        if rf.type == "json_object":
            return StructuredOutputs(json_object=True)
        if rf.json_schema is None or rf.json_schema.schema_ is None:
            raise ValueError('response_format json_schema needs "json_schema": {"name": ..., "schema": {...}}')
        return StructuredOutputs(json=rf.json_schema.schema_)

    def _sampling(self, max_tokens: int | None, logprobs: int | None) -> SamplingParams:
        def pick(value, default):
            return default if value is None else value

        return SamplingParams(
            n=self.n, temperature=pick(self.temperature, 1.0), top_p=pick(self.top_p, 1.0),
            top_k=pick(self.top_k, 0), min_p=pick(self.min_p, 0.0), seed=self.seed,
            presence_penalty=pick(self.presence_penalty, 0.0),
            frequency_penalty=pick(self.frequency_penalty, 0.0),
            repetition_penalty=pick(self.repetition_penalty, 1.0),
            max_tokens=max_tokens, min_tokens=self.min_tokens, stop=pick(self.stop, []),
            stop_token_ids=pick(self.stop_token_ids, []), ignore_eos=self.ignore_eos,
            include_stop_str_in_output=self.include_stop_str_in_output, logprobs=logprobs,
            skip_special_tokens=self.skip_special_tokens, structured_outputs=self._structured(),
            logit_bias=self._logit_bias(), allowed_token_ids=self.allowed_token_ids, bad_words=pick(self.bad_words, []),
            truncate_prompt_tokens=self.truncate_prompt_tokens)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    @property
    def continuous_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.continuous_usage_stats


# -- completions ---------------------------------------------------------------------------------
def prompt_list(value: str | list, name: str) -> list[str | list[int]]:
    """A prompt field as a list of prompts: a string, or a list of token ids, is one."""
    if isinstance(value, str):
        return [value]
    if not value:
        raise ValueError(f"{name} must not be empty")
    return [list(value)] if isinstance(value[0], int) else list(value)


class CompletionRequest(_SamplingFields):
    prompt: str | list[str] | list[int] | list[list[int]]  # a list of token ids is one prompt
    max_tokens: int | None = 16
    logprobs: int | None = None
    echo: bool = False
    suffix: str | None = None  # refused: no fill-in-the-middle
    best_of: int | None = None  # refused unless equal to n (vLLM v1 has none either)

    def prompts(self) -> list[str | list[int]]:
        return prompt_list(self.prompt, "prompt")

    def to_sampling_params(self) -> SamplingParams:
        if self.suffix:
            raise ValueError("suffix (fill-in-the-middle) is not supported")
        if self.best_of is not None and self.best_of != self.n:
            raise ValueError(f"best_of={self.best_of} is not supported (only best_of equal to n, which is plain n)")
        params = self._sampling(self.max_tokens, self.logprobs)
        if self.echo and self.logprobs is not None:  # the echoed prompt's tokens come with their logprobs too
            params = replace(params, prompt_logprobs=self.logprobs)
        return params


class CompletionLogprobs(_Response):
    tokens: list[str] = Field(default_factory=list)
    token_logprobs: list[float | None] = Field(default_factory=list)
    top_logprobs: list[dict[str, float] | None] = Field(default_factory=list)
    text_offset: list[int] = Field(default_factory=list)


class CompletionChoice(_Response):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None = None
    stop_reason: str | int | None = None


class PromptTokensDetails(_Response):
    cached_tokens: int = 0  # prompt tokens whose KV came from the prefix cache


class Usage(_Response):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: PromptTokensDetails | None = None


class CompletionResponse(_Response):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


# -- chat completions ----------------------------------------------------------------------------
class TextPart(_Request):
    type: Literal["text"]
    text: str


class FunctionCallIn(_Request):
    name: str
    arguments: str


class ToolCallIn(_Request):  # an assistant turn's tool call in the history
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallIn


class ChatMessage(_Request):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None  # assistant
    tool_call_id: str | None = None  # tool

    def template_dict(self) -> dict:
        """The message as chat templates read it (tool calls with their arguments parsed, as transformers'
        templates expect)."""
        d = {"role": self.role, "content": self.text()}
        if self.tool_calls:
            d["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                "name": c.function.name, "arguments": _arguments(c.function.arguments)}} for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        return d

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content)


def template_messages(messages: list[ChatMessage]) -> list[dict]:
    """Chat messages as the chat template reads them; an empty list is refused."""
    if not messages:
        raise ValueError("messages must contain at least one message")
    return [m.template_dict() for m in messages]


def _arguments(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text  # not JSON: the template gets the string as sent


class FunctionDef(_Request):
    name: str
    description: str | None = None
    parameters: dict | None = None  # a JSON schema
    strict: bool | None = None


class ChatTool(_Request):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Request):
    name: str


class NamedToolChoice(_Request):
    type: Literal["function"]
    function: NamedFunction


_TEMPLATE_NAMES = frozenset({"messages", "tools", "documents", "add_generation_prompt", "continue_final_message",
                             "chat_template", "tokenize", "bos_token", "eos_token", "unk_token", "pad_token"})


class _ChatTemplateFields(_Request):
    """vLLM's chat-template controls: `continue_final_message` leaves the last (assistant) message open for
    the model to continue; `chat_template_kwargs` become template variables (Qwen3's `enable_thinking`);
    `documents` feed RAG templates."""
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, object] | None = None
    documents: list[dict[str, object]] | None = None

    def template_kwargs(self) -> dict:
        """Keywords for Tokenizer.apply_chat_template; a clash or a bad combination is a ValueError."""
        extra = dict(self.chat_template_kwargs or {})
        clash = sorted(_TEMPLATE_NAMES & extra.keys())
        if clash:
            raise ValueError(f"chat_template_kwargs may not set {', '.join(clash)}: use the request's own fields")
        if self.continue_final_message and self.add_generation_prompt:
            raise ValueError("continue_final_message=true needs add_generation_prompt=false (the final message "
                             "is continued, not answered)")
        if self.continue_final_message and self.messages and self.messages[-1].role != "assistant":
            raise ValueError("continue_final_message=true needs the final message's role to be assistant")
        kw = {"add_generation_prompt": self.add_generation_prompt, **extra}
        if self.continue_final_message:
            kw["continue_final_message"] = True
        if self.documents is not None:
            kw["documents"] = self.documents
        return kw


class ChatCompletionRequest(_SamplingFields, _ChatTemplateFields):
    messages: list[ChatMessage]
    max_tokens: int | None = None  # None: up to the context length
    max_completion_tokens: int | None = None  # OpenAI's newer name; wins over max_tokens
    logprobs: bool = False
    top_logprobs: int | None = None
    tools: list[ChatTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool = True

    def template_tools(self) -> list[dict] | None:
        return [t.model_dump(exclude_none=True) for t in self.tools] if self.tools else None

    def to_sampling_params(self, tool_parser: str | None = None) -> SamplingParams:
        """The engine's parameters; tool_parser: serve.tool_call_parser (which lets tool_choice "auto" through)."""
        if self.top_logprobs is not None and not self.logprobs:
            raise ValueError("top_logprobs requires logprobs=true")
        max_tokens = self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens
        logprobs = (self.top_logprobs or 0) if self.logprobs else None
        params = self._sampling(max_tokens, logprobs)
        forced = tool_calls.constraint(self, tool_parser)
        if forced is not None:
            if params.structured_outputs is not None:
                raise ValueError("tool_choice required / a named function decodes the calls' JSON itself: "
                                 "drop response_format / structured_outputs")
            params = replace(params, structured_outputs=forced)
        return params


class TopLogprob(_Response):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprob(_Response):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[TopLogprob] = Field(default_factory=list)


class ChatLogprobs(_Response):
    content: list[TokenLogprob] | None = None


class FunctionCall(_Response):
    name: str
    arguments: str  # JSON


class ToolCall(_Response):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class DeltaToolCall(ToolCall):
    index: int


class ChatResponseMessage(_Response):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    reasoning: str | None = None  # serve.reasoning_parser's: the think block (vLLM's `reasoning`)
    reasoning_content: str | None = None  # the same, by its older name (vLLM before 0.11, many clients)

    @model_serializer(mode="wrap")
    def _drop_no_reasoning(self, handler):  # no reasoning fields unless a parser split the reply
        d = handler(self)
        if d.get("reasoning") is None and d.get("reasoning_content") is None:
            d.pop("reasoning", None), d.pop("reasoning_content", None)
        return d


class ChatChoice(_Response):
    index: int
    message: ChatResponseMessage
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None = None
    stop_reason: str | int | None = None


class ChatCompletionResponse(_Response):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[ChatChoice]
    usage: Usage | None = None


class DeltaMessage(_Response):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[DeltaToolCall] | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler):  # {"content": "x"}, as OpenAI sends it, not {"role": null, ...}
        return {k: v for k, v in handler(self).items() if v is not None}


class ChatChunkChoice(_Response):
    index: int
    delta: DeltaMessage
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None = None


class ChatCompletionChunk(_Response):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[ChatChunkChoice]
    usage: Usage | None = None


# -- tokenize / detokenize (vLLM's routes) --------------------------------------------------------------
class TokenizeRequest(_ChatTemplateFields):
    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None  # rendered with the chat template first
    add_special_tokens: bool | None = None  # default: true for a prompt, false for messages (the template adds them)


class TokenizeResponse(_Response):
    count: int
    max_model_len: int
    tokens: list[int]


class DetokenizeRequest(_Request):
    model: str | None = None
    tokens: list[int]


class DetokenizeResponse(_Response):
    prompt: str


# -- embeddings (serve.embeddings: the last token's final hidden state, L2-normalized) ----------------------------
class EmbeddingRequest(_Request):
    model: str | None = None
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None  # refused: no matryoshka truncation for a decoder's hidden state
    truncate_prompt_tokens: int | None = Field(None, ge=1)
    user: str | None = None  # accepted and ignored


class EmbeddingData(_Response):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str  # base64: the float32 little-endian bytes, as OpenAI sends them


class EmbeddingUsage(_Response):
    prompt_tokens: int
    total_tokens: int


class EmbeddingResponse(_Response):
    object: Literal["list"] = "list"
    data: list[EmbeddingData]
    model: str
    usage: EmbeddingUsage

    @classmethod
    def of(cls, vectors: list[tuple[list[float], int]], model: str, encoding: str) -> EmbeddingResponse:
        """From (embedding, prompt tokens) per input."""
        def encode(v: list[float]) -> list[float] | str:
            return v if encoding == "float" else base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()
        n = sum(t for _, t in vectors)
        return cls(data=[EmbeddingData(index=i, embedding=encode(v)) for i, (v, _) in enumerate(vectors)],
                   model=model, usage=EmbeddingUsage(prompt_tokens=n, total_tokens=n))


# -- models --------------------------------------------------------------------------------------
class ModelCard(_Response):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=lambda: int(time.time()))
    owned_by: str = "onecat"
    max_model_len: int | None = None


class ModelList(_Response):
    object: Literal["list"] = "list"
    data: list[ModelCard]
