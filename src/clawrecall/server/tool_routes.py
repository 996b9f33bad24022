"""REST `/v1/tools`: the tool layer over HTTP, one route per tool, for runtimes that do not speak MCP.

A call answers 200 with the tool result (`content`, `details`, `isError`) whatever the tool
decided, exactly as MCP does, so an agent runtime can hand it to the model unchanged; only a
request that is not JSON, or no tool at all, is an HTTP error. The description of each route
types `details` as the tool's output schema, or the error body when `isError` is true.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, create_model

from ..engine import Memory
from ..errors import ErrorBody, ValidationError
from ..tools import Tool, find_tool, tools_for
from .deps import caller, memory
from .openapi import UNSUPPORTED_MEDIA_TYPE, errors


class TextBlock(BaseModel):
    type: Literal["text"]
    text: str


class Annotations(BaseModel):
    title: str
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


class ToolInfo(BaseModel):
    name: str
    title: str
    description: str
    inputSchema: dict[str, Any] = Field(description="The arguments' JSON schema.")
    outputSchema: dict[str, Any] = Field(description="The JSON schema of a successful result's `details`.")
    annotations: Annotations


class ToolList(BaseModel):
    tools: list[ToolInfo]


def tool_router(mem: Memory) -> APIRouter:
    router = APIRouter(prefix="/v1/tools", tags=["tools"])
    offered = tools_for(mem)
    listed = ToolList(tools=[ToolInfo.model_validate(t.listing(mem.config)) for t in offered])

    @router.get("")
    def list_tools() -> ToolList:
        """The tools offered, with model-facing descriptions, JSON schemas and annotations, as MCP lists them."""
        return listed

    for t in offered:
        router.add_api_route(
            f"/{t.name}", _endpoint(t), methods=["POST"], summary=t.label, description=t.description,
            name=t.name, responses={200: {"model": _result_model(t)}, **errors(ValidationError, UNSUPPORTED_MEDIA_TYPE)},
            openapi_extra={
                "requestBody": {"content": {"application/json": {"schema": t.input_schema(mem.config.categories)}}}
            },
        )

    @router.post("/{name}", include_in_schema=False)
    def unknown_tool(name: str) -> None:
        """After the tools' own routes: any other name is `unknown_tool`, naming those there are (as MCP says)."""
        find_tool(mem, name)  # raises: a tool offered has its own route above
        raise AssertionError(f"tool {name} has no route")

    return router


def _result_model(t: Tool) -> type[BaseModel]:
    """`{content, details, isError}` with `details` typed: the tool's own, or the error body."""
    name = "".join(part.title() for part in t.name.split("_")) + "Result"
    return create_model(
        name, content=(list[TextBlock], ...), details=(t.details | ErrorBody, ...),
        isError=(bool, ...),
    )


def _endpoint(t: Tool):
    async def call_tool(request: Request) -> JSONResponse:
        body = await request.body()
        if body.strip() and not _is_json(request.headers.get("content-type", "")):
            # a web page may POST text/plain or a form to 127.0.0.1 without asking first (no CORS
            # preflight): refusing every body that is not declared JSON keeps it from driving a tool
            raise HTTPException(UNSUPPORTED_MEDIA_TYPE[0], "send the tool's arguments as application/json")
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
