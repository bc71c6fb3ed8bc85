"""The OpenAI-compatible HTTP server over AsyncLLM.

A request's path, top to bottom in this file: the route (`completions` / `chat_completions`)
checks the key (`require_key`), parses the body strictly (`parse_body`: bad JSON, bad UTF-8 or
wrong types are 400s), checks the model name, builds SamplingParams, renders the chat template
(`chat_prompt`), then submits the prompt (`Run.start`: the engine tokenizes and checks it; its
refusals, e.g. a prompt too long for the context, become 400s). Then it streams SSE chunks built from the
cumulative RequestOutputs (`stream_chat` / `stream_completion`) or waits for the last one. The
client going away cancels the work, which closes the engine's generator and so aborts the
request (`EngineStream`, `unless_disconnected`). Every error is OpenAI's `{"error": {...}}`.
"""

from __future__ import annotations

import asyncio
import hmac
import importlib.metadata
import json
import logging
import math
import os
import time
import uuid
from contextlib import aclosing, asynccontextmanager
from typing import Any, TypeVar
from collections.abc import AsyncIterator

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from onecat.models.chat_template import ChatTemplateError, compile_chat_template

from .config import ServerConfig
from .metrics import CONTENT_TYPE, ServerMetrics
from .async_llm import EngineDead
from .chat_reply import ChoiceStream, ReplyRules
from .reasoning import ReasoningParser, ReplySplit
from . import tool_calls
from .outputs import Logprob, RequestOutput, TokenLogprobs
from .protocol import (ChatChoice, ChatChunkChoice, ChatCompletionChunk, ChatCompletionRequest,
                       ChatCompletionResponse, ChatLogprobs, CompletionChoice, CompletionLogprobs, CompletionRequest,
                       CompletionResponse, DeltaMessage, DetokenizeRequest, DetokenizeResponse, EmbeddingRequest,
                       EmbeddingResponse, ErrorInfo, ErrorResponse, ModelCard, ModelList, PromptTokensDetails,
                       TokenLogprob, TokenizeRequest, TokenizeResponse, TopLogprob, Usage, prompt_list,
                       template_messages, validation_message)
from .sampling_params import SamplingParams

logger = logging.getLogger("onecat.serve")
R = TypeVar("R", bound=BaseModel)


