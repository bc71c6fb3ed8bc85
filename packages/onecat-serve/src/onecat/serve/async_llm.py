"""AsyncLLM: the engine on a background thread, fed and drained from asyncio.

The engine thread owns the engine: requests and aborts reach it through a queue, and each
step's outputs go back to the awaiting coroutines with loop.call_soon_threadsafe. A consumer
that stops iterating (a client that went away) aborts its request, freeing its KV blocks.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from typing import AsyncIterator

from .config import EngineConfig
from .engine import LLMEngine
from .outputs import RequestOutput
from .sampling_params import SamplingParams

log = logging.getLogger(__name__)


class EngineDead(RuntimeError):
    """The engine thread stopped on something a step's error handling does not catch: nothing can be served."""

    def __init__(self, message: str = "the engine thread stopped; restart the server") -> None:
        super().__init__(message)


def _settle(loop: asyncio.AbstractEventLoop, done: asyncio.Future, value, failed: bool) -> None:
    """From the engine thread: an on_engine call's future gets its result (or exception) on the caller's loop."""
    settle = (lambda: done.done() or done.set_exception(value)) if failed else \
        (lambda: done.done() or done.set_result(value))
    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the caller's loop is closed: nobody waits
        pass


class AsyncLLM:
    def __init__(self, engine: LLMEngine):
        self.engine = engine
        self.tokenizer = engine.tokenizer
        self.model_name = engine.model_name
        self.max_model_len = engine.max_model_len
        self.device = str(engine.runner.device)
        self.dtype = str(engine.runner.dtype).removeprefix("torch.")
        self._inbox: queue.Queue = queue.Queue()
        self._streams: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._stats: dict = engine.stats()
        self.error: BaseException | None = None
        self._dead = False  # the engine thread stopped on its own (healthy())

    @classmethod
    def from_config(cls, config: EngineConfig, progress: bool = True) -> "AsyncLLM":
        return cls(LLMEngine(config, progress=progress))

    def route_report(self) -> list[dict]:
        return self.engine.runner.route_report()

    def stats(self) -> dict:
        return dict(self._stats)

    def healthy(self) -> bool:
        """False once the engine thread has died (a step's exceptions are caught and fail only their requests;
        this is for what escapes that: the server can no longer answer, and /health says so)."""
        return not self._dead

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="onecat-engine", daemon=True)
            self._thread.start()

    async def shutdown(self) -> None:
        self._stop.set()
        self._inbox.put(("wake",))
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join, 30)
            self._thread = None

    # -- requests -----------------------------------------------------------------------------
    async def generate(self, prompt: str | list[int], params: SamplingParams, request_id: str,
                       priority: int = 0) -> AsyncIterator[RequestOutput]:
        self._check_alive()
        self.engine.check_priority(priority)
        ids = self.engine.check_request(prompt, params)  # validates before anything is queued
        q: asyncio.Queue = asyncio.Queue()
        if request_id in self._streams:
            raise ValueError(f"request id {request_id!r} is already in use")
        self._streams[request_id] = (asyncio.get_running_loop(), q)
        self.start()
        self._inbox.put(("add", request_id, ids, params, priority))
        finished = False
        try:
            while True:
                item = await q.get()
                if isinstance(item, BaseException):
                    raise item
                finished = item.finished
                yield item
                if finished:
                    break
        finally:
            self._streams.pop(request_id, None)
            if not finished:
                self.abort(request_id)

    def _check_alive(self) -> None:
        if not self.healthy():
            raise EngineDead()
        if self.error is not None:
            raise RuntimeError(f"the engine stopped after an error: {self.error}")

    def abort(self, request_id: str) -> None:
        self._inbox.put(("abort", request_id))

    async def on_engine(self, fn):
        """fn(engine)'s result, run on the engine thread between steps (work that must not race a step)."""
        self._check_alive()
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self.start()
        self._inbox.put(("call", fn, loop, done))
        return await done

    # -- the engine thread --------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            self._steps()
        finally:
            if not self._stop.is_set():  # died: whoever waits gets an error instead of waiting forever
                self._dead = True
                log.error("the engine thread stopped")
                dead = EngineDead()
                for rid in list(self._streams):
                    self._deliver(rid, dead)
                while True:
                    try:
                        item = self._inbox.get_nowait()
                    except queue.Empty:
                        break
                    if item[0] == "add":
                        self._deliver(item[1], dead)
                    elif item[0] == "call":
                        _settle(item[2], item[3], dead, failed=True)

    def _steps(self) -> None:
        eng = self.engine
        while not self._stop.is_set():
            try:
                self._drain(block=not eng.has_unfinished_requests())
                if eng.has_unfinished_requests():
                    for out in eng.step():
                        self._deliver(out.request_id, out)
                self._stats = eng.stats()
            except Exception as e:  # a failed step fails every request in flight, loudly
                log.exception("engine step failed")
                self.error = e
                for rid in list(eng.groups):
                    eng.abort_request(rid)
                for rid in list(self._streams):
                    self._deliver(rid, RuntimeError(f"engine error: {e}"))
                self._stats = eng.stats()
                self.error = None  # the engine is whole again (every request freed)

    def _drain(self, block: bool) -> None:
        items = []
        if block:
            items.append(self._inbox.get())
        while True:
            try:
                items.append(self._inbox.get_nowait())
            except queue.Empty:
                break
        for item in items:
            if item[0] == "add":
                _, rid, ids, params, priority = item
                try:
                    self.engine.add_request(rid, ids, params, priority=priority)
                except Exception as e:
                    self._deliver(rid, e)
            elif item[0] == "abort":
                self.engine.abort_request(item[1])
            elif item[0] == "call":
                _, fn, loop, done = item
                try:
                    result, failed = fn(self.engine), False
                except Exception as e:  # the caller's error (a bad input), not the engine's
                    result, failed = e, True
                _settle(loop, done, result, failed)

    def _deliver(self, request_id: str, item) -> None:
        stream = self._streams.get(request_id)
        if stream is not None:
            loop, q = stream
            try:
                loop.call_soon_threadsafe(q.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                self.engine.abort_request(request_id)
