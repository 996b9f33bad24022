"""`/ui`: a dashboard to see, search and correct memory, server-rendered over the same engine calls as REST.

A person signs in with an API token; the cookie holds a signed reference to it (auth.py's
`session_ref`), never the secret, so the page acts with exactly that token's caller and scopes.
Every write goes through `Memory` (the one write path), so REST's refusals are the page's.
Forms carry a per-session CSRF token, and a POST must come from this server's own origin.
Pages are Jinja2 templates (autoescaped: memory text is untrusted), with one stylesheet and one
script from /ui/static and a Content-Security-Policy that allows nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, get_args
from urllib.parse import quote, urlencode, urlsplit

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.staticfiles import StaticFiles

from ..._time import parse_when, utcnow
from ...auth import Authenticator
from ...engine import FACT_SOURCE
from ...errors import AuthError, ClawrecallError, ForbiddenError, ValidationError
from ...models import ListOrder
from ...scopes import Caller, may_write
from ..deps import memory
from ..events import event_stream
from . import plots

HERE = Path(__file__).parent
COOKIE = "clawrecall_ui"
PAGE = 50
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
           "Cache-Control": "no-store", "X-Frame-Options": "DENY"}
DELETED = {"no": {}, "yes": {"include_deleted": True}, "only": {"only_deleted": True}}
ORDERS: tuple[ListOrder, ...] = get_args(ListOrder)
SOURCES = ("", "memory", "message", "chunk")
#: the list's filters, as the query string and the bulk form carry them
FILTERS = ("scope", "category", "tag", "since", "until", "user", "agent", "visibility", "source")
KEYSET = {"newest": "until", "oldest": "since"}  # the time bound a page after the first starts from

templates = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                        trim_blocks=True, lstrip_blocks=True)
templates.filters["when"] = lambda t: "" if t is None else t.strftime("%Y-%m-%d %H:%M")


def href(m: Any) -> str:
    """Where a listed row or search hit opens: a memory its own page, a message its place in its conversation,
    a file's chunk its place in the file's page (each page reads it again through the scope check)."""
    scope = urlencode({"scope": m.scope})
    if m.kind == "message" and m.session_id:
        return f"/ui/conversations/{quote(m.session_id, safe='')}?{scope}#msg-{m.id}"
    if m.kind == "chunk" and m.source_id:
        return f"/ui/files/{quote(m.source_id, safe='')}#chunk-{m.id}"  # a file is read in the caller's scopes
    return f"/ui/m/{quote(m.id, safe='')}?{scope}"


templates.globals["href"] = href
router = APIRouter(prefix="/ui", include_in_schema=False)


class Session:
    """The dashboard's key (made at start: a restart signs everyone out) and how a request becomes a caller."""

    def __init__(self, authenticator: Authenticator):
        self.authenticator = authenticator
        self.key = secrets.token_bytes(32)

    def caller(self, request: Request) -> Caller | None:
        ref = request.cookies.get(COOKIE)
        token = self.authenticator.tokens.from_session_ref(ref, self.key) if ref else None
        if token is not None:
            return self.authenticator.caller_of(token, {"user_id": None, "agent_id": None, "session_id": None})
        if self.authenticator.allow_anonymous and not self.authenticator.tokens.any_active():
            return self.authenticator.authenticate(request.headers)  # loopback without tokens: checks Host and Origin
        return None

    def csrf(self, request: Request) -> str:
        basis = request.cookies.get(COOKIE, "anonymous")
        return hmac.new(self.key, f"csrf:{basis}".encode(), hashlib.sha256).hexdigest()


def install(app: FastAPI, authenticator: Authenticator) -> None:
    app.state.ui = Session(authenticator)
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")


def _session(request: Request) -> Session:
    return request.app.state.ui


