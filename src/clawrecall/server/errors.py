"""Every HTTP error is `{"error": {"code", "message"}}`: a `ClawrecallError` is served with its own `code` and `status`."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import AuthError, ClawrecallError, ErrorBody, InvalidRequestError, pydantic_message

log = logging.getLogger("clawrecall.server")

# Starlette's own HTTP errors (no route, wrong method…): the code each status is reported with.
CODE_BY_STATUS = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large", 415: "unsupported_media_type"}


error_body = ErrorBody.of


def error_response(exc: ClawrecallError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, AuthError) else None
    return JSONResponse(error_body(exc.code, str(exc)), status_code=exc.status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ClawrecallError)
    async def _deliberate(request: Request, exc: ClawrecallError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(InvalidRequestError(pydantic_message(exc)))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = CODE_BY_STATUS.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", exc_info=exc, extra={"path": request.url.path})
        return JSONResponse(error_body("internal_error", "internal server error"), status_code=500)
