"""API tokens for `clawrecall serve`, and the one place a request's headers become a caller.

A `user` token is bound to a user and/or agent and to the scopes it may use (by default the
identity's own: global, user:<id>, agent:<id>). A `service` token is for a trusted agent runtime
(the OpenClaw plugin) that authenticates its own users and names the user, agent and session of
each request in `X-Clawrecall-User`, `X-Clawrecall-Agent` and `X-Clawrecall-Session`, percent-encoded
UTF-8 (an HTTP header carries no other text: a user `山田` is sent as `%E5%B1%B1%E7%94%B0`).

A token (`cr_<id>_<secret>`) is shown once; the database keeps a salted SHA-256 of the secret.
Tokens live in the store's own database (an `api_tokens` table, on SQLite and PostgreSQL alike),
so every server on one database accepts the same tokens. Tokens that older versions kept in a
`tokens.db` of the data directory (PostgreSQL stores) are moved into the database on first use.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
import secrets
from urllib.parse import unquote
import sqlite3
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Mapping, Sequence

from pydantic import BaseModel

from ._time import from_db, utcnow
from .config import data_dir
from .errors import AuthError, ForbiddenError, NotFoundError, ScopeError, StorageError, ValidationError
from .scopes import MAX_ID_CHARS, Caller, validate_scope
from .storage import TokenRow

if TYPE_CHECKING:
    from .engine import Memory
    from .storage import Store

TOKEN_PREFIX = "cr_"
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")  # a "%" that starts no escape: `unquote` would keep it as text
USER_HEADER = "x-clawrecall-user"
AGENT_HEADER = "x-clawrecall-agent"
SESSION_HEADER = "x-clawrecall-session"
TokenKind = Literal["user", "service"]


class TokenInfo(BaseModel):
    """A token as listed: never its secret."""

    id: str
    name: str | None = None
    kind: TokenKind
    user_id: str | None = None
    agent_id: str | None = None
    scopes: list[str] | None = None
    created_at: datetime
    revoked_at: datetime | None = None


class TokenStore:
    """The store's `api_tokens` table. Every check reads the database, so a revocation counts at once."""

    def __init__(self, target: str | Path | Store):
        """`target`: an open store (not closed by `close`), or a store's path or URL (opened here)."""
        from .storage import Store, open_store

        self._owned = not isinstance(target, Store)
        self.store: Store = target if isinstance(target, Store) else open_store(target)

    @classmethod
    def for_memory(cls, mem: Memory) -> "TokenStore":
        tokens = cls(mem._store)
        legacy = data_dir() / "tokens.db"
        if mem._store.backend != "sqlite" and mem.config.writes.enabled and legacy.exists():  # not on a replica
            tokens._adopt(legacy)
        return tokens

    def _adopt(self, path: Path) -> None:
        """Move the tokens of an old per-server `tokens.db` into the database (once; the file is renamed)."""
        columns = [f.name for f in fields(TokenRow)]
        try:
            conn = sqlite3.connect(str(path))
            try:
                rows = [dict(zip(columns, row)) for row in conn.execute(f"SELECT {', '.join(columns)} FROM api_tokens")]
            finally:
                conn.close()
            adopted = [
                TokenRow(**{**row, "created_at": from_db(row["created_at"]), "revoked_at": from_db(row["revoked_at"])})
                for row in rows
            ]
        except (sqlite3.Error, ValueError, TypeError) as exc:
            raise StorageError(
                f"cannot read the API tokens of {path} (an earlier release's tokens.db): {exc}; "
                "move the file away to start without them"
            ) from None
        with self.store.transaction():
            for row in adopted:
                self.store.api_tokens.put(row)
        try:
            path.rename(path.with_name(path.name + ".imported"))
        except FileNotFoundError:  # another server adopted it at the same time (token rows are idempotent)
            pass

    def close(self) -> None:
        if self._owned:
            self.store.close()

    def create(
        self, *, kind: TokenKind = "user", user_id: str | None = None, agent_id: str | None = None,
        scopes: Sequence[str] | None = None, name: str | None = None,
    ) -> tuple[TokenInfo, str]:
        """A new token and its secret string, which is not stored and cannot be shown again."""
        if kind == "service":
            if user_id or agent_id or scopes:
                raise ValidationError("a service token names no user, agent or scope: it names them per request")
            allowed = None
        else:
            allowed = _user_token_scopes(user_id, agent_id, scopes)
        info = TokenInfo(
            id=secrets.token_hex(6), name=name, kind=kind, user_id=user_id, agent_id=agent_id, scopes=allowed,
            created_at=utcnow(),
        )
        secret = secrets.token_urlsafe(32)
        salt = secrets.token_hex(16)
        self.store.api_tokens.put(TokenRow(
            id=info.id, name=name, kind=kind, user_id=user_id, agent_id=agent_id, scopes=_join(allowed), salt=salt,
            hash=_digest(salt, secret), created_at=info.created_at,
        ))
        return info, f"{TOKEN_PREFIX}{info.id}_{secret}"

    def list(self, *, include_revoked: bool = False) -> list[TokenInfo]:
        return [_info(row) for row in self.store.api_tokens.all(include_revoked=include_revoked)]

    def revoke(self, token_id: str) -> TokenInfo:
        self.store.api_tokens.revoke(token_id, utcnow())
        row = self.store.api_tokens.get(token_id, active_only=False)
        if row is None:
            raise NotFoundError(f"no token with id {token_id!r} (see `clawrecall token list`)")
        return _info(row)

    def any_active(self) -> bool:
        return self.store.api_tokens.any_active()

    def verify(self, token: str) -> TokenInfo | None:
        """The active token this string is, or None."""
        if not token.startswith(TOKEN_PREFIX):
            return None
        token_id, sep, secret = token.removeprefix(TOKEN_PREFIX).partition("_")
        if not sep:
            return None
        row = self.store.api_tokens.get(token_id, active_only=True)
        if row is None or not hmac.compare_digest(_digest(row.salt, secret), row.hash):
            return None
        return _info(row)

    def session_ref(self, token: TokenInfo, key: bytes) -> str:
        """A signed reference to a token for a browser's cookie: its id and a MAC over the id and the
        token's stored hash, so the cookie never holds the secret and dies with the token (revoked or
        replaced) or with `key` (the server's, made at its start)."""
        row = self.store.api_tokens.get(token.id, active_only=True)
        assert row is not None
        return f"{token.id}.{hmac.new(key, f'{token.id}:{row.hash}'.encode(), 'sha256').hexdigest()}"

    def from_session_ref(self, ref: str, key: bytes) -> TokenInfo | None:
        """The active token a `session_ref` names, or None."""
        token_id, _, mac = ref.partition(".")
        row = self.store.api_tokens.get(token_id, active_only=True) if token_id and mac else None
        if row is None:
            return None
        expected = hmac.new(key, f"{token_id}:{row.hash}".encode(), "sha256").hexdigest()
        return _info(row) if hmac.compare_digest(expected, mac) else None


