"""The API tokens of `clawrecall serve` (auth.py) as the store keeps them: secrets only hashed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from .dialect import RowMap
from .executor import Executor
from .schema import API_TOKENS



@dataclass(frozen=True)
class TokenRow:
    """One row of `api_tokens`; `scopes` is JSON text (None for a service token)."""

    id: str
    name: str | None
    kind: str
    user_id: str | None
    agent_id: str | None
    scopes: str | None
    salt: str
    hash: str
    created_at: datetime
    revoked_at: datetime | None = None


class ApiTokens:
    """`store.api_tokens`: the token table's reads and writes."""

    def __init__(self, store: Executor):
        self._store = store
        self._map = RowMap(store.dialect, API_TOKENS)
        self._select = f"SELECT {self._map.columns} FROM api_tokens"

    def put(self, token: TokenRow) -> None:
        """Store a token; an id stored already is left as it is (adopting old token files is idempotent)."""
        s = self._store
        with s.transaction():
            s.run(f"INSERT INTO api_tokens ({self._map.columns}) VALUES ({s.dialect.marks(len(self._map.fields))}) "
                   "ON CONFLICT (id) DO NOTHING", self._map.row(token))

    def all(self, *, include_revoked: bool) -> list[TokenRow]:
        """Every token (active ones unless `include_revoked`), oldest first."""
        where = "" if include_revoked else " WHERE revoked_at IS NULL"
        return [self._map.read(TokenRow, r) for r in self._store.run(f"{self._select}{where} ORDER BY created_at, id")]

    def get(self, token_id: str, *, active_only: bool) -> TokenRow | None:
        active = " AND revoked_at IS NULL" if active_only else ""
        rows = self._store.run(f"{self._select} WHERE id = {self._store.dialect.p}{active}", (token_id,))
        return self._map.read(TokenRow, rows[0]) if rows else None

    def revoke(self, token_id: str, at: datetime) -> None:
        s, p = self._store, self._store.dialect.p
        with s.transaction():
            s.run(f"UPDATE api_tokens SET revoked_at = {p} WHERE id = {p} AND revoked_at IS NULL", (s.dialect.ts(at), token_id))

    def any_active(self) -> bool:
        return bool(self._store.run("SELECT 1 FROM api_tokens WHERE revoked_at IS NULL LIMIT 1"))
