"""Online benchmark: any OpenAI-compatible endpoint, streamed over httpx (async).

    onecat-bench online --base-url http://127.0.0.1:8000 --input-len 512 --output-len 128 \
        --concurrency 1 8 32 --out results.jsonl --report report.md --plots plots/

Each request streams (`stream: true`, usage requested); TTFT is send -> first content chunk,
ITL the gaps between content chunks, E2E send -> end of stream, TPOT (E2E - TTFT) / (tokens - 1)
with tokens from the reported usage (or counted chunks, flagged, when a server reports none).
Prompts are real text (pydoc_data.topics) cut to exact token counts with a local tokenizer and
sent as text (`--prompt-format text`, what every server takes) or as token ids (`tokens`).
Anything that goes wrong with one request (HTTP status, a body that is not an event stream, bad
JSON in a chunk, an error chunk, a stream cut before [DONE], a timeout, a refused connection) is
recorded on that request; the run always completes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import time

import httpx

from .contract import MEASURED, Machine, ModelInfo, Record, Runtime, Sampling, Workload
from .results import RequestResult, aggregate
from .workloads import Corpus, WorkloadSpec, add_sweep_args, arrival_offsets, make_prompts, sweep_points


class StreamError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


async def one_request(client: httpx.AsyncClient, url: str, body: dict, chat: bool, timeout: float,
                      result: RequestResult, t0: float, keep_text: bool = False) -> None:
    """Stream one request into `result` (times in s from t0). Never raises (except cancellation)."""
    start = time.perf_counter()
    result.start = start - t0
    chunks, text, last = 0, [], None
    try:
        async with asyncio.timeout(timeout):
            async with client.stream("POST", url, json=body) as resp:
                if resp.status_code != 200:
                    raw = (await resp.aread())[:300].decode("utf-8", "replace")
                    raise StreamError("http", f"HTTP {resp.status_code}: {raw.strip()}")
                ctype = resp.headers.get("content-type", "")
                if "text/event-stream" not in ctype:
                    raw = (await resp.aread())[:200].decode("utf-8", "replace")
                    raise StreamError("malformed", f"expected text/event-stream, got {ctype or 'no content-type'}: "
                                                   f"{raw.strip()!r}")
                done = False
                async for line in resp.aiter_lines():
                    line = line.strip()
                    if not line or line.startswith(":"):
                        continue
                    if not line.startswith("data:"):
                        if line.startswith(("event:", "id:", "retry:")):
                            continue
                        raise StreamError("malformed", f"not an SSE line: {line[:120]!r}")
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    try:
                        obj = json.loads(data)
                    except json.JSONDecodeError:
                        raise StreamError("malformed", f"chunk is not JSON: {data[:120]!r}") from None
                    if not isinstance(obj, dict):
                        raise StreamError("malformed", f"chunk is not a JSON object: {data[:120]!r}")
                    if "error" in obj:
                        err = obj["error"]
                        msg = err.get("message", err) if isinstance(err, dict) else err
                        raise StreamError("server", f"error chunk: {msg}")
                    now = time.perf_counter()
                    usage = obj.get("usage")
                    if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
                        result.output_tokens = int(usage["completion_tokens"])
                        result.prompt_tokens = usage.get("prompt_tokens", result.prompt_tokens)
                        details = usage.get("prompt_tokens_details") or {}
                        result.cached_tokens = details.get("cached_tokens")
                    choices = obj.get("choices")
                    if not isinstance(choices, list):
                        raise StreamError("malformed", f"chunk without a choices list: {data[:120]!r}")
                    for ch in choices:
                        piece = (ch.get("delta") or {}).get("content") if chat else ch.get("text")
                        if piece:
                            if result.ttft is None:
                                result.ttft = now - start
                            else:
                                result.itl.append(now - last)
                            last = now
                            chunks += 1
                            if keep_text:
                                text.append(piece)
                        if ch.get("finish_reason"):
                            result.finish_reason = ch["finish_reason"]
                if not done:
                    raise StreamError("malformed", "the stream ended before [DONE]")
        result.e2e = time.perf_counter() - start
        if not result.output_tokens:
            result.output_tokens, result.tokens_estimated = chunks, True
        if result.ttft is None:
            raise StreamError("malformed", "the stream carried no content")
    except StreamError as e:
        result.error, result.error_kind = str(e), e.kind
    except TimeoutError:
        result.error, result.error_kind = f"timeout after {timeout:g} s", "timeout"
    except httpx.TimeoutException as e:
        result.error, result.error_kind = f"timeout ({type(e).__name__})", "timeout"
    except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as e:
        result.error, result.error_kind = f"{type(e).__name__}: {e}", "connection"
    except Exception as e:  # anything else is still one request's failure
        result.error, result.error_kind = f"{type(e).__name__}: {e}", "other"
    if keep_text:
        result.text = "".join(text)


async def run_online_async(base_url: str, prompts: list, max_tokens: int, concurrency: int | None = None,
                           request_rate: float | None = None, seed: int = 0, model: str | None = None,
                           chat: bool = False, timeout: float = 120.0, api_key: str | None = None,
                           ignore_eos: bool = True, extra_body: dict | None = None, progress: bool = False,
                           desc: str = "online", keep_text: bool = False) -> tuple[list[RequestResult], float]:
    from tqdm.auto import tqdm

    url = base_url.rstrip("/") + ("/v1/chat/completions" if chat else "/v1/completions")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    offsets = arrival_offsets(len(prompts), request_rate, seed)
    results = [RequestResult(i, prompt_tokens=len(p) if isinstance(p, list) else None) for i, p in enumerate(prompts)]
    sem = asyncio.Semaphore(concurrency or len(prompts) or 1)
    limits = httpx.Limits(max_connections=max(concurrency or len(prompts), 1) + 4)
    bar = tqdm(total=len(prompts), desc=desc, unit="req", disable=None if progress else True, leave=False)

    def body_for(p) -> dict:
        b = {"max_tokens": max_tokens, "temperature": 0.0, "stream": True,
             "stream_options": {"include_usage": True}}
        if ignore_eos:
            b["ignore_eos"] = True  # vLLM/onecat extension; others ignore unknown fields
        if model:
            b["model"] = model
        if chat:
            b["messages"] = [{"role": "user", "content": p}]
        else:
            b["prompt"] = p
        return b | (extra_body or {})

    async with httpx.AsyncClient(headers=headers, limits=limits,
                                 timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0))) as client:
        t0 = time.perf_counter()

        async def go(i: int) -> None:
            delay = offsets[i] - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            async with sem:
                await one_request(client, url, body_for(prompts[i]), chat, timeout, results[i], t0, keep_text)
            bar.update(1)

        try:
            await asyncio.gather(*(go(i) for i in range(len(prompts))))
        finally:
            bar.close()
        wall = time.perf_counter() - t0
    return results, wall


def run_online(*args, **kw) -> tuple[list[RequestResult], float]:
    return asyncio.run(run_online_async(*args, **kw))


def server_info(base_url: str, api_key: str | None = None, timeout: float = 10.0) -> dict:
    """What /v1/models says (id, max_model_len), or the error; never raises."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(base_url.rstrip("/") + "/v1/models", headers=headers, timeout=timeout)
        r.raise_for_status()
        data = r.json()["data"]
        return {"model": data[0]["id"], "max_model_len": data[0].get("max_model_len"), "models": [d["id"] for d in data]}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def model_info_from_gguf(path: str) -> ModelInfo:
    """The served model's shape and format, read from the GGUF the server loaded (the client cannot
    see it otherwise)."""
    import os
    from collections import Counter

    from onecat.models.gguf_file import GGUFFile
    from onecat.models.registry import resolve_adapter

    f = GGUFFile(path)
    spec = resolve_adapter(f.architecture).spec_from_gguf(f)
    fmt = Counter(t.ggml_type for t in f.tensors.values()).most_common(1)[0][0]
    return ModelInfo.from_spec(spec, name=os.path.basename(path).removesuffix(".gguf"), source=path,
                               weight_format=f"gguf:{fmt}")


