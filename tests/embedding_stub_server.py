"""A real HTTP server on 127.0.0.1 that answers like the embedding APIs clawrecall talks to.

It speaks the OpenAI/Voyage (`POST …/embeddings`), Ollama (`POST /api/embed`), Gemini
(`POST …/models/{m}:batchEmbedContents`) and E5-server (`POST /batch`, `GET /health`) shapes,
records every request, and can be told to misbehave (`mode`). Vectors are a hashed
bag-of-words: deterministic, and different texts get different vectors.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# ok | error500 | error500_text | badjson | short | slow | nan | zeros (the last two: garbage vectors, HTTP 200)
MODES = ("ok", "error500", "error500_text", "badjson", "short", "slow", "nan", "zeros")


def fake_embed(text: str, dim: int = 8) -> list[float]:
    """A hashed bag of words (unnormalised), plus a constant so no vector is all zeros."""
    vec = [0.0] * dim
    vec[0] = 0.25
    for token in text.lower().split():
        h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    return vec


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class StubEmbeddingServer:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.dim = 8
        self.model = "intfloat/multilingual-e5-large"  # what GET /health names
        self.mode = "ok"
        self.slow_s = 1.0
        self.failures: list[tuple[int, str | None]] = []  # answered first, in order: (status, Retry-After)
        self.retry_after: str | None = None  # the Retry-After of the answer being sent
        self.hold: threading.Event | None = None  # when set to an Event, embeddings are answered once it is set
        self.answered = 0  # embedding requests answered past `hold`
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "StubEmbeddingServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def posts(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.method == "POST"]

    def record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def answer(self, method: str, path: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
        """(status, body bytes) for one request, honouring `failures`, then `mode`."""
        if method == "GET" and path == "/health":
            return 200, _json({"status": "ok", "model": self.model, "dimension": self.dim})
        if self.hold is not None:
            self.hold.wait(60)
        with self._lock:
            self.answered += 1
            failure = self.failures.pop(0) if self.failures else None
        self.retry_after = failure[1] if failure is not None else None  # requests come one at a time in tests
        if failure is not None:
            return failure[0], _json({"error": {"message": f"try again later ({failure[0]})"}})
        if self.mode == "slow":
            time.sleep(self.slow_s)
        if self.mode == "error500":
            # Echo the credentials back, as some servers do, to prove clients scrub them.
            who = headers.get("authorization") or headers.get("x-goog-api-key") or "anonymous"
            return 500, _json({"error": {"message": f"model crashed while serving {who}", "type": "server_error"}})
        if self.mode == "error500_text":
            return 500, b"upstream exploded\nstack trace line 2\n"
        if self.mode == "badjson":
            return 200, b"<html>not json</html>"
        shape = _route(method, path)
        if shape is None:
            return 404, _json({"error": f"no route {method} {path}"})
        texts, dim = _texts_and_dim(shape, body, self.dim)
        vectors = [fake_embed(t, dim) for t in texts]
        if self.mode == "short":
            vectors = vectors[:-1]
        if self.mode in ("nan", "zeros"):
            vectors = [[float("nan") if self.mode == "nan" else 0.0] * len(v) for v in vectors]
        if shape in ("openai",):
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            data.reverse()  # real servers may answer out of order; clients must sort by index
            return 200, _json({"object": "list", "data": data, "model": body.get("model")})
        if shape == "gemini":
            return 200, _json({"embeddings": [{"values": v} for v in vectors]})
        return 200, _json({"embeddings": vectors})  # ollama, e5


def _route(method: str, path: str) -> str | None:
    if method != "POST":
        return None
    if path.endswith("/embeddings"):
        return "openai"  # OpenAI, OpenAI-compatible and Voyage
    if path == "/api/embed":
        return "ollama"
    if path.endswith(":batchEmbedContents"):
        return "gemini"
    if path == "/batch":
        return "e5"
    return None


def _texts_and_dim(shape: str, body: dict[str, Any], dim: int) -> tuple[list[str], int]:
    if shape == "openai":
        return list(body["input"]), int(body.get("dimensions") or dim)
    if shape == "ollama":
        return list(body["input"]), dim
    if shape == "gemini":
        reqs = body["requests"]
        return [r["content"]["parts"][0]["text"] for r in reqs], int(reqs[0].get("outputDimensionality") or dim)
    return list(body["texts"]), dim


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _make_handler(server: StubEmbeddingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as httpx pools connections

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            path = self.path.split("?", 1)[0]
            server.record(Recorded(self.command, path, headers, body))
            status, payload = server.answer(self.command, path, body, headers)
            self.send_response(status)
            if status >= 400 and server.retry_after is not None:
                self.send_header("Retry-After", server.retry_after)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            try:
                self.wfile.write(payload)
            except OSError:  # the client gave up (timeout test)
                pass

        do_GET = _handle
        do_POST = _handle

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler
