"""The API's description (`/openapi.json`): what each operation answers, its errors included, and who may call it.

A route declares the errors of its own work with `errors(...)`; those every authenticated request
can meet at the door (400, 401, 403, 503; 413 with a body) and 422 (FastAPI's validation, which we
answer in our shape) are added here, once, so every error a route gives is documented with the body
it really has: `{"error": {"code", "message"}}`.

Operation ids are the route functions' names (`add_memory`, `memory_recall`), snake_case like
every name of ours, so a generated client's methods read like the Python API's.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic.json_schema import models_json_schema

from ..errors import (
    AuthError,
    ClawrecallError,
    ErrorBody,
    ForbiddenError,
    InvalidRequestError,
    PayloadTooLargeError,
    ShuttingDownError,
    StorageError,
    ValidationError,
)
from .middleware import PUBLIC_PATHS

# A refusal without an exception class of its own: (status, code).
Refusal = type[ClawrecallError] | tuple[int, str]
UNSUPPORTED_MEDIA_TYPE: tuple[int, str] = (415, "unsupported_media_type")


def errors(*refusals: Refusal) -> dict[int | str, dict[str, Any]]:
    """A route's `responses` for the errors of its own work: one per status, naming the codes it may carry."""
    codes: dict[int, list[str]] = defaultdict(list)
    for refusal in refusals:
        status, code = refusal if isinstance(refusal, tuple) else (refusal.status, refusal.code)
        codes[status].append(code)
    return {
        status: {"model": ErrorBody, "description": ", ".join(f"`{c}`" for c in sorted(set(named)))}
        for status, named in sorted(codes.items())
    }


# Every authenticated request: the token (401), identity headers naming someone else or not
# decodable (403, 400), the token table unreadable or the store closing (503).
_DOOR = errors(AuthError, ForbiddenError, StorageError, ShuttingDownError, ValidationError)
_BODY = errors(PayloadTooLargeError)
_INVALID = errors(InvalidRequestError)


def operation_id(route: APIRoute) -> str:
    return route.name


def describe(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema with the bearer token declared and every operation's door errors in our error shape."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {})
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        schema["security"] = [{"bearer": []}]
        _, defs = models_json_schema([(ErrorBody, "serialization")], ref_template="#/components/schemas/{model}")
        components.setdefault("schemas", {}).update(defs["$defs"])
        for name in ("HTTPValidationError", "ValidationError"):  # FastAPI's 422 body, which we never send
            components["schemas"].pop(name, None)
        for path, operations in schema["paths"].items():
            for operation in operations.values():
                _complete(operation, public=path in PUBLIC_PATHS)
        app.openapi_schema = schema
    return app.openapi_schema


def _complete(operation: dict[str, Any], *, public: bool) -> None:
    responses = operation.setdefault("responses", {})
    if public:
        operation["security"] = []  # no token needed (or checked)
        door: dict[int | str, dict[str, Any]] = {}
    else:
        door = dict(_DOOR)
        if "requestBody" in operation:
            door.update(_BODY)
    if "422" in responses:  # FastAPI validates this operation's parameters or body
        door.update(_INVALID)
    for status, response in door.items():
        described = responses.get(str(status))
        if described is None or "HTTPValidationError" in str(described):
            responses[str(status)] = _error_response(response["description"])
        else:  # the route's own codes for this status, and the door's
            described["description"] = _merge(described.get("description", ""), response["description"])
    for status, described in responses.items():  # an error is JSON, whatever the route answers (JSONL export)
        if status[0] in "45":
            described["content"] = {"application/json": {"schema": error_schema()}}


def error_schema() -> dict[str, str]:
    return {"$ref": "#/components/schemas/ErrorBody"}


def _error_response(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": error_schema()}}}


def _merge(*descriptions: str) -> str:
    codes: set[str] = set()
    for d in descriptions:
        codes.update(c.strip() for c in d.split(",") if c.strip())
    return ", ".join(sorted(codes))

