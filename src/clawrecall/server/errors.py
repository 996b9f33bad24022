"""Every HTTP error is `{"error": {"code", "message"}}`, with the engine's stable code and a status that fits it."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import ClawrecallError

log = logging.getLogger("clawrecall.server")

STATUS_BY_CODE = {
    "invalid_input": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "scope_denied": 403,
    "writes_disabled": 403,
    "not_found": 404,
    "unknown_tool": 404,
    "ambiguous_id": 409,
    "payload_too_large": 413,
    "invalid_request": 422,
    "embedding_error": 503,
    "embedding_mismatch": 503,
    "storage_error": 503,
}
CODE_BY_STATUS = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large", 415: "unsupported_media_type"}


class PayloadTooLargeError(ClawrecallError):
    code = "payload_too_large"


def error_body(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": " ".join(message.split())}}


def error_response(code: str, message: str, status: int | None = None) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if code == "unauthenticated" else None
    return JSONResponse(error_body(code, message), status_code=status or STATUS_BY_CODE.get(code, 500), headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ClawrecallError)
    async def _deliberate(request: Request, exc: ClawrecallError) -> JSONResponse:
        return error_response(exc.code, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response("invalid_request", "; ".join(_describe(e) for e in exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(CODE_BY_STATUS.get(exc.status_code, "http_error"), str(exc.detail), exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", extra={"path": request.url.path})
        return error_response("internal_error", "internal server error", 500)


def _describe(error: dict) -> str:
    where = ".".join(str(p) for p in error.get("loc", ()))
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