class APIError(Exception):
    def __init__(self, message: str, status: int = 400, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.info = status, ErrorInfo(message=message, type=type, param=param, code=code)


def error_response(e: APIError) -> JSONResponse:
    return JSONResponse(ErrorResponse(error=e.info).model_dump(), status_code=e.status)


def load_chat_template(spec: str | None) -> str | None:
    """ServerConfig.chat_template as template text: a file's contents, or the text itself when it holds
    Jinja ('{'); None keeps the model's. A missing file or a template that does not compile is a ValueError."""
    if spec is None:
        return None
    if os.path.isfile(spec):
        with open(spec, encoding="utf-8") as f:
            text = f.read()
    elif "{" in spec:
        text = spec
    else:
        raise ValueError(f"serve.chat_template={spec!r}: no such file, and not an inline Jinja template")
    try:
        compile_chat_template(text)
    except ChatTemplateError as e:
        raise ValueError(f"serve.chat_template does not compile: {e}") from None
    return text


def build_app(llm: Any, server_config: ServerConfig) -> FastAPI:
    """The app for one AsyncLLM; starts the engine on startup and shuts it down on shutdown."""
    chat_template = load_chat_template(server_config.chat_template)
    reasoning = ReasoningParser.named(server_config.reasoning_parser)
    tool_parser = tool_calls.check_parser(server_config.tool_call_parser)
    template_override = {} if chat_template is None else {"chat_template": chat_template}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        llm.start()
        try:
            yield
        finally:
            await llm.shutdown()

    app = FastAPI(title="onecat", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    metrics = ServerMetrics(llm.stats, llm.model_name)
    app.state.llm, app.state.metrics = llm, metrics

    # -- errors: always OpenAI's shape; never FastAPI's 422 ----------------------------------------
    @app.exception_handler(APIError)
    async def on_api_error(request: Request, e: APIError):
        return error_response(e)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, e: StarletteHTTPException):
        kind = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        return error_response(APIError(str(e.detail), e.status_code, kind))

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, e: RequestValidationError):
        return error_response(APIError(str(e.errors()[:3])))

    @app.exception_handler(EngineDead)
    async def on_engine_dead(request: Request, e: EngineDead):
        return error_response(APIError(str(e), 503, "service_unavailable"))

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, e: Exception):
        logger.exception("internal error on %s", request.url.path)
        return error_response(APIError(f"internal error: {type(e).__name__}", 500, "internal_error"))

    # -- auth ----------------------------------------------------------------------------------------
    async def require_key(request: Request) -> None:
        if not server_config.api_key:
            return
        expected = f"Bearer {server_config.api_key}".encode()
        given = request.headers.get("authorization", "").encode("latin-1", "replace")
        if not hmac.compare_digest(given, expected):
            raise APIError("Incorrect or missing API key: pass `Authorization: Bearer <key>`.", 401,
                           "invalid_request_error", code="invalid_api_key")

    auth = [Depends(require_key)]

    # -- routes --------------------------------------------------------------------------------------
    @app.get("/health")
    async def health() -> Response:
        if not llm.healthy():  # (as vLLM: 503 once the engine is dead, for load balancers to route around it)
            raise EngineDead()
        return Response(status_code=200)

    @app.get("/version")
    async def version() -> JSONResponse:
        return JSONResponse({"version": importlib.metadata.version("onecat-serve")})

    @app.get("/v1/models", dependencies=auth)
    async def models() -> JSONResponse:
        card = ModelCard(id=llm.model_name, max_model_len=llm.max_model_len)
        return JSONResponse(ModelList(data=[card]).model_dump())

    @app.get("/v1/onecat/acceleration", dependencies=auth)
    async def acceleration() -> JSONResponse:  # the route's admission table and the kernels each layer used
        from .admission import acceleration_report

        return JSONResponse(acceleration_report(llm))

    @app.get("/metrics", dependencies=auth)
    async def metrics_route() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @app.post("/tokenize", dependencies=auth)
    async def tokenize(request: Request) -> JSONResponse:
        req = await parse_body(request, TokenizeRequest)
        check_model(req.model)
        if (req.prompt is None) == (req.messages is None):
            raise APIError("give exactly one of prompt and messages")
        tok = llm.tokenizer
        if req.messages is not None:
            ids = tok.encode(chat_text(req), add_special_tokens=bool(req.add_special_tokens))
        else:
            ids = tok.encode(req.prompt, add_special_tokens=req.add_special_tokens is not False)
        return JSONResponse(TokenizeResponse(count=len(ids), max_model_len=llm.max_model_len, tokens=ids).model_dump())

    @app.post("/detokenize", dependencies=auth)
    async def detokenize(request: Request) -> JSONResponse:
        req = await parse_body(request, DetokenizeRequest)
        check_model(req.model)
        return JSONResponse(DetokenizeResponse(prompt=api_values(llm.tokenizer.decode, req.tokens)).model_dump())

    @app.post("/v1/embeddings", dependencies=auth)
    async def embeddings(request: Request) -> JSONResponse:
        req = await parse_body(request, EmbeddingRequest)
        check_model(req.model)
        if not server_config.embeddings:
            raise APIError("this server does not serve embeddings: start it with serve.embeddings=true (the last "
                           "token's final hidden state, L2-normalized, as vLLM's embed runner and llama.cpp's "
                           "--embeddings pool a decoder model)", 404, "not_found_error")
        if req.dimensions is not None:
            raise APIError("dimensions is not supported: this model's embeddings are its hidden size", param="dimensions")
        inputs = api_values(prompt_list, req.input, "input")
        vectors = [await llm.on_engine(lambda eng, p=p: api_values(eng.embed, p, req.truncate_prompt_tokens))
                   for p in inputs]
        return JSONResponse(EmbeddingResponse.of(vectors, llm.model_name, req.encoding_format).model_dump())

    @app.post("/v1/chat/completions", dependencies=auth)
    async def chat_completions(request: Request) -> Response:
        req = await parse_body(request, ChatCompletionRequest)
        check_model(req.model)
        params = api_values(req.to_sampling_params, tool_parser)
        prompt_ids, split = chat_prompt(req)
        rules = ReplyRules(req, split, tool_parser)
        request_id = f"chatcmpl-{uuid.uuid4().hex}"
        run = await Run(llm, metrics, prompt_ids, params, request_id, req.priority).start()
        if req.stream:
            return EngineStream(sse(stream_chat(req, run, request_id, llm.model_name, rules)))
        final = await unless_disconnected(request, run.last())
        return JSONResponse(chat_response(req, final, request_id, llm.model_name, rules).model_dump())

    @app.post("/v1/completions", dependencies=auth)
    async def completions(request: Request) -> Response:
        req = await parse_body(request, CompletionRequest)
        check_model(req.model)
        params = sampling_params(req)
        prompts = api_values(req.prompts)  # a string or token ids each; the engine tokenizes
        request_id = f"cmpl-{uuid.uuid4().hex}"
        runs = [Run(llm, metrics, p, params, f"{request_id}-{i}", req.priority) for i, p in enumerate(prompts)]
        await start_all(runs)  # the engine has checked the token ids: decoding them is safe
        texts = [p if isinstance(p, str) else llm.tokenizer.decode(p) for p in prompts] if req.echo else None
        token_str = llm.tokenizer.token_texts
        if req.stream:
            return EngineStream(sse(stream_completion(req, runs, texts, request_id, llm.model_name, token_str)))
        finals = await unless_disconnected(request, asyncio.gather(*(r.last() for r in runs)))
        return JSONResponse(completion_response(req, finals, texts, request_id, llm.model_name,
                                                token_str).model_dump())

    # -- request -> engine input ---------------------------------------------------------------------
    def check_model(name: str | None) -> None:  # OpenAI answers 404 here; we answer 400 (bad input)
        if name is not None and name != llm.model_name:
            raise APIError(f"The model `{name}` does not exist; this server serves `{llm.model_name}`.",
                           param="model", code="model_not_found")

    def chat_text(req: ChatCompletionRequest | TokenizeRequest, tools: list[dict] | None = None) -> str:
        """The request's messages through the chat template: the server's override, the request's controls."""
        messages = api_values(template_messages, req.messages)
        return api_values(lambda: llm.tokenizer.apply_chat_template(
            messages, tools=tools, **req.template_kwargs(), **template_override))

    def chat_prompt(req: ChatCompletionRequest) -> tuple[list[int], ReplySplit | None]:
        """The prompt's ids, and how its reply splits into reasoning and content (serve.reasoning_parser)."""
        text = chat_text(req, req.template_tools())
        ids = llm.tokenizer.encode(text, add_special_tokens=False)  # the template writes BOS, if any
        return ids, None if reasoning is None else ReplySplit(reasoning, reasoning.opens_in_prompt(text))

    return app


