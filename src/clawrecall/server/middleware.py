"""ASGI middleware around every route, the MCP endpoint included: access log, body size limit, authentication,
JSON without NaN or Infinity."""

from __future__ import annotations

import json
import logging
import time

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..auth import Authenticator
from ..errors import ClawrecallError, PayloadTooLargeError, ValidationError
from .errors import error_response

access_log = logging.getLogger("clawrecall.access")

# Readable without a token: liveness, readiness, and the API's own description with its page assets.
PUBLIC_PATHS = frozenset({"/health", "/ready", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
PUBLIC_PREFIX = "/docs/assets/"


class AccessLog:
    """One structured line per request: method, path, status, milliseconds, and who asked."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = [500]

        async def record_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            caller = scope.get("state", {}).get("caller")
            access_log.log(
                logging.DEBUG if scope["path"] in ("/health", "/ready") else logging.INFO,
                "request",
                extra={
                    "method": scope["method"], "path": scope["path"], "status": status[0],
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                    "user": getattr(caller, "user_id", None), "agent": getattr(caller, "agent_id", None),
                },
            )


class BodyLimit:
    """413 for a body over `max_bytes`: at once from Content-Length, or as soon as a streamed body passes it.

    A route that reads its body through FastAPI's parsing never lets the error reach here (FastAPI
    answers any failed read with its own 400), so once the limit is passed the app's answer is
    dropped and the 413 sent in its place.
    """

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._too_large(scope, receive, send)
        received = 0
        exceeded = started = False

        async def limited_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    exceeded = True
                    raise PayloadTooLargeError(self._message())
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if exceeded and not started:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except PayloadTooLargeError:
            if started:
                raise
        if exceeded and not started:
            await self._too_large(scope, receive, send)

    def _message(self) -> str:
        return f"request body is larger than the limit of {self.max_bytes} bytes"

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await error_response(PayloadTooLargeError(self._message()))(scope, receive, send)


class Authenticate:
    """Turns the request's credentials into the `Caller` every route and tool call uses."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator):
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIX):
            return await self.app(scope, receive, send)
        try:
            caller = self.authenticator.authenticate(Headers(scope=scope))
        except ClawrecallError as exc:
            return await error_response(exc)(scope, receive, send)
        scope.setdefault("state", {})["caller"] = caller
        await self.app(scope, receive, send)


class FiniteJson:
    """400 for a JSON body holding `NaN`, `Infinity` or `-Infinity`: Python's parser reads them though JSON has
    no such numbers, and a NaN compares false with every bound a later check sets. Only a body that spells
    one of them is parsed here (the route parses it again); its bytes are replayed to the app."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        messages: list[Message] = []
        while True:  # within BodyLimit: a body over the limit raises here
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
        if (b"NaN" in body or b"Infinity" in body) and _non_finite(body):
            error = ValidationError("the JSON body holds NaN or Infinity, which JSON has no numbers for")
            return await error_response(error)(scope, receive, send)

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _non_finite(body: bytes) -> bool:
    """Whether the body parses as JSON only with a NaN or an Infinity in it (a string that says one is fine)."""
    found: list[str] = []
    try:
        json.loads(body, parse_constant=found.append)
    except ValueError:  # not JSON at all: the route answers that
        pass
    return bool(found)
