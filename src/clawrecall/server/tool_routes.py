"""REST `/v1/tools`: the tool layer over HTTP, one route per tool, for runtimes that do not speak MCP.

A call answers 200 with the tool result (`content`, `details`, `isError`) whatever the tool
decided, exactly as MCP does, so an agent runtime can hand it to the model unchanged; only a
request that is not JSON, or no tool at all, is an HTTP error.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ..engine import Memory
from ..errors import ValidationError
from ..tools import Tool, tools_for
from .deps import caller, memory


class TextBlock(BaseModel):
    type: str = "text"
    text: str


class ToolResponse(BaseModel):
    content: list[TextBlock]
    details: dict[str, Any]
    isError: bool


def tool_router(mem: Memory) -> APIRouter:
    router = APIRouter(prefix="/v1/tools", tags=["tools"])
    offered = tools_for(mem)
    categories = mem.config.categories

    @router.get("")
    def list_tools() -> dict[str, Any]:
        """The tools offered, with model-facing descriptions and JSON-schema arguments, as MCP lists them."""
        return {
            "tools": [
                {
                    "name": t.name, "title": t.label, "description": t.description,
                    "inputSchema": t.input_schema(categories),
                }
                for t in offered
            ]
        }

    for t in offered:
        router.add_api_route(
            f"/{t.name}", _endpoint(t), methods=["POST"], summary=t.label, description=t.description,
            name=t.name, responses={200: {"model": ToolResponse}},
            openapi_extra={
                "requestBody": {"content": {"application/json": {"schema": t.input_schema(categories)}}}
            },
        )
    return router


def _endpoint(t: Tool):
    async def call_tool(request: Request) -> JSONResponse:
        body = await request.body()
        if body.strip() and not _is_json(request.headers.get("content-type", "")):
            # a web page may POST text/plain or a form to 127.0.0.1 without asking first (no CORS
            # preflight): refusing every body that is not declared JSON keeps it from driving a tool
            raise HTTPException(415, "send the tool's arguments as application/json")
        try:
            arguments = json.loads(body) if body.strip() else {}
        except (ValueError, RecursionError):
            raise ValidationError("the request body is not valid JSON") from None
        result = await run_in_threadpool(t.run, memory(request), caller(request), arguments)
        return JSONResponse(result.to_json())

    return call_tool


def _is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))