async def parse_body(request: Request, model: type[R]) -> R:
    body = await request.body()
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise APIError("the request body is not valid UTF-8") from None
    except ValueError as e:
        raise APIError(f"the request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise APIError("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        message, param = validation_message(e)
        raise APIError(message, param=param) from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a valid JSON number")


def api_values(fn, *args):
    """Call fn; a ValueError (a refusal of the request's values) becomes a 400."""
    try:
        return fn(*args)
    except ValueError as e:
        raise APIError(str(e)) from None


def sampling_params(req: ChatCompletionRequest | CompletionRequest) -> SamplingParams:
    return api_values(req.to_sampling_params)


# -- one engine request ------------------------------------------------------------------------------
class Run:
    """One engine request: its cumulative outputs as they come, and its metrics at the end."""

    def __init__(self, llm: Any, metrics: ServerMetrics, prompt: str | list[int], params: SamplingParams,
                 request_id: str, priority: int = 0) -> None:
        self.gen = llm.generate(prompt, params, request_id, priority)
        self.metrics = metrics
        self.arrival, self.first_token = time.monotonic(), None
        self.first: RequestOutput | None = None
        self.last_out: RequestOutput | None = None

    async def start(self) -> Run:
        """Wait for the first output. The engine refuses a bad prompt (empty, too long for the
        context, token ids out of range) here, before yielding."""
        try:
            self.first = await anext(self.gen)
        except ValueError as e:
            await self.gen.aclose()
            raise APIError(str(e)) from None
        except BaseException:
            await self.gen.aclose()
            raise
        return self

    async def outputs(self) -> AsyncIterator[RequestOutput]:
        try:
            out = self.first
            while out is not None:
                self._note(out)
                yield out
                out = None if out.finished else await anext(self.gen, None)
        finally:
            await self.gen.aclose()  # aborts the request if it had not finished
            self._record()

    async def last(self) -> RequestOutput:
        async with aclosing(self.outputs()) as outs:
            async for _ in outs:
                pass
        return self.last_out

    def _note(self, out: RequestOutput) -> None:
        if self.first_token is None and any(o.token_ids for o in out.outputs):
            self.first_token = time.monotonic()
        self.last_out = out

    def _record(self) -> None:
        if self.last_out is None or self.metrics is None:
            return
        last, m, self.metrics = self.last_out, self.metrics, None  # record once
        m.observe_request(prompt_tokens=len(last.prompt_token_ids),
                          output_tokens=[len(o.token_ids) for o in last.outputs],
                          finish_reasons=[o.finish_reason for o in last.outputs], arrival=self.arrival,
                          first_token=self.first_token, finished=time.monotonic())


async def start_all(runs: list[Run]) -> None:
    results = await asyncio.gather(*(r.start() for r in runs), return_exceptions=True)
    errors = [e for e in results if isinstance(e, BaseException)]
    if errors:
        for run in runs:
            await run.gen.aclose()
        raise errors[0]


async def merge(runs: list[Run]) -> AsyncIterator[tuple[int, RequestOutput]]:
    """Interleave several runs' outputs as they come, as (run index, output)."""
    iters = [r.outputs() for r in runs]
    pending = {asyncio.create_task(anext(it, None)): i for i, it in enumerate(iters)}
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                i, out = pending.pop(task), task.result()
                if out is not None:
                    pending[asyncio.create_task(anext(iters[i], None))] = i
                    yield i, out
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for it in iters:
            await it.aclose()


# -- disconnects -------------------------------------------------------------------------------------
class EngineStream(StreamingResponse):
    """SSE response that stops (and so aborts the engine request) as soon as the client leaves,
    not only at the next write, and always closes its generator."""

    def __init__(self, content: AsyncIterator[str]) -> None:
        super().__init__(content, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    async def __call__(self, scope, receive, send) -> None:
        try:
            async with anyio.create_task_group() as tg:
                async def stream() -> None:
                    try:
                        await self.stream_response(send)
                    except OSError:  # the client went away between two writes
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(stream)
                await self.listen_for_disconnect(receive)
                tg.cancel_scope.cancel()
        finally:
            await self.body_iterator.aclose()


async def unless_disconnected(request: Request, work):
    """Await `work`; cancel it (aborting its engine requests) if the client disconnects first."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.create_task(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise APIError("client disconnected", 499)
    return task.result()


# -- engine output -> OpenAI shapes ------------------------------------------------------------------
async def sse(chunks: AsyncIterator[BaseModel]) -> AsyncIterator[str]:
    try:
        async for chunk in chunks:
            yield f"data: {json.dumps(chunk.model_dump(), ensure_ascii=False)}\n\n"
    except Exception as e:  # headers are sent: report in-band, as OpenAI does
        logger.exception("error while streaming")
        err = ErrorResponse(error=ErrorInfo(message=f"internal error: {type(e).__name__}", type="internal_error"))
        yield f"data: {err.model_dump_json()}\n\n"
    finally:
        await chunks.aclose()
    yield "data: [DONE]\n\n"


def usage(outputs: list[RequestOutput]) -> Usage:
    prompt = sum(len(o.prompt_token_ids) for o in outputs)
    completion = sum(len(c.token_ids) for o in outputs for c in o.outputs)
    cached = PromptTokensDetails(cached_tokens=sum(o.num_cached_tokens for o in outputs))
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                 prompt_tokens_details=cached)


def _finite(x: float) -> float:
    return max(x, -9999.0) if not math.isnan(x) else -9999.0


def chat_logprobs(lps: list[TokenLogprobs], top_n: int) -> ChatLogprobs:
    content = [TokenLogprob(token=t.chosen.token, logprob=_finite(t.chosen.logprob),
                            bytes=list(t.chosen.token.encode()),
                            top_logprobs=[TopLogprob(token=x.token, logprob=_finite(x.logprob),
                                                     bytes=list(x.token.encode())) for x in t.top[:top_n]])
               for t in lps]
    return ChatLogprobs(content=content)


def completion_logprobs(lps: list[TokenLogprobs], offset: int,
                        out: CompletionLogprobs | None = None) -> CompletionLogprobs:
    """The completions API's logprobs of `lps` (appended to `out` when given), text offsets from `offset`."""
    out = out if out is not None else CompletionLogprobs()
    for t in lps:
        out.tokens.append(t.chosen.token)
        out.token_logprobs.append(None if t.chosen.logprob is None else _finite(t.chosen.logprob))
        out.top_logprobs.append({x.token: _finite(x.logprob) for x in t.top} or None)
        out.text_offset.append(offset)
        offset += len(t.chosen.token)
    return out


def chat_response(req: ChatCompletionRequest, final: RequestOutput, request_id: str,
                  model: str, rules: ReplyRules) -> ChatCompletionResponse:
    choices = []
    for o in final.outputs:
        message, finish = rules.message(o.text, o.finish_reason)
        choices.append(ChatChoice(index=o.index, message=message, finish_reason=finish, stop_reason=o.stop_reason,
                                  logprobs=chat_logprobs(o.logprobs or [], req.top_logprobs or 0) if req.logprobs
                                  else None))
    return ChatCompletionResponse(id=request_id, model=model, choices=choices, usage=usage([final]))


async def stream_chat(req: ChatCompletionRequest, run: Run, request_id: str,
                      model: str, rules: ReplyRules) -> AsyncIterator[ChatCompletionChunk]:
    created, n = int(time.time()), req.n

    def chunk(choices: list[ChatChunkChoice], use: Usage | None = None) -> ChatCompletionChunk:
        return ChatCompletionChunk(id=request_id, created=created, model=model, choices=choices, usage=use)

    yield chunk([ChatChunkChoice(index=i, delta=DeltaMessage(role="assistant", content="")) for i in range(n)])
    sent = Deltas(n)
    shaped = [ChoiceStream(rules) for _ in range(n)] if rules.shapes_stream else None
    whole = rules.tool_mode in ("required", "named")  # the calls (and the logprobs) go out with the last chunk
    async with aclosing(run.outputs()) as outs:
        async for out in outs:
            choices = []
            for o in out.outputs:
                if whole and o.finish_reason is None:
                    continue
                if (d := sent.next(o.index, o.text, o.logprobs, o.finish_reason)) is not None:
                    text, lps, _ = d
                    logprobs = chat_logprobs(lps, req.top_logprobs or 0) if req.logprobs else None
                    delta, finish = DeltaMessage(content=text), o.finish_reason
                    if shaped is not None:
                        delta, finish = shaped[o.index].next(o.text, o.finish_reason)
                        if delta is None and not lps:
                            continue  # held back (a tail that may begin a tag): sent with a later output
                        delta = delta or DeltaMessage()
                    choices.append(ChatChunkChoice(index=o.index, delta=delta, logprobs=logprobs,
                                                   finish_reason=finish))
            if choices:
                yield chunk(choices, usage([out]) if req.continuous_usage else None)
    if req.include_usage and run.last_out is not None:
        yield chunk([], usage([run.last_out]))


def echo_logprobs(out: RequestOutput, token_str) -> CompletionLogprobs:
    """echo with logprobs: the prompt's tokens first, each with its logprob given those before it (the first
    token has none), text offsets from 0. token_str: ids -> token strings (the tokenizer's)."""
    lps = out.prompt_logprobs or []  # (none if the request ended before its prompt was computed)
    first = out.prompt_token_ids[0]
    return completion_logprobs([TokenLogprobs(Logprob(first, token_str([first])[0], None))] + lps[1:], 0)


def completion_response(req: CompletionRequest, finals: list[RequestOutput], prompt_texts: list[str] | None,
                        request_id: str, model: str, token_str=None) -> CompletionResponse:
    choices = []
    for p, final in enumerate(finals):
        prefix = prompt_texts[p] if prompt_texts else ""
        for o in final.outputs:
            lps = None
            if req.logprobs is not None:
                head = echo_logprobs(final, token_str) if prompt_texts else None
                lps = completion_logprobs(o.logprobs or [], len(prefix), head)
            choices.append(CompletionChoice(index=p * req.n + o.index, text=prefix + o.text, logprobs=lps,
                                            finish_reason=o.finish_reason, stop_reason=o.stop_reason))
    return CompletionResponse(id=request_id, model=model, choices=choices, usage=usage(finals))


async def stream_completion(req: CompletionRequest, runs: list[Run], prompt_texts: list[str] | None,
                            request_id: str, model: str, token_str=None) -> AsyncIterator[CompletionResponse]:
    created, n = int(time.time()), req.n
    sent = Deltas(len(runs) * n, prefixes=[t for t in prompt_texts for _ in range(n)] if prompt_texts else None)
    echoed = set()  # echo with logprobs: the choices whose prompt logprobs went out (with their first chunk)
    async with aclosing(merge(runs)) as outs:
        async for p, out in outs:
            choices = []
            for o in out.outputs:
                i = p * n + o.index
                if req.logprobs is not None and prompt_texts and out.prompt_logprobs is None:
                    continue  # echo with logprobs: the prompt's come first, once the engine has them (n > 1)
                if (d := sent.next(i, o.text, o.logprobs, o.finish_reason)) is not None:
                    text, lps, offset = d
                    logprobs = None
                    if req.logprobs is not None:
                        head = echo_logprobs(out, token_str) if prompt_texts and i not in echoed else None
                        echoed.add(i)
                        logprobs = completion_logprobs(lps, offset, head)
                    choices.append(CompletionChoice(index=i, text=text, logprobs=logprobs,
                                                    finish_reason=o.finish_reason))
            if choices:
                yield CompletionResponse(id=request_id, created=created, model=model, choices=choices,
                                         usage=usage([out]) if req.continuous_usage else None)
    if req.include_usage:
        yield CompletionResponse(id=request_id, created=created, model=model, choices=[],
                                 usage=usage([r.last_out for r in runs]))


class Deltas:
    """What each streamed choice has been sent so far; `next` returns what is new (text, logprobs,
    text offset of the first new token) or None when there is nothing to send."""

    def __init__(self, slots: int, prefixes: list[str] | None = None) -> None:
        self.chars, self.tokens, self.offset = [0] * slots, [0] * slots, [0] * slots
        self.done, self.prefixes = [False] * slots, list(prefixes) if prefixes else None

    def next(self, i: int, text: str, logprobs: list[TokenLogprobs] | None,
             finish_reason: str | None) -> tuple[str, list[TokenLogprobs], int] | None:
        if self.done[i]:
            return None
        prefix = self.prefixes[i] if self.prefixes else ""  # echo: the prompt goes first
        delta, lps = prefix + text[self.chars[i]:], (logprobs or [])[self.tokens[i]:]
        if not delta and not lps and finish_reason is None:
            return None
        if self.prefixes:
            self.prefixes[i] = ""
        offset = self.offset[i] + len(prefix)
        self.chars[i], self.tokens[i] = len(text), self.tokens[i] + len(lps)
        self.offset[i] = offset + sum(len(t.chosen.token) for t in lps)
        self.done[i] = finish_reason is not None
        return delta, lps, offset
