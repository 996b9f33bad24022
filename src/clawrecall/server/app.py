"""`clawrecall serve`: REST, MCP (streamable HTTP), hooks and E5-compatible embeddings in one process.

    /v1/memories…, /v1/search, /v1/context, /v1/stats   REST over the engine (memories.py)
    /v1/conversations…                                   the conversation record (conversations.py)
    /v1/erase, /v1/memories/delete-bulk, /v1/startup…    erasure, bulk soft delete, startup entries (people.py)
    /v1/tools, /v1/tools/{name}                          the tool layer (tool_routes.py)
    /v1/hooks/{before_prompt_build,startup,agent_end}    lifecycle hooks (hooks.py)
    /v1/import/markdown                                  an agent's Markdown memory files (imports.py)
    /v1/files, /v1/files/{id}                            ingested files: Markdown, text, code, PDF (files.py)
    /v1/jobs, /v1/jobs/{id}[/retry|/cancel]              background jobs (jobs.py); their workers run here too
    /v1/insight/{searches,popular,unanswered,recalled,never-recalled,coverage,memories/{id}/recalls|why}  insight (insight.py)
    /v1/events                                           memory changes as they commit, Server-Sent Events (events.py)
    /mcp                                                 MCP streamable HTTP (mcp.py)
    /embed, /batch, /health                              the E5 server API (embed.py; /health here)
    /ready                                               readiness: 503 until the embedding model is loaded
    /openapi.json, /docs, /redoc                         the API's description (openapi.py, docs.py)
    /ui                                                  the dashboard: browse, search and correct memory (ui/)

Every request but `/health`, `/ready` and the API description is authenticated (auth.py; the
dashboard by its own sign-in cookie);
blocking engine calls run in the thread pool.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from contextlib import asynccontextmanager
from types import FrameType
from typing import AsyncIterator, Callable, Literal

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.routing import Route

from .. import __version__
from ..auth import Authenticator, TokenStore, is_loopback
from ..engine import Memory
from ..errors import ConfigError
from . import conversations, embed, events, files, imports, insight, jobs, memories, people, ui
from .docs import install_docs
from .errors import error_body, install_error_handlers
from .hooks import router as hooks_router
from .logs import configure_logging
from .mcp import mcp_http
from .middleware import AccessLog, Authenticate, BodyLimit, FiniteJson
from .openapi import describe, error_schema, errors, operation_id
from .tool_routes import tool_router
from .warmup import ModelWarmup

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765  # seed 000's E5 server port, so its clients find the embedding API where they expect it
DEFAULT_MAX_BODY = 1 << 20
CAPTURE_DRAIN_S = 10.0
SWEEP_S = 30.0
BACKUP_CHECK_S = 600.0  # how often the server looks whether a scheduled backup is due (backups.every_hours)

log = logging.getLogger("clawrecall.server")


class StoreInfo(BaseModel):
    backend: str
    embedding: str | None = Field(description="The model that made the stored vectors, if any are stored.")


class Health(BaseModel):
    """Liveness (the E5 server's `status`, `model`, `dimension`), and the model's and the store's state."""

    status: Literal["ok", "idle", "loading", "failed"] = Field(
        description="`ok` once the embedding model is loaded; `loading` while it loads (the server answers meanwhile)."
    )
    model: str
    dimension: int
    provider: str
    store: StoreInfo
    writes: bool
    version: str
    error: str | None = Field(None, description="Why the model failed to load (`status: failed`).")


class Ready(BaseModel):
    ready: Literal[True]
    model: str


_HEALTH_503 = {
    "description": "The model failed to load (`status: failed`), or the store cannot be read (`storage_error`).",
    "content": {"application/json": {"schema": {"anyOf": [{"$ref": "#/components/schemas/Health"}, error_schema()]}}},
}


def create_app(
    mem: Memory, *, tokens: TokenStore, allow_anonymous: bool = False, max_body_bytes: int = DEFAULT_MAX_BODY
) -> FastAPI:
    """The whole server as one ASGI app over an open store.

    `allow_anonymous` lets requests without a token in while no token exists (a loopback-only server).
    """
    warmup = ModelWarmup(mem)
    mcp_endpoint, mcp_sessions = mcp_http(mem)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warmup.start()
        sweeps = asyncio.create_task(_sweep_every(mem, SWEEP_S))
        backups = asyncio.create_task(_backup_every(mem, BACKUP_CHECK_S)) if mem.config.backups.dir else None
        if mem.upkeep.handlers().jobs:  # a feature that makes jobs (extraction) registered its handlers
            mem.upkeep.start_workers()
        async with mcp_sessions.run():
            yield
        sweeps.cancel()
        if backups is not None:
            backups.cancel()
        await asyncio.to_thread(mem.upkeep.stop_workers)  # each finishes the job it is running
        if not mem.upkeep.runtime.drain(CAPTURE_DRAIN_S):
            log.warning("background work (capture writes) still running at shutdown")

    app = FastAPI(
        title="clawrecall", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
        description="Long-term memory for AI agents: REST, agent tools, lifecycle hooks and embeddings.",
        generate_unique_id_function=operation_id,
    )
    app.state.mem = mem
    install_error_handlers(app)
    install_docs(app)
    app.include_router(memories.router)
    app.include_router(conversations.router)
    app.include_router(people.router)
    app.include_router(tool_router(mem))
    app.include_router(hooks_router)
    app.include_router(imports.router)
    app.include_router(files.router)
    app.include_router(jobs.router)
    app.include_router(insight.router)
    app.include_router(events.router)
    app.include_router(embed.router)

    @app.get("/health", tags=["operations"], response_model=Health, responses={503: _HEALTH_503})
    def health() -> Health | JSONResponse:
        """Liveness, E5-style: 200 while the server runs, the model loading included (`status: loading`);
        503 when the model failed to load (`status: failed`) or the store cannot be read. Needs no token."""
        provider, model, dimension = mem.upkeep.configured_fingerprint()
        stored = mem.upkeep.stored_fingerprint()  # reads the store: a broken database fails here
        body = Health(
            status="ok" if warmup.state == "ready" else warmup.state, model=model,
            dimension=mem.upkeep.embedder.dimensions or dimension, provider=provider,
            store=StoreInfo(backend=mem.upkeep.backend, embedding=str(stored) if stored else None),
            writes=mem.config.writes.enabled, version=__version__, error=warmup.error,
        )
        if warmup.state == "failed":
            return JSONResponse(body.model_dump(mode="json"), status_code=503)
        return body

    @app.get("/ready", tags=["operations"], response_model=Ready, responses=errors((503, "not_ready")))
    def ready() -> Ready | JSONResponse:
        """Readiness: 200 once the embedding model is loaded, so searches and writes answer without waiting for it;
        503 `not_ready` while it loads or after it failed to. Needs no token."""
        if warmup.state != "ready":
            said = f"the embedding model is {warmup.state}" + (f": {warmup.error}" if warmup.error else "")
            return JSONResponse(error_body("not_ready", said), status_code=503)
        return Ready(ready=True, model=mem.upkeep.embedder.model)

    # no GET: a stateless server sends nothing unasked, so the event stream GET opens would never close
    app.router.routes.append(Route("/mcp", endpoint=mcp_endpoint, methods=["POST", "DELETE"]))
    authenticator = Authenticator(tokens, allow_anonymous=allow_anonymous)
    ui.install(app, authenticator)
    app.add_middleware(FiniteJson)
    app.add_middleware(Authenticate, authenticator=authenticator)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(AccessLog)
    app.openapi = lambda: describe(app)  # type: ignore[method-assign]
    return app


async def _sweep_every(mem: Memory, seconds: float) -> None:
    """At start and then every `seconds`: close the segments whose pause has passed (those that should
    have closed while the server was down first) and embed what is waiting for a vector."""
    while True:
        try:
            await asyncio.to_thread(mem.upkeep.sweep)
        except Exception:  # a failed sweep is retried at the next; serving goes on
            log.exception("record sweep failed")
        await asyncio.sleep(seconds)


async def _backup_every(mem: Memory, seconds: float) -> None:
    """At start and then every `seconds`: the scheduled backup, if one is due (`backups.dir`)."""
    while True:
        try:
            if (taken := await asyncio.to_thread(mem.upkeep.scheduled_backup)) is not None:
                log.info("backup written to %s (%d bytes)", taken.path, taken.bytes)
        except Exception:  # retried at the next look; serving goes on
            log.exception("scheduled backup failed")
        await asyncio.sleep(seconds)


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket that says it is TCP (`IPPROTO_TCP`): asyncio turns Nagle off only on
    connections from such a socket, and with Nagle on, a response's body waited for the client's
    delayed ACK of its headers (40 ms per request on Linux)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:  # the options socket.create_server sets
        if os.name not in ("nt", "cygwin"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen()
    except OSError:
        sock.close()
        raise
    return sock


def serve(
    mem: Memory, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, max_body_bytes: int = DEFAULT_MAX_BODY,
    log_level: str = "info", listening: Callable[[str], None] | None = None,
) -> None:
    """Run the server until interrupted. Off loopback a token must exist: nothing public is served unauthenticated.

    `listening` is told the server's URL once its socket is bound."""
    import uvicorn

    tokens = TokenStore.for_memory(mem)
    loopback = is_loopback(host)
    if not loopback and not tokens.any_active():
        raise ConfigError(
            f"refusing to listen on {host} without API tokens: create one with `clawrecall token create`, "
            f"or listen on {DEFAULT_HOST}"
        )
    try:  # bound here, not by uvicorn, so that a taken port is one clear error and exit 1
        sock = listen(host, port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {os.strerror(exc.errno) if exc.errno else exc}") from None
    configure_logging(log_level)
    app = create_app(mem, tokens=tokens, allow_anonymous=loopback, max_body_bytes=max_body_bytes)
    auth = not loopback or tokens.any_active()
    bound = sock.getsockname()[1]
    log.info("serving", extra={"host": host, "port": bound, "db": mem.upkeep.location, "auth": auth})
    if listening is not None:
        listening(f"http://{f'[{host}]' if ':' in host else host}:{bound}")
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, log_level=log_level)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            mem.upkeep.close_feeds()  # open event streams end: uvicorn waits for every response to finish
            super().handle_exit(sig, frame)

    with sock:
        Server(config).run(sockets=[sock])
