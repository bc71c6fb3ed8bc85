"""The online client against a malformed endpoint: a tiny local HTTP server that answers each
request by its prompt (a good stream, garbage, a 500, a stall past the timeout, a stream cut
before [DONE], HTML instead of an event stream). Every failure is recorded on its request; the
run completes and its metrics come from the requests that succeeded."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from onecat.bench.online import run_online
from onecat.bench.results import aggregate

GOOD = [{"choices": [{"index": 0, "text": t, "finish_reason": None}]} for t in ("Hello", ",", " world")]
DONE = [{"choices": [{"index": 0, "text": "", "finish_reason": "length"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, ctype: str, chunks: list[bytes], pause: float = 0.0) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for c in chunks:
                self.wfile.write(c)
                self.wfile.flush()
                time.sleep(pause)
        except OSError:  # the client gave up (timeout test)
            pass
        self.close_connection = True

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = body["prompt"]
        sse = [f"data: {json.dumps(c)}\n\n".encode() for c in GOOD]
        if mode == "ok":
            self._send(200, "text/event-stream", sse + [f"data: {json.dumps(c)}\n\n".encode() for c in DONE]
                       + [b"data: [DONE]\n\n"], pause=0.01)
        elif mode == "garbage":
            self._send(200, "text/event-stream", [b"data: {this is not json\n\n"])
        elif mode == "500":
            self._send(500, "application/json", [b'{"error": {"message": "boom"}}'])
        elif mode == "sleep":
            time.sleep(3.0)
            self._send(200, "text/event-stream", sse)
        elif mode == "cut":
            self._send(200, "text/event-stream", sse[:1])
        elif mode == "html":
            self._send(200, "text/html", [b"<html>hello</html>"])
        elif mode == "error-chunk":
            self._send(200, "text/event-stream", sse[:1] + [b'data: {"error": {"message": "engine died"}}\n\n'])


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


MODES = ["ok", "garbage", "500", "sleep", "cut", "html", "error-chunk", "ok"]


def test_each_failure_is_recorded_per_request_and_the_run_completes(endpoint):
    t = time.perf_counter()
    results, wall = run_online(endpoint, MODES, max_tokens=3, concurrency=4, timeout=1.0)
    assert time.perf_counter() - t < 10  # the stalled request was cut at its timeout
    by = {m: r for m, r in zip(MODES, results)}
    assert [r.index for r in results] == list(range(len(MODES)))
    for r in (results[0], results[-1]):
        assert r.ok, r.error
        assert r.output_tokens == 3 and not r.tokens_estimated  # from the usage chunk
        assert r.prompt_tokens == 5 and r.finish_reason == "length"
        assert 0 < r.ttft <= r.e2e and len(r.itl) == 2 and r.tpot is not None
    assert by["garbage"].error_kind == "malformed" and "not JSON" in by["garbage"].error
    assert by["500"].error_kind == "http" and "HTTP 500" in by["500"].error and "boom" in by["500"].error
    assert by["sleep"].error_kind == "timeout"
    assert by["cut"].error_kind == "malformed" and "[DONE]" in by["cut"].error
    assert by["html"].error_kind == "malformed" and "text/html" in by["html"].error
    assert by["error-chunk"].error_kind == "server" and "engine died" in by["error-chunk"].error

    metrics, errors = aggregate([(results, wall)])
    assert errors["count"] == 6 and errors["of"] == 8
    assert errors["by_kind"] == {"malformed": 3, "http": 1, "timeout": 1, "server": 1}
    assert metrics["failed_requests"].median == 6
    assert metrics["success_rate"].median == pytest.approx(0.25)
    assert metrics["ttft"].n == 2 and metrics["output_throughput"].median > 0


def test_refused_connection_is_recorded_not_raised():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    results, _ = run_online(f"http://127.0.0.1:{port}", ["a", "b"], max_tokens=2, timeout=5.0)
    assert all(r.error_kind == "connection" for r in results)
    metrics, errors = aggregate([(results, 1.0)])
    assert errors["count"] == 2 and "ttft" not in metrics
