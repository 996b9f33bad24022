"""What a route needs: the store, and the caller the authentication middleware established."""

from __future__ import annotations

from fastapi import Request

from ..engine import Memory
from ..scopes import Caller


def memory(request: Request) -> Memory:
    return request.app.state.mem


def caller(request: Request) -> Caller:
    return request.state.caller
