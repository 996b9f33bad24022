"""The MCP door (official `mcp` SDK, low-level server): the tool layer's tools, listed and called.

Served two ways: streamable HTTP at `/mcp` in `clawrecall serve` (the caller comes from the
bearer token, like every route), and stdio for `clawrecall mcp` (the caller comes from its
command line). Either way the handshake does not wait for the embedding model.
"""

from __future__ import annotations

import io
import sys

from typing import Any, Callable

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError as PydanticValidationError

from .. import __version__
from ..engine import Memory
from ..scopes import Caller
from ..errors import UnknownToolError
from ..tools import find_tool, tools_for
from .warmup import ModelWarmup

INSTRUCTIONS = (
    "Long-term memory across conversations. Recall (memory_recall or memory_search) before answering questions "
    "that depend on earlier sessions: the user's preferences, past decisions, people, projects. Store durable facts "
    "the user states (memory_store or memory_write) as short self-contained sentences."
)

Identify = Callable[[ServerRequestContext[Any, Any]], Caller]


def mcp_server(mem: Memory, identify: Identify) -> Server[Any]:
    """A server offering this store's tools; `identify` says who is calling for each request."""
    listed = [types.Tool.model_validate(t.listing(mem.config)) for t in tools_for(mem)]

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            tool = find_tool(mem, params.name)
        except UnknownToolError as exc:  # a protocol error, as MCP specifies; bad arguments are an error result
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        result = await anyio.to_thread.run_sync(tool.run, mem, identify(ctx), params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(text=result.text)], structured_content=result.details, is_error=result.is_error
        )

    return Server(
        "clawrecall", version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool
    )


def mcp_http(mem: Memory) -> tuple[StreamableHTTPASGIApp, StreamableHTTPSessionManager]:
    """The `/mcp` endpoint and the session manager whose `run()` must span the server's lifetime.

    Stateless: every request carries its own credentials (checked by the server's middleware, which
    puts the caller in the request state), so no MCP session outlives, or is shared across, them.
    """
    server = mcp_server(mem, _request_caller)
    manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)
    return StreamableHTTPASGIApp(manager), manager


def _request_caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    """The caller the middleware authenticated: every MCP request over HTTP has one."""
    if ctx.request is None:
        raise RuntimeError("an MCP request over HTTP without its HTTP request")
    return ctx.request.state.caller


def run_stdio(mem: Memory, caller: Caller) -> None:
    """Serve MCP on stdin/stdout as `caller` until the client closes stdin."""
    ModelWarmup(mem).start()
    server = mcp_server(mem, lambda ctx: caller)

    # Bytes that are not UTF-8 stay recognisable (as lone surrogates, which no message may hold), so
    # such a line is refused as REST and the CLI refuse it, instead of being stored with U+FFFD in it.
    stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape"))

    async def serve() -> None:
        async with stdio_server(stdin=stdin) as (read, write):
            send, receive = anyio.create_memory_object_stream[Any](0)
            answers, answered = anyio.create_memory_object_stream[Any](0)
            waiting = _Waiting()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_answer_unreadable_lines, read, send, write, waiting)
                tasks.start_soon(_relay_answers, answered, write, waiting)
                async with answers:  # the relay ends when the session does
                    await server.run(receive, answers, server.create_initialization_options())

    anyio.run(serve)


_DRAIN_S = 120.0  # after stdin's end, how long the requests still running may take


class _Waiting:
    """The ids of the requests not answered yet: stdin's end ends the session only once they are (the
    SDK's session cancels what is still running when its input ends, so `printf … | clawrecall mcp` lost them)."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()

    def answered(self, request_id: Any) -> None:
        self.ids.discard(request_id)

    async def drained(self) -> None:
        with anyio.move_on_after(_DRAIN_S):
            while self.ids:
                await anyio.sleep(0.01)


async def _relay_answers(answered: Any, write: Any, waiting: _Waiting) -> None:
    """The session's messages to stdout, noting the requests answered; stdout closes when the session ends."""
    async with answered, write:
        async for message in answered:
            if isinstance(message.message, (types.JSONRPCResponse, types.JSONRPCError)):
                waiting.answered(message.message.id)
            await write.send(message)


async def _answer_unreadable_lines(read: Any, forward: Any, write: Any, waiting: _Waiting) -> None:
    """Relay the client's messages; a line that is not one gets JSON-RPC's error reply (id null)
    instead of silence, so a client never waits for an answer that will not come."""
    async with forward:
        async for item in read:
            if not isinstance(item, Exception):
                if isinstance(item.message, types.JSONRPCRequest):
                    waiting.ids.add(item.message.id)
                await forward.send(item)
                continue
            parse = isinstance(item, PydanticValidationError) and any(
                e["type"] in ("json_invalid", "string_unicode") for e in item.errors()  # not JSON, or not UTF-8
            )
            code, message = (types.PARSE_ERROR, "Parse error") if parse else (types.INVALID_REQUEST, "Invalid Request")
            error = types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message))
            await write.send(SessionMessage(error))
        await waiting.drained()