def bench_point(base_url: str, tokenizer, point: WorkloadSpec, repeats: int = 3, chat: bool = False,
                prompt_format: str = "text", timeout: float = 120.0, api_key: str | None = None,
                ignore_eos: bool = True, progress: bool = False, corpus: Corpus | None = None,
                engine_label: str | None = None, model_name: str | None = None, info: dict | None = None,
                model: ModelInfo | None = None, requests_out: list | None = None) -> Record:
    corpus = corpus or Corpus(tokenizer)
    info = info if info is not None else server_info(base_url, api_key)
    model_name = model_name or info.get("model")
    machine = Machine.current()
    runs = []
    for rep in range(repeats):
        ids = make_prompts(corpus, point.num_prompts, point.input_len, seed=point.prompt_seed(rep),
                           shared_prefix_len=point.shared_prefix_len)
        prompts = ids if (prompt_format == "tokens" and not chat) else [tokenizer.decode(p) for p in ids]
        res, wall = run_online(base_url, prompts, point.output_len, point.concurrency, point.request_rate,
                               seed=point.prompt_seed(rep), model=model_name, chat=chat, timeout=timeout,
                               api_key=api_key, ignore_eos=ignore_eos, progress=progress,
                               desc=f"in {point.input_len} out {point.output_len} conc {point.concurrency}")
        runs.append((res, wall))
        if requests_out is not None:
            requests_out.extend(dict(r.to_dict(), repeat=rep) for r in res)
    metrics, errors = aggregate(runs)
    route = "/v1/chat/completions" if chat else "/v1/completions"
    m = model or ModelInfo()
    m.name = m.name or model_name or "?"
    return Record(
        engine=engine_label or f"openai-compatible server ({base_url})", kind=MEASURED, metrics=metrics, model=m,
        workload=Workload(kind="online", dataset=f"pydoc_data.topics ({prompt_format} prompts)",
                          input_len=point.input_len, output_len=point.output_len, num_prompts=point.num_prompts,
                          concurrency=point.concurrency or point.num_prompts, request_rate=point.request_rate,
                          shared_prefix_len=point.shared_prefix_len, endpoint=base_url.rstrip("/") + route,
                          repeats=repeats),
        runtime=Runtime(prefix_cache="unknown (remote)", kv_dtype="unknown (remote)", graph_mode="unknown (remote)",
                        device="remote"),
        sampling=Sampling(temperature=0.0, workload_seed=point.seed, ignore_eos=ignore_eos, max_tokens=point.output_len),
        machine=machine, errors=errors,
        notes=("machine facts are the benchmark client's; the server's are its own. "
               + (f"server: {json.dumps(info)}" if info else "")))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="onecat-bench online", description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000 (without /v1)")
    ap.add_argument("--model-name", default=None, help="the model field to send (default: from /v1/models)")
    ap.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    ap.add_argument("--prompt-format", choices=["text", "tokens"], default="text")
    ap.add_argument("--tokenizer", default=None, help="GGUF whose tokenizer cuts the prompts (default: embedded SmolLM2)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per-request limit, s")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--engine-label", default=None, help="what to call the server in records")
    ap.add_argument("--model-gguf", default=None, help="the GGUF the server serves: records its shape and format")
    add_sweep_args(ap)
    a = ap.parse_args(argv)
    from onecat.models.loader import default_model_path
    from onecat.models.tokenizer import Tokenizer

    tok = Tokenizer.from_gguf(a.tokenizer or default_model_path())
    corpus = Corpus(tok)
    info = server_info(a.base_url, a.api_key)
    if "error" in info:
        print(f"warning: /v1/models failed ({info['error']}); running anyway")
    from .offline import one_line

    served = model_info_from_gguf(a.model_gguf) if a.model_gguf else None
    records, reqs = [], []
    for point in sweep_points(a):
        rec = bench_point(a.base_url, tok, point, a.repeats, chat=a.endpoint == "chat", prompt_format=a.prompt_format,
                          timeout=a.timeout, api_key=a.api_key, ignore_eos=not a.no_ignore_eos,
                          progress=not a.no_progress, corpus=corpus, engine_label=a.engine_label,
                          model_name=a.model_name, info=info, requests_out=reqs,
                          model=dataclasses.replace(served) if served else None)
        records.append(rec)
        print(one_line(rec), flush=True)
        for ex in rec.errors.get("examples", []):
            print(f"    error: {ex}")
    from .report import emit

    emit(records, a.out, a.report, a.plots, requests=reqs, requests_out=a.requests_out)


if __name__ == "__main__":
    main()
