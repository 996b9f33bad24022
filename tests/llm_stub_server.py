"""A real HTTP server on 127.0.0.1 that answers like OpenAI's chat completions (`POST /v1/chat/completions`)
and Anthropic's Messages API (`POST /v1/messages`), from a script.

Each request takes the next entry of `script` (a list), else `default`. An entry is a dict, or a
callable that gets the `Recorded` request and returns one:

    {"json": {...}}                    the answer is this object (Anthropic: the forced tool's input,
                                       when the request offered a tool; else JSON text)
    {"text": "not json"}               the answer is this text
    {"refusal": "I can't"}             OpenAI: `message.refusal`; Anthropic: stop_reason `refusal`
    {"finish_reason": "content_filter"}  with json/text: the finish (stop) reason to report
    {"status": 429, "headers": {"Retry-After": "1"}, "message": "slow down"}   an error answer
    {"body": {...}}                    this JSON as the whole 200 answer (a server that answers oddly)
    {"delay": 5}                       wait this long first (combines with any of the above)

Every request is recorded (`requests`: path, headers, body) and its tokens counted. Tokens here are
whitespace-separated words: in, of every message's text plus the JSON of the schema sent
(`response_format` or `tools`); out, of the answer's text. Both go back in `usage` and add up in
`input_tokens` / `output_tokens`. `in_flight` / `max_in_flight` count requests being answered.

    with running_stub() as stub:
        stub.script.append({"json": {"facts": []}})
        ... base_url=stub.openai_base_url  (or stub.anthropic_base_url)
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

Entry = dict[str, Any]
Script = Entry | Callable[["Recorded"], Entry]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def schema(self) -> dict | None:
        """The JSON schema the request asked the answer to follow, in either API's shape."""
        fmt = self.body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return fmt["json_schema"]["schema"]
        tools = self.body.get("tools") or []
        return tools[0]["input_schema"] if tools else None

    @property
    def text(self) -> str:
        """Everything the request said, system and messages, in order."""
        system = self.body.get("system") or ""
        parts = [system] if isinstance(system, str) else [b.get("text", "") for b in system]
        for message in self.body.get("messages", []):
            content = message.get("content")
            parts.extend([content] if isinstance(content, str) else [b.get("text", "") for b in content or []])
        return "\n".join(p for p in parts if p)


def count_tokens(text: str) -> int:
    return len(text.split())


class StubLLMServer:
    def __init__(self) -> None:
        self.script: list[Script] = []
        self.default: Script = {"text": "ok"}
        self.model = "stub-model"
        self.requests: list[Recorded] = []
        self.input_tokens = 0
        self.output_tokens = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def start(self) -> "StubLLMServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, path: str, headers: dict[str, str], body: Any) -> tuple[int, dict[str, str], dict]:
        """(status, headers, JSON body) for one request."""
        request = Recorded(path, headers, body)
        with self._lock:
            self.requests.append(request)
            entry = self.script.pop(0) if self.script else self.default
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if callable(entry):
                entry = entry(request)
            if entry.get("delay"):
                self._stopping.wait(entry["delay"])
            shape = "anthropic" if path == "/v1/messages" else "openai" if path == "/v1/chat/completions" else None
            if shape is None:
                return 404, {}, {"error": {"message": f"no route {path}"}}
            if "status" in entry:
                return entry["status"], entry.get("headers", {}), _error(shape, entry)
            if "body" in entry:
                return 200, {}, entry["body"]
            return 200, {}, self._completion(shape, request, entry)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _completion(self, shape: str, request: Recorded, entry: Entry) -> dict:
        body = request.body
        answer = entry.get("json")
        text = json.dumps(answer) if "json" in entry else str(entry.get("text", ""))
        schema = request.schema
        tokens_in = count_tokens(request.text) + (count_tokens(json.dumps(schema)) if schema else 0)
        tokens_out = count_tokens(entry.get("refusal") or text)
        with self._lock:
            self.input_tokens += tokens_in
            self.output_tokens += tokens_out
        model = entry.get("model", self.model)
        if shape == "openai":
            message: dict[str, Any] = {"role": "assistant", "content": None if "refusal" in entry else text}
            if "refusal" in entry:
                message["refusal"] = entry["refusal"]
            return {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": entry.get("finish_reason", "stop")}],
                "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out},
            }
        tools = body.get("tools") or []
        if "refusal" in entry:
            content, stop = [{"type": "text", "text": entry["refusal"]}], "refusal"
        elif tools and "json" in entry:
            content = [{"type": "tool_use", "id": "toolu_stub", "name": tools[0]["name"], "input": answer}]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": text}], "end_turn"
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": entry.get("finish_reason", stop),
            "stop_sequence": None,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
        }


def _error(shape: str, entry: Entry) -> dict:
    message = entry.get("message", f"stub error {entry['status']}")
    if shape == "anthropic":
        return {"type": "error", "error": {"type": "api_error", "message": message}}
    return {"error": {"message": message, "type": "server_error" if entry["status"] >= 500 else "invalid_request_error"}}


def _make_handler(stub: StubLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, payload = stub.answer(self.path, headers, body)
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (a timeout under test)
                pass

    return Handler


@contextmanager
def running_stub() -> Iterator[StubLLMServer]:
    stub = StubLLMServer().start()
    try:
        yield stub
    finally:
        stub.stop()
