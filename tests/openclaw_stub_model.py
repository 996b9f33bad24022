"""A scripted OpenAI-compatible chat model on 127.0.0.1, for driving real OpenClaw agent turns.

The script is in the prompt: every `[call NAME {json}]` in the turn's user text becomes one tool
call, in order, each after the previous one's result came back; then the model answers
`done` followed by the tool results it saw. Every request body is recorded, so a test can read
exactly what OpenClaw sent the model (the recall block, the tool results). Streams (OpenClaw
always asks for `stream: true`) and plain JSON answers are both spoken.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CALL = re.compile(r"\[call (\w+) (\{.*?\})\]")
# what a plugin prepended to the user's words: recalled text is data, never the script
INJECTED = re.compile(r"<relevant-memories>.*?</relevant-memories>", re.DOTALL)


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def script_text(message: dict[str, Any]) -> str:
    return INJECTED.sub("", message_text(message))


def next_step(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """("call", {name, arguments}) for the next scripted tool call, else ("text", {text})."""
    last_call = max((i for i, m in enumerate(messages) if m.get("role") == "user" and CALL.search(script_text(m))),
                    default=None)
    if last_call is None:
        return "text", {"text": "done"}
    script = CALL.findall(script_text(messages[last_call]))
    results = [message_text(m) for m in messages[last_call:] if m.get("role") == "tool"]
    if len(results) < len(script):
        name, arguments = script[len(results)]
        return "call", {"name": name, "arguments": arguments, "id": f"call_stub_{len(results) + 1}"}
    return "text", {"text": "done\n" + "\n---\n".join(results)}


class StubModel:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "StubModel":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)

    def take(self) -> list[dict[str, Any]]:
        """The requests recorded since the last take."""
        with self._lock:
            taken, self.requests = self.requests, []
        return taken


def _handler(model: StubModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._json({"object": "list", "data": [{"id": "m", "object": "model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            model.record(body)
            kind, step = next_step(body.get("messages", []))
            if body.get("stream"):
                self._stream(kind, step)
            else:
                self._json(_completion(kind, step))

        def _json(self, value: Any) -> None:
            data = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, kind: str, step: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            if kind == "call":
                delta: dict[str, Any] = {"role": "assistant", "tool_calls": [{
                    "index": 0, "id": step["id"], "type": "function",
                    "function": {"name": step["name"], "arguments": step["arguments"]},
                }]}
                finish = "tool_calls"
            else:
                delta, finish = {"role": "assistant", "content": step["text"]}, "stop"
            for choice in ({"index": 0, "delta": delta, "finish_reason": None},
                           {"index": 0, "delta": {}, "finish_reason": finish}):
                self._event({"id": "stub", "object": "chat.completion.chunk", "created": 0, "model": "m",
                             "choices": [choice]})
            self._event({"id": "stub", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [],
                         "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _event(self, value: Any) -> None:
            self.wfile.write(b"data: " + json.dumps(value).encode() + b"\n\n")

    return Handler


def _completion(kind: str, step: dict[str, Any]) -> dict[str, Any]:
    if kind == "call":
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [{
            "id": step["id"], "type": "function", "function": {"name": step["name"], "arguments": step["arguments"]},
        }]}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": step["text"]}, "stop"
    return {"id": "stub", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
