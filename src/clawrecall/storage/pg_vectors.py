"""PostgreSQL's exact vector reads, served from this process's memory: the vectors of the scopes its
searches read, in the per-scope matrices of SQLite's index (`vector_index.py`), brought up to the
database at every search.

Why: a scope read exactly costs what its rows cost to read, and they lie on heap pages shared with
other scopes, about one page a row (a user's 6,000 rows among 120k: ~6.5 ms, the largest part of a
search). Held here, the same read is one matrix product after asking what changed.

How it stays exact: before each search a held scope takes the rows written since its last read and
the ids that left it (`pg_changes.py`: by any process, committed late or not), so a search sees
every write committed before it began.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .base import Candidate
from .filters import INDEX_COLUMNS, Filters
from .pg_changes import Changes, ScopeGate, Snapshot, read_changes
from .schema import MEMORIES
from .vector_index import RowMeta, VectorIndex

if TYPE_CHECKING:
    from .postgres import PostgresStore

# ids as text and times as epoch seconds, as the index holds them: no UUID or datetime made per row
_SELECT = ("m.id::text", "m.embedding", "m.scope", *(
    f"extract(epoch FROM m.{c})::float8" if MEMORIES.column(c).type == "time" else f"m.{c}" for c in INDEX_COLUMNS))
_ROW_BYTES = 600  # what a held row costs besides its vector, roughly: its id twice, bounds, filter columns
_CAPACITY = 16  # rows a scope's arrays start with: many scopes are small


class _OtherDimensions(Exception):
    """A stored vector has other dimensions than the query: the SQL read says what to do."""


class ScopeVectors:
    """The scopes one store holds (`PostgresStore._held_vectors`), least recently searched first."""

    def __init__(self, store: PostgresStore, max_mb: float):
        self._store = store
        self.max_mb = max_mb
        self._lock = threading.Lock()
        self._index: VectorIndex | None = None
        self._held: OrderedDict[str, Snapshot] = OrderedDict()  # scope -> what its last read saw (`Changes.since`)
        self._gate = ScopeGate(store)

    def candidates(self, queries: Sequence[np.ndarray], filters: Filters, k: int) -> list[list[Candidate]] | None:
        """Each query's k nearest rows passing `filters`, as the exact SQL read finds them; None where
        this does not serve: no scopes named, more rows than it may hold, or a filter checked in SQL
        that leaves fewer than k of the 4k nearest."""
        scopes = list(dict.fromkeys(filters.scopes or []))
        if not scopes or self.max_mb <= 0 or not queries:
            return None
        dims = len(queries[0])
        row_bytes = dims * 4 + _ROW_BYTES
        with self._lock:
            if self._gate.first_search(scopes, self._held):
                return None
            try:
                index = self._current(dims)
                if not self._refresh(index, scopes, row_bytes):
                    return None
                for oldest in [s for s in self._held if s not in scopes]:  # least recently searched first
                    if index.nbytes() <= self.max_mb * 1_000_000:
                        break
                    index.drop_scope(oldest)
                    del self._held[oldest]
                # rounded as the SQL read rounds it, and unit length as every held row is
                rounded = [unit(np.asarray(q, dtype=np.float16).astype(np.float32)) for q in queries]
                # a filter checked in SQL that leaves fewer than k of the 4k nearest (a rare session in a large
                # scope): SQL reads just its rows, where widening here would check ever more ids
                found = [self._store._index_candidates(index, q, filters, k, widen=False) for q in rounded]
            except _OtherDimensions:
                self._index = None
                self._held.clear()
                return None
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

    def _refresh(self, index: VectorIndex, scopes: list[str], row_bytes: int) -> bool:
        """Bring the scopes up to the database; False, before reading any, when they have more rows
        together than may be held."""
        asked = {scope: self._held.get(scope) for scope in scopes}
        rows = sum(index.rows([s]) if since is not None else self._gate.rows(s) for s, since in asked.items())
        if rows * row_bytes > self.max_mb * 1_000_000:
            return False
        for scope in asked:
            self._gate.holding(scope)
        found = read_changes(self._store, asked, _SELECT)
        again: dict[str, Snapshot | None] = {scope: None for scope, changes in found.items() if changes.stale}
        if again:
            found.update(read_changes(self._store, again, _SELECT))  # departures it needed were pruned
        for scope, changes in found.items():
            self._apply(index, scope, changes)
        return True

    def _apply(self, index: VectorIndex, scope: str, changes: Changes) -> None:
        if changes.whole:
            index.drop_scope(scope)
        for gone in changes.departed:
            index.remove(gone, scope=scope)
        from_vector = self._store.dialect.from_db["vector"]
        with_vector: list[tuple[str, np.ndarray, RowMeta]] = []
        for row in changes.rows:
            if row[1] is None:
                index.remove(row[0], scope=scope)
                continue
            vector = from_vector(row[1])
            if len(vector) != index.dims:
                raise _OtherDimensions
            with_vector.append((row[0], vector, RowMeta.stored(scope, row[3:])))
        if with_vector:
            found, vectors, metas = zip(*with_vector)
            index.upsert_many(list(found), unit(np.stack(vectors)), list(metas))
        self._held[scope] = changes.since
        self._held.move_to_end(scope)


def unit(vectors: np.ndarray) -> np.ndarray:
    """Rows (or one vector) scaled to unit length, as cosine needs (a zero vector stays zero)."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)