class Authenticator:
    """Headers → `Caller`, for every door of the server (REST, MCP, hooks, embeddings).

    Without any active token and with `allow_anonymous` (the server listens on loopback only),
    requests need no token and act as the local administrator, or as the identity their
    `X-Clawrecall-*` headers name; they must then be addressed to a loopback host name, so a web
    page cannot reach the API through DNS rebinding, and carry no `Origin` but a loopback one, so a
    page of another site cannot send a request a browser makes without asking first (a body-less POST).
    """

    def __init__(self, tokens: TokenStore, *, allow_anonymous: bool):
        self.tokens = tokens
        self.allow_anonymous = allow_anonymous

    def authenticate(self, headers: Mapping[str, str]) -> Caller:
        named = _named_identity(headers)
        authorization = headers.get("authorization")
        if authorization is None:
            if not self.allow_anonymous or self.tokens.any_active():
                raise AuthError("this server needs a token: send 'Authorization: Bearer cr_…'")
            if not is_loopback(_host_name(headers.get("host", ""))):
                raise ForbiddenError("requests without a token must be addressed to localhost or a loopback address")
            origin = headers.get("origin")
            if origin is not None and not is_loopback(_origin_host(origin)):
                raise ForbiddenError(f"requests without a token may not come from a web page of another site ({origin[:100]})")
            return Caller(named["user_id"], named["agent_id"], named["session_id"])
        scheme, _, value = authorization.partition(" ")
        token = self.tokens.verify(value.strip()) if scheme.lower() == "bearer" else None
        if token is None:
            raise AuthError("invalid or revoked token")
        return self.caller_of(token, named)

    def caller_of(self, token: TokenInfo, named: Mapping[str, str | None]) -> Caller:
        """The caller a verified token is; a service token acts as the identity `named` (none: the administrator)."""
        if token.kind == "service":
            return Caller(named["user_id"], named["agent_id"], named["session_id"])
        for key, bound in (("user_id", token.user_id), ("agent_id", token.agent_id)):
            if named[key] is not None and named[key] != bound:
                raise ForbiddenError(
                    f"this token may not act as {key.removesuffix('_id')} {named[key]!r}: "
                    "only a service token names the caller per request"
                )
        assert token.scopes is not None
        return Caller(token.user_id, token.agent_id, named["session_id"], tuple(token.scopes))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# A Host header: a name or an IPv4 address, or an IPv6 address in brackets, then an optional port.
