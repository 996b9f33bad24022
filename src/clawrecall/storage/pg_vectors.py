"""PostgreSQL's exact vector reads, served from this process's memory: the vectors of the scopes its
searches read, in the per-scope matrices of SQLite's index (`vector_index.py`), checked against the
database at every search.

Why: a scope read exactly costs what its rows cost to read, and they lie on heap pages shared with
other scopes, about one page a row (a user's 6,000 rows among 120k: ~6.5 ms, the largest part of a
search). Held here, the same read is one matrix product after one index-only query that says
whether the scope changed.

How it stays exact: every row has a revision (`rev`, from a sequence; a trigger gives an updated row
a new one, so a revision names one version of one row), and the `(scope, rev)` index gives each
scope's row count and the sum of its revisions and of their squares (modulo a prime) without reading a row. Equal
to what is held: nothing changed. Otherwise the rows with a newer revision than the newest held are
read (what a write leaves), and when the two still differ (a row deleted, or a transaction that took
its revision earlier committed later) the scope's ids and revisions are compared one by one. Rows
are held with the revision read with them, so a search sees every write committed before it began,
by any process.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .base import Candidate, chunks
from .filters import INDEX_COLUMNS, Filters
from .schema import MEMORIES
from .vector_index import RowMeta, VectorIndex

if TYPE_CHECKING:
    from .postgres import PostgresStore

# ids as text and times as epoch seconds, as the index holds them: no UUID or datetime made per row
_SELECT = ", ".join(("id::text", "rev", "embedding", "scope", *(
    f"extract(epoch FROM {c})::float8" if MEMORIES.column(c).type == "time" else c for c in INDEX_COLUMNS)))
_ROW_BYTES = 600  # what a held row costs besides its vector, roughly: its id twice, revision, bounds, filter columns
_CAPACITY = 16  # rows a scope's arrays start with: many scopes are small
_SEEN = 10_000  # scopes remembered as searched once
_P = 1_000_003  # revisions are squared modulo this prime: bigint arithmetic (numeric cost twice as much), no overflow


@dataclass
class _Held:
    """A scope's rows as held: every row's revision (with a vector or not), and the sums checked."""

    revs: dict[str, int] = field(default_factory=dict)
    total: int = 0
    squares: int = 0
    newest: int = 0

    def fingerprint(self) -> tuple[int, int, int]:
        return len(self.revs), self.total, self.squares

    def set(self, memory_id: str, rev: int) -> None:
        self.drop(memory_id)
        self.revs[memory_id] = rev
        self.total += rev
        self.squares += (rev % _P) ** 2
        self.newest = max(self.newest, rev)

    def drop(self, memory_id: str) -> None:
        old = self.revs.pop(memory_id, None)
        if old is not None:
            self.total -= old
            self.squares -= (old % _P) ** 2


class ScopeVectors:
    """The scopes one store holds (`PostgresStore._held_vectors`), least recently searched first."""

    def __init__(self, store: PostgresStore, max_mb: float):
        self._store = store
        self.max_mb = max_mb
        self._lock = threading.Lock()
        self._index: VectorIndex | None = None
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._seen: OrderedDict[str, None] = OrderedDict()  # searched once, not held (yet)

    def candidates(self, queries: Sequence[np.ndarray], filters: Filters, k: int) -> list[list[Candidate]] | None:
        """Each query's k nearest rows passing `filters`, as the exact SQL read finds them; None where
        this does not serve: no scopes named, more rows than it may hold, or a filter checked in SQL
        that leaves fewer than k of the 4k nearest."""
        scopes = list(dict.fromkeys(filters.scopes or []))
        if not scopes or self.max_mb <= 0 or not queries:
            return None
        dims = len(queries[0])
        budget = self.max_mb * 1_000_000
        state = {str(s): (int(n), int(total), int(squares)) for s, n, total, squares in self._store._run(
            f"SELECT scope, count(*), sum(rev), sum(mod(rev, {_P}) * mod(rev, {_P})) FROM memories "
            "WHERE scope = ANY(%s::text[]) GROUP BY scope", (scopes,))}
        if sum(n for n, _, _ in state.values()) * (dims * 4 + _ROW_BYTES) > budget:
            return None
        with self._lock:
            # a scope is held from its second search in this process: a one-off command, which searches once,
            # reads its rows in SQL instead of reading them all to hold them
            new = [s for s in state if s not in self._held and s not in self._seen]
            if new:
                for scope in new:
                    self._seen[scope] = None
                while len(self._seen) > _SEEN:
                    self._seen.popitem(last=False)
                return None
            try:
                index = self._current(dims)
                if not all(self._refresh(index, scope, state.get(scope, (0, 0, 0))) for scope in scopes):
                    self._index = None  # vectors of other dimensions: the SQL read says what to do
                    self._held.clear()
                    return None
                for oldest in [s for s in self._held if s not in state]:  # least recently searched first
                    if index.nbytes() <= budget:
                        break
                    index.drop_scope(oldest)
                    del self._held[oldest]
                # rounded as the SQL read rounds it, and unit length as every held row is
                rounded = [unit(np.asarray(q, dtype=np.float16).astype(np.float32)) for q in queries]
                # a filter checked in SQL that leaves fewer than k of the 4k nearest (a rare session in a large
                # scope): SQL reads just its rows, where widening here would check ever more ids
                found = [self._store._index_candidates(index, q, filters, k, widen=False) for q in rounded]
            except BaseException:
                self._index = None  # a refresh cut short leaves nothing half held
                self._held.clear()
                raise
        return None if any(f is None for f in found) else found  # type: ignore[return-value]

    def _current(self, dims: int) -> VectorIndex:
        if self._index is None or self._index.dims != dims:
            self._index = VectorIndex(dims, exact_rows=sys.maxsize, capacity=_CAPACITY)  # held scopes are read whole
            self._held.clear()
        return self._index

    def _refresh(self, index: VectorIndex, scope: str, fingerprint: tuple[int, int, int]) -> bool:
        """Bring one scope up to the database (its row count, revision sum and sum of squares); False when a
        vector has other dimensions than the index."""
        held = self._held.get(scope)
        if fingerprint[0] == 0:
            if held is not None:
                index.drop_scope(scope)
                del self._held[scope]
            return True
        if held is None:
            held = self._held[scope] = _Held()
            ok = self._read(index, scope, held, "m.scope = %s", [scope])
        elif held.fingerprint() == fingerprint:
            ok = True
        else:
            ok = self._read(index, scope, held, "m.scope = %s AND m.rev > %s", [scope, held.newest])
            if ok and held.fingerprint() != fingerprint:
                ok = self._compare(index, scope, held)
        self._held.move_to_end(scope)
        return ok

    def _compare(self, index: VectorIndex, scope: str, held: _Held) -> bool:
        now = {str(i): int(r) for i, r in self._store._run("SELECT id, rev FROM memories WHERE scope = %s", (scope,))}
        for gone in held.revs.keys() - now.keys():
            index.remove(gone, scope=scope)
            held.drop(gone)
        changed = [i for i, rev in now.items() if held.revs.get(i) != rev]
        for chunk in chunks(changed):
            these, params = self._store.dialect.one_of("m.id", chunk, "uuid")
            if not self._read(index, scope, held, these, params, ids=chunk):
                return False
        return True

    def _read(self, index: VectorIndex, scope: str, held: _Held, where: str, params: list[Any],
              ids: Sequence[str] = ()) -> bool:
        """Hold the rows `where` selects; `ids` were asked for by id, and one not found, or found in
        another scope now, leaves this one."""
        rows = self._store._run(f"SELECT {_SELECT} FROM memories m WHERE {where}", params, binary=True)
        from_vector = self._store.dialect.from_db["vector"]
        revs: dict[str, int] = {}
        with_vector: list[tuple[str, np.ndarray, RowMeta]] = []
        for row in rows:
            memory_id = row[0]
            if row[3] != scope:
                continue
            revs[memory_id] = int(row[1])
            if row[2] is None:
                index.remove(memory_id, scope=scope)
                continue
            vector = from_vector(row[2])
            if len(vector) != index.dims:
                return False
            with_vector.append((memory_id, vector, RowMeta.stored(scope, row[4:])))
        if with_vector:
            found, vectors, metas = zip(*with_vector)
            index.upsert_many(list(found), unit(np.stack(vectors)), list(metas))
        for memory_id, rev in revs.items():  # after the vectors: a revision held means its row is
            held.set(memory_id, rev)
        for gone in set(ids) - revs.keys():
            index.remove(gone, scope=scope)
            held.drop(gone)
        return True


def unit(vectors: np.ndarray) -> np.ndarray:
    """Rows (or one vector) scaled to unit length, as cosine needs (a zero vector stays zero)."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)