def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = templates.get_template(name).render(
        request=request, csrf=_session(request).csrf(request), caller=getattr(request.state, "ui_caller", None),
        query=lambda **changed: urlencode({k: v for k, v in {**request.query_params, **changed}.items() if v}),
        **context,
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def _same_origin(request: Request) -> None:
    """A POST must name this server as its origin (a browser always sends `Origin` on a form POST)."""
    origin = request.headers.get("origin") or ""
    if urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower():
        raise ForbiddenError("this form may only be sent from the dashboard's own pages")


async def _form(request: Request) -> dict[str, str]:
    _same_origin(request)
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    if not hmac.compare_digest(form.get("csrf", ""), _session(request).csrf(request)):
        raise ForbiddenError("the form's CSRF token is missing or stale: reload the page and try again")
    return form


def signed_in(handler: Callable[..., Any]) -> Callable[..., Any]:
    """A page for a signed-in caller: others go to the sign-in page; an engine refusal is shown on an error page."""
    async def wrapped(request: Request, **kwargs: Any) -> Response:
        try:
            caller = _session(request).caller(request)
            if caller is None:
                return RedirectResponse("/ui/signin", status_code=303)
            request.state.ui_caller = caller
            return await handler(request, caller, **kwargs)
        except ClawrecallError as exc:
            return page(request, "error.html", status=exc.status, error=exc)
    wrapped.__name__ = handler.__name__
    wrapped.__signature__ = _public_signature(handler)  # type: ignore[attr-defined]
    return wrapped


def _public_signature(handler: Callable[..., Any]) -> Any:
    """The handler's signature without `caller`, for FastAPI's path parameters."""
    import inspect
    sig = inspect.signature(handler)
    return sig.replace(parameters=[p for name, p in sig.parameters.items() if name != "caller"])


@router.get("")
def home() -> RedirectResponse:
    return RedirectResponse("/ui/memories", status_code=303)


@router.get("/signin")
def signin_form(request: Request) -> HTMLResponse:
    return page(request, "signin.html")


@router.post("/signin")
async def signin(request: Request) -> Response:
    try:
        _same_origin(request)
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        tokens = _session(request).authenticator.tokens
        token = await run_in_threadpool(tokens.verify, form.get("token", "").strip())
        if token is None:
            raise AuthError("invalid or revoked token")
        ref = await run_in_threadpool(tokens.session_ref, token, _session(request).key)
    except ClawrecallError as exc:
        return page(request, "signin.html", status=exc.status, error=exc)
    response = RedirectResponse("/ui/memories", status_code=303)
    response.set_cookie(COOKIE, ref, httponly=True, samesite="strict", path="/ui",
                        secure=request.url.scheme == "https")
    return response


@router.post("/signout")
async def signout(request: Request) -> Response:
    try:
        await _form(request)
    except ClawrecallError as exc:
        return page(request, "error.html", status=exc.status, error=exc)
    response = RedirectResponse("/ui/signin", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


def _filters(params: Any, names: tuple[str, ...] = ("scope", "category", "user", "agent", "visibility", "source")) -> dict[str, Any]:
    """The list's filters from a query string or form, as `Memory.list`/`delete_bulk` keywords (`search` takes
    the first two `names`, with the tag and times)."""
    out: dict[str, Any] = {}
    for name in names:
        if params.get(name):
            out[name] = params[name]
    if params.get("tag"):
        out["tags"] = [params["tag"]]
    for name in ("since", "until"):
        if params.get(name):
            out[name] = parse_when(params[name])
    return out


@router.get("/memories")
@signed_in
async def memories(request: Request, caller: Caller) -> HTMLResponse:
    q = request.query_params
    mem = memory(request)
    deleted, order = q.get("deleted", "no"), q.get("order", "newest")
    if deleted not in DELETED or order not in ORDERS:
        raise ValidationError(f"deleted is no, yes or only; order is one of {', '.join(ORDERS)}")
    filters = {**_filters(q), **DELETED[deleted]}
    at, skip = _cursor(q)
    if at is not None and order in KEYSET:  # keyset: the page starts at the last one's time, past its ties
        filters[KEYSET[order]] = at
    as_of = parse_when(q["as_of"]) if q.get("as_of") else None
    rows = await run_in_threadpool(mem.list, caller=caller, limit=PAGE + 1, offset=skip, order=order, as_of=as_of,
                                   secrets=True, **filters)  # a secret is listed masked
    rows, more = rows[:PAGE], len(rows) > PAGE
    after = None
    if more:
        last = rows[-1].created_at
        ties = sum(1 for r in rows if r.created_at == last) + (skip if at == last else 0)
        after = {"at": last.isoformat(), "skip": ties} if order in KEYSET else {"at": "", "skip": skip + PAGE}
    filtered = {k: q[k] for k in FILTERS if q.get(k)}
    return page(request, "memories.html", rows=rows, next=after, paged=at is not None or skip > 0, filtered=filtered,
                writable=may_write(caller, q.get("scope") or None, access=mem.config.access),
                live=not filtered and order == "newest" and deleted == "no" and at is None and not skip and as_of is None,
                bulk=[a for a, shown in BULK.items() if deleted in shown] if filtered and q.get("source", "") in ("", "memory", "fact") else [],
                levels=LEVELS)


def _cursor(q: Any) -> tuple[Any, int]:
    """The page's start: the time of the last memory shown and how many at that time were shown (`at`, `skip`);
    for the order by update, a plain offset (`skip`)."""
    skip = int(q["skip"]) if q.get("skip", "").isdigit() else 0
    return (parse_when(q["at"]) if q.get("at") else None), skip


#: a bulk change on the list's filter: the verb, and on which deleted-filter the list offers it
BULK = {"delete": ("no", "yes"), "undelete": ("yes", "only"), "visibility": ("no", "yes")}
LEVELS = ("private", "shared", "secret")


@router.post("/memories/bulk/{action}")
@signed_in
async def bulk(request: Request, caller: Caller, action: str) -> HTMLResponse:
    """Delete, undelete or change the visibility of every memory the list's filter shows: first how many, then
    done, by `Memory.delete_bulk`/`undelete_bulk`/`set_visibility_bulk` (each memory as its own verb would)."""
    form = await _form(request)
    mem = memory(request)
    if action not in BULK:
        raise ValidationError(f"unknown bulk action {action!r}: use {', '.join(BULK)}")
    level = form.get("level", "")
    if action == "visibility" and level not in LEVELS:
        raise ValidationError(f"the new visibility is one of {', '.join(LEVELS)}")
    filters = _filters(form)
    confirmed = form.get("confirm") == "yes"
    verb = {"delete": mem.delete_bulk, "undelete": mem.undelete_bulk,
            "visibility": lambda **kw: mem.set_visibility_bulk(level, **kw)}[action]
    count = await run_in_threadpool(lambda: verb(caller=caller, dry_run=not confirmed, **filters))
    return page(request, "bulk.html", action=action, level=level, count=count, done=confirmed,
                filtered={k: form[k] for k in FILTERS if form.get(k)})


@router.get("/search")
@signed_in
async def search(request: Request, caller: Caller) -> HTMLResponse:
    q = request.query_params
    text = q.get("q", "").strip()
    if q.get("source", "") not in SOURCES:
        raise ValidationError(f"source is one of {', '.join(SOURCES[1:])}")
    hits = None
    if text:
        sources = [q["source"]] if q.get("source") else None
        hits = await run_in_threadpool(memory(request).search, text, caller=caller, limit=20, explain=True,
                                       sources=sources, **_filters(q, names=("scope", "category")))
    return page(request, "search.html", text=text, hits=hits)


@router.get("/conversations")
@signed_in
async def conversations(request: Request, caller: Caller) -> HTMLResponse:
    offset = int(request.query_params["offset"]) if request.query_params.get("offset", "").isdigit() else 0
    rows = await run_in_threadpool(memory(request).conversations.sessions, caller=caller, limit=PAGE + 1,
                                   offset=offset, scope=request.query_params.get("scope") or None)
    return page(request, "conversations.html", rows=rows[:PAGE], more=len(rows) > PAGE, offset=offset, page_size=PAGE)


@router.get("/conversations/{session_id}")
@signed_in
async def conversation(request: Request, caller: Caller, session_id: str) -> HTMLResponse:
    record = memory(request).conversations
    scope = request.query_params.get("scope") or None

    def read() -> dict[str, Any]:
        segments = record.segments(caller=caller, session_id=session_id, scope=scope, limit=1000)
        facts = memory(request).list(caller=caller, session_id=session_id, scope=scope, source_type=FACT_SOURCE,
                                     order="oldest", limit=1000)
        return {"segments": segments, "messages": record.show(session_id, caller=caller, scope=scope),
                "facts": {s.id: [f for f in facts if f.source_id == s.id] for s in segments}}
    return page(request, "conversation.html", session_id=session_id, **await run_in_threadpool(read))


@router.get("/files/{file_id}")
@signed_in
async def file_page(request: Request, caller: Caller, file_id: str) -> HTMLResponse:
    """An ingested file and its chunks in order (a chunk found by a search or listed opens here)."""
    mem = memory(request)

    def read() -> dict[str, Any]:
        found = mem.files.get(file_id, caller=caller)
        chunks = mem.list(caller=caller, scope=found.scope, source_id=found.id, sources=["chunk"], order="oldest",
                          limit=min(max(found.chunk_count, 1), 10_000))
        return {"file": found, "chunks": chunks}
    return page(request, "file.html", **await run_in_threadpool(read))


#: the insight page's parts, each drawn from its own URL after the page's frame has painted (a large store's
#: counts take seconds for its administrator): its heading, and what of `mem.insight` it reads
INSIGHT = {"added": "Memories over time", "searches": "Recalls per day", "coverage": "Coverage",
           "recalled": "Most recalled"}


@router.get("/insight")
@signed_in
async def insight(request: Request, caller: Caller) -> HTMLResponse:
    """The plots' frame: each part is filled from `/ui/insight/<part>` by the script (without it, each is a link)."""
    return page(request, "insight.html", scope=request.query_params.get("scope") or None, parts=INSIGHT)


@router.get("/insight/{part}")
@signed_in
async def insight_part(request: Request, caller: Caller, part: str) -> HTMLResponse:
    """One part of the insight page, of what `mem.insight` counts in the caller's scopes: rows added per month by
    category and by source, searches per day (the last 30 days), embedding coverage, the memories found most."""
    if part not in INSIGHT:
        raise ValidationError(f"unknown part {part!r}: use {', '.join(INSIGHT)}")
    scope = request.query_params.get("scope") or None
    facts = memory(request).insight

    def read() -> dict[str, Any]:
        if part == "added":
            added = facts.added(caller=caller, scope=scope)
            periods = sorted({a.period for a in added})
            return {"plots": [plots.columns("Memories added per month, by category", periods, _series(added, periods, "category")),
                              plots.columns("Rows added per month, by source", periods, _series(added, periods, "source"))]}
        if part == "searches":
            searched = facts.searched(caller=caller, scope=scope, since=utcnow() - timedelta(days=30))
            return {"plots": [plots.columns("Searches per day, last 30 days", [d.period for d in searched],
                                            {"searches": [d.count for d in searched]})]}
        if part == "coverage":
            return {"plots": [plots.bars("Embedding coverage by kind of row", [(c.kind, c.percent) for c in
                                         facts.coverage(caller=caller, scope=scope)], unit=" %", limit=100)]}
        recalled = facts.recalled(caller=caller, scope=scope, limit=10)
        return {"recalled": recalled, "plots": [plots.bars("Memories found most by searches",
                                                           [(r.memory.title or r.memory.content, r.count) for r in recalled])]}
    data = await run_in_threadpool(read)
    return page(request, "insight_part.html", part=part, heading=INSIGHT[part], scope=scope, **data)


def _series(rows: list[Any], periods: list[str], by: str) -> dict[str, list[int]]:
    """Counts per period of each value of `by` (category or source), for a stacked plot."""
    at = {p: i for i, p in enumerate(periods)}
    out: dict[str, list[int]] = {}
    for r in rows:
        out.setdefault(getattr(r, by), [0] * len(periods))[at[r.period]] += r.count
    return dict(sorted(out.items(), key=lambda kv: -sum(kv[1])))


@router.get("/clusters")
@signed_in
async def clusters(request: Request, caller: Caller) -> HTMLResponse:
    """The largest groups of near-identical memories (`mem.insight.clusters`): its own page, since grouping a
    large scope's vectors takes seconds."""
    scope = request.query_params.get("scope") or None
    found = await run_in_threadpool(memory(request).insight.clusters, caller=caller, scope=scope, limit=10)
    plot = plots.bars("The largest clusters of near-identical memories",
                      [(c.memories[0].title or c.memories[0].content, c.size) for c in found])
    return page(request, "clusters.html", clusters=found, plot=plot, scope=scope)


@router.get("/events")
@signed_in
async def live(request: Request, caller: Caller) -> Response:
    """`/v1/events` for the signed-in page (REST takes no cookie): the changes this caller may read, from now."""
    mem = memory(request)
    return await event_stream(mem, caller, None, None)


@router.get("/m/{memory_id}")
@signed_in
async def detail(request: Request, caller: Caller, memory_id: str) -> HTMLResponse:
    return page(request, "memory.html", **await run_in_threadpool(_detail, request, caller, memory_id))


def _detail(request: Request, caller: Caller, memory_id: str) -> dict[str, Any]:
    mem = memory(request)
    scope = request.query_params.get("scope") or None
    record = mem.get(memory_id, caller=caller, scope=scope, reveal=False)  # a page shows a secret masked
    chain = mem.versions(record.id, caller=caller, scope=scope) if record.kind == "memory" else [record]
    why = mem.insight.why(record.id, caller=caller, scope=scope) if record.kind == "memory" else None
    return {"m": record, "chain": chain, "history": why.history if why else [], "why": why, "scope": scope,
            "writable": record.kind == "memory" and may_write(caller, record.scope, access=mem.config.access)}


ACTIONS = ("edit", "delete", "undelete", "forget")


@router.post("/m/{memory_id}/{action}")
@signed_in
async def correct(request: Request, caller: Caller, memory_id: str, action: str) -> Response:
    form = await _form(request)
    mem = memory(request)
    scope = form.get("scope") or None
    if action not in ACTIONS:
        raise ValidationError(f"unknown action {action!r}")
    if action == "forget" and form.get("confirm") != "yes":
        record = await run_in_threadpool(mem.get, memory_id, caller=caller, scope=scope)
        return page(request, "forget.html", m=record, scope=scope)
    if action == "edit":
        fields: dict[str, Any] = {k: form[k] for k in ("content", "title", "category", "visibility") if k in form}
        if "tags" in form:
            fields["tags"] = [t.strip() for t in form["tags"].split(",") if t.strip()]
        if form.get("importance"):
            try:
                fields["importance"] = float(form["importance"])
            except ValueError:
                raise ValidationError("importance is a number from 0 to 1") from None
        if "title" in fields:
            fields["title"] = fields["title"] or None
        await run_in_threadpool(lambda: mem.update(memory_id, caller=caller, scope=scope, **fields))
    else:
        await run_in_threadpool(lambda: getattr(mem, action)(memory_id, caller=caller, scope=scope))
    if action == "forget":
        return page(request, "forgotten.html", memory_id=memory_id)
    return RedirectResponse(f"/ui/m/{memory_id}?{urlencode({'scope': scope} if scope else {})}", status_code=303)