_HOST = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[^\s:@/\[\]]+))(?::[0-9]{1,5})?$")


def _host_name(host: str) -> str:
    """`[::1]:8765` → `::1`, `localhost:8765` → `localhost`; anything else (`[::1]evil.com`,
    `[::1]:1@evil.com`) → "" , which is no loopback name."""
    match = _HOST.match(host)
    return "" if match is None else (match["v6"] or match["name"]).lower()


def _origin_host(origin: str) -> str:
    """`http://127.0.0.1:8765` → `127.0.0.1`; `null` (a sandboxed or file page) and anything malformed → ""."""
    scheme, sep, rest = origin.partition("://")
    return _host_name(rest) if sep and scheme in ("http", "https") else ""


def identity(user_id: str | None, agent_id: str | None, session_id: str | None) -> dict[str, str | None]:
    """Checked caller ids (a user or agent id must be usable in a scope name); empty means not given."""
    for kind, value in (("user", user_id), ("agent", agent_id)):
        if value:
            validate_scope(f"{kind}:{value}")
    Caller(user_id or None, agent_id or None)  # an id that could pass for another is refused
    if session_id and (len(session_id) > MAX_ID_CHARS or not session_id.strip()):
        raise ValidationError(f"a session id is 1 to {MAX_ID_CHARS} characters")
    return {"user_id": user_id or None, "agent_id": agent_id or None, "session_id": session_id or None}


def _named_identity(headers: Mapping[str, str]) -> dict[str, str | None]:
    return identity(*(_decoded(h, headers.get(h)) for h in (USER_HEADER, AGENT_HEADER, SESSION_HEADER)))


def _decoded(name: str, value: str | None) -> str | None:
    """A header's percent-encoded UTF-8 value as text. An empty one is refused, not taken as absent: with a
    service token, a request naming no one is the administrator's, and an unset variable must not make it so."""
    if value is None:
        return None
    if not value.strip():
        raise ValidationError(f"{name} is empty: give an id, or leave the header out")
    if _BAD_ESCAPE.search(value):
        raise ValidationError(f"{name} must be percent-encoded UTF-8")
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        raise ValidationError(f"{name} must be percent-encoded UTF-8") from None


def _user_token_scopes(user_id: str | None, agent_id: str | None, scopes: Sequence[str] | None) -> list[str]:
    if not user_id and not agent_id:
        raise ValidationError("a user token is bound to a user or an agent: give --user and/or --agent (or --service)")
    identity(user_id, agent_id, None)
    caller = Caller(user_id or None, agent_id or None)
    allowed = list(dict.fromkeys(scopes)) if scopes else caller.own_scopes()
    for scope in allowed:
        validate_scope(scope)
        if not caller.may_hold(scope):
            raise ScopeError(f"scope {scope!r} does not belong to this token's identity")
    return allowed


def _digest(salt: str, secret: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + secret.encode()).hexdigest()


def _join(scopes: list[str] | None) -> str | None:
    return None if scopes is None else json.dumps(scopes)


def _info(row: TokenRow) -> TokenInfo:
    return TokenInfo(
        id=row.id, name=row.name, kind=row.kind, user_id=row.user_id, agent_id=row.agent_id,
        scopes=None if row.scopes is None else json.loads(row.scopes), created_at=row.created_at,
        revoked_at=row.revoked_at,
    )
