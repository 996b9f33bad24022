"""The search log as the store keeps it: `store.search_log`, each search (`search_log`) and its hits
(`search_hits`). Reports are counted from these rows, in the scopes a caller reads."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from ..models import LoggedHit, LoggedSearch
from .base import chunks
from .dialect import RowMap
from .executor import Executor, TableRows
from .schema import SEARCH_HITS, SEARCH_LOG


class SearchLog(TableRows[LoggedSearch]):
    table = SEARCH_LOG
    model = LoggedSearch

    def __init__(self, store: Executor):
        super().__init__(store)
        self._hits = RowMap(store.dialect, SEARCH_HITS)

    def append(self, searches: Sequence[tuple[LoggedSearch, Sequence[LoggedHit]]]) -> None:
        """Searches and their hits, in one transaction."""
        s = self._store
        with s.transaction():
            self.insert([search for search, _ in searches])
            s.run_many(
                f"INSERT INTO search_hits ({self._hits.columns}) VALUES ({s.dialect.marks(len(self._hits.fields))})",
                (self._hits.row(h) for _, hits in searches for h in hits),
            )

    def _where(self, scopes: Sequence[str] | None, since: datetime | None) -> tuple[str, list[Any]]:
        """Rows logged under these scopes (None: every row, the administrator's included), since a time."""
        d = self._store.dialect
        where, params = self._in_scopes(scopes)
        if since is not None:
            where, params = f"{where} AND t.at >= {d.p}", [*params, d.ts(since)]
        return where, params

    def recent(self, scopes: Sequence[str] | None, since: datetime | None, limit: int) -> list[LoggedSearch]:
        where, params = self._where(scopes, since)
        return self._read(f"WHERE {where} ORDER BY t.at DESC, t.id LIMIT {self._store.dialect.p}", (*params, limit))

    def queries(self, scopes: Sequence[str] | None, since: datetime | None, limit: int, *,
                empty: bool) -> list[tuple[str, int, datetime, float]]:
        """(query, searches, last time, mean results) by searches, most first; `empty`: those that found nothing."""
        where, params = self._where(scopes, since)
        if empty:
            where += " AND t.result_count = 0"
        from_ts = self._store.dialect.from_db["time"]
        rows = self._store.run(
            f"SELECT min(t.query), count(*), max(t.at), avg(t.result_count) FROM search_log t WHERE {where} "
            f"GROUP BY lower(t.query) ORDER BY count(*) DESC, max(t.at) DESC LIMIT {self._store.dialect.p}",
            (*params, limit),
        )
        return [(r[0], int(r[1]), from_ts(r[2]), float(r[3])) for r in rows]

    def per_period(self, scopes: Sequence[str] | None, since: datetime | None, bucket: str) -> list[tuple[str, int]]:
        """(day or month, searches) logged under these scopes since a time, oldest first."""
        where, params = self._where(scopes, since)
        period = self._store.dialect.period("t.at", bucket)
        rows = self._store.run(f"SELECT {period}, count(*) FROM search_log t WHERE {where} GROUP BY 1 ORDER BY 1", params)
        return [(r[0], int(r[1])) for r in rows]

    def recalled(self, scopes: Sequence[str] | None, since: datetime | None,
                 limit: int) -> list[tuple[str, int, datetime]]:
        """(memory id, times found, last time) over the searches logged under these scopes, most first."""
        where, params = self._where(scopes, since)
        from_ts = self._store.dialect.from_db["time"]
        rows = self._store.run(
            f"SELECT h.memory_id, count(*), max(h.at) FROM search_hits h JOIN search_log t ON t.id = h.log_id "
            f"WHERE {where} GROUP BY h.memory_id ORDER BY count(*) DESC, max(h.at) DESC LIMIT {self._store.dialect.p}",
            (*params, limit),
        )
        return [(str(r[0]), int(r[1]), from_ts(r[2])) for r in rows]

    def never_recalled(self, scopes: Sequence[str] | None, since: datetime, limit: int) -> list[str]:
        """Ids of current memories in these scopes, older than `since`, that no search found since then."""
        d = self._store.dialect
        where, params = self._in_scopes(scopes)
        rows = self._store.run(
            f"SELECT t.id FROM memories t WHERE {where} AND t.kind = 'memory' AND t.deleted_at IS NULL "
            f"AND t.superseded_by IS NULL AND t.created_at < {d.p} AND NOT EXISTS "
            f"(SELECT 1 FROM search_hits h WHERE h.memory_id = t.id AND h.at >= {d.p}) "
            f"ORDER BY t.created_at, t.id LIMIT {d.p}",
            (*params, d.ts(since), d.ts(since), limit),
        )
        return [str(r[0]) for r in rows]

    def recalls_of(self, memory_id: str) -> list[tuple[LoggedHit, LoggedSearch]]:
        """Each time a logged search found the memory, newest first, with that search."""
        n = len(self._hits.fields)
        rows = self._store.run(
            f"SELECT {', '.join(f'h.{c}' for c in self._hits.fields)}, {', '.join(f't.{c}' for c in self._map.fields)} "
            f"FROM search_hits h JOIN search_log t ON t.id = h.log_id WHERE h.memory_id = {self._store.dialect.p} "
            "ORDER BY h.at DESC, h.log_id", (memory_id,),
        )
        return [(self._hits.read(LoggedHit, r[:n]), self._map.read(LoggedSearch, r[n:])) for r in rows]

    def prune(self, before: datetime) -> int:
        """Remove the searches logged before a time, and their hits; how many searches."""
        s, d = self._store, self._store.dialect
        with s.transaction():
            s.run(f"DELETE FROM search_hits WHERE at < {d.p}", (d.ts(before),))
            n = s.run(f"SELECT count(*) FROM search_log WHERE at < {d.p}", (d.ts(before),))[0][0]
            s.run(f"DELETE FROM search_log WHERE at < {d.p}", (d.ts(before),))
        return int(n)

    def forget(self, memory_ids: Sequence[str]) -> None:
        """In a transaction: remove the searches that found any of these memories, with their hits. A memory
        erased for good is erased from the log too, and a search that found it may spell it in its query."""
        s, one_of = self._store, self._store.dialect.one_of
        for chunk in chunks(memory_ids):
            where, params = one_of("memory_id", chunk, "uuid")
            logs = [str(r[0]) for r in s.run(f"SELECT DISTINCT log_id FROM search_hits WHERE {where}", params)]
            for part in chunks(logs):
                for table, key in (("search_hits", "log_id"), ("search_log", "id")):
                    these, ids = one_of(key, part, "uuid")
                    s.run(f"DELETE FROM {table} WHERE {these}", ids)

    def of_person(self, column: str, person: str, scope: str, memory_ids: Sequence[str], *, delete: bool) -> int:
        """A person's searches (made by it, or logged under its scope), with their hits and every hit on its
        memories (`memory_ids`): counted, or removed with `delete`. Returns the searches."""
        if column not in ("user_id", "agent_id"):
            raise ValueError(f"not an owner column: {column}")
        s, p = self._store, self._store.dialect.p
        ids = [str(r[0]) for r in s.run(f"SELECT id FROM search_log WHERE {column} = {p} OR scope = {p}", (person, scope))]
        if delete:
            one_of = s.dialect.one_of
            with s.transaction():
                for chunk in chunks(ids):
                    for table, key in (("search_hits", "log_id"), ("search_log", "id")):
                        where, params = one_of(key, chunk, "uuid")
                        s.run(f"DELETE FROM {table} WHERE {where}", params)
                for chunk in chunks(memory_ids):
                    where, params = one_of("memory_id", chunk, "uuid")
                    s.run(f"DELETE FROM search_hits WHERE {where}", params)
        return len(ids)


def coverage(store: Executor, scopes: Sequence[str] | None, fact_source: str) -> list[tuple[str, str | None, int, int]]:
    """(kind, model, rows, rows with a vector) of the rows not deleted in these scopes; a memory whose
    `source_type` is `fact_source` (extracted from a conversation) counts as a `fact`."""
    p = store.dialect.p
    where, params = ("1 = 1", []) if scopes is None else store.dialect.one_of("scope", list(scopes), "text")
    rows = store.run(
        f"SELECT CASE WHEN kind = 'memory' AND source_type = {p} THEN 'fact' ELSE kind END AS k, "
        f"embedding_model, count(*), count(embedding) FROM memories WHERE deleted_at IS NULL AND {where} "
        "GROUP BY k, embedding_model", (fact_source, *params),
    )
    return [(str(r[0]), r[1], int(r[2]), int(r[3])) for r in rows]
