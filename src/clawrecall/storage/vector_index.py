"""Exact in-memory cosine search, one numpy matrix per scope, kept in sync with the database.

Why exact and in memory: a matrix-vector product is memory-bound, so its cost is the rows
it reads; scopes are hard partitions and nearly every search names one or a few, so one
matrix per scope means a search reads only the rows it may return (no row copying, no
filtering after the fact), and recall is 1.0 by construction. Every write — by this
process or another — appends to the `changes` log, so before a search
the index applies only the rows changed since it last looked (see `sqlite.py`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Sequence

import numpy as np

from .._blas import one_blas_thread
from .filters import INDEX_COLUMNS, Columns, Filters, index_tests
from .schema import MEMORIES


_AXES = 32  # `nearest_many` first compares a batch on the stored vectors' 32 main axes ...
_BULK_QUERIES = 32  # ... when it holds at least this many vectors (or the axes exist) ...
_PRUNE_FROM = 384  # ... in a scope of at least this many rows (below, the full product is as cheap)
_BASIS_SAMPLE = 5_000  # rows the axes are computed from (more makes them no better for this)
_SLACK = 1e-3  # float32 rounding allowance on the bound
_QUERY_BLOCK = 256  # queries compared at once: temporaries stay bounded for any batch size


@dataclass(slots=True)
class RowMeta:
    """What the index keeps of a row besides its vector: its scope (the partition), and its value of
    each of `filters.INDEX_COLUMNS`, in that order (times as epoch seconds, NaN for NULL)."""

    scope: str
    values: tuple[Any, ...]

    @classmethod
    def of(cls, scope: str, **values: Any) -> RowMeta:
        """A row's meta from its column values by name (a column not given is NULL)."""
        return cls(scope, tuple(values.get(c, np.nan if c in _TIME else MEMORIES.column(c).default) for c in INDEX_COLUMNS))


#: how each indexed column is held: times as float64 epoch seconds (NaN for NULL), text as int32 codes
_TIME = {c for c in INDEX_COLUMNS if MEMORIES.column(c).type == "time"}


def _bounds(rows: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Each row's coordinates on the axes, then the length of its part off them (computed directly:
    sqrt(|v|² - |low|²) cancels badly for a row lying almost on the axes). The dot product of two
    such rows is the bound `nearest_many` prunes with, so one matrix product gives all the bounds."""
    out = np.empty((len(rows), _AXES + 1), dtype=np.float32)
    low = out[:, :_AXES] = rows @ basis
    out[:, _AXES] = np.linalg.norm(rows - low @ basis.T, axis=-1)
    return out


class _Partition:
    """The rows of one scope: a growable matrix plus the indexed columns filters read."""

    def __init__(self, dims: int, codes: dict[str, dict[str, int]], capacity: int = 256):
        self.dims = dims
        self.size = 0  # slots ever used (high-water mark)
        self.free: list[int] = []
        self._codes = codes  # the index's text codes, per column
        self._alloc(capacity)

    def _alloc(self, capacity: int) -> None:
        self.mat = np.zeros((capacity, self.dims), dtype=np.float32)
        self.bounds = np.zeros((capacity, _AXES + 1), dtype=np.float32)  # `_bounds` of each row
        self.ids: list[str | None] = [None] * capacity
        self.alive = np.zeros(capacity, dtype=bool)
        self.cols = {c: np.full(capacity, np.nan) if c in _TIME else np.zeros(capacity, dtype=np.int32)
                     for c in INDEX_COLUMNS}

    def _grow(self) -> None:
        old = (self.mat, self.bounds, self.alive, self.cols)
        ids, n = self.ids, len(self.ids)
        self._alloc(n * 2)
        self.ids[:n] = ids
        self.mat[:n], self.bounds[:n], self.alive[:n] = old[:3]
        for c, prev in old[3].items():
            self.cols[c][:n] = prev

    def project(self, basis: np.ndarray, rows: slice) -> None:
        self.bounds[rows] = _bounds(self.mat[rows], basis)

    def slot(self) -> int:
        if self.free:
            return self.free.pop()
        if self.size == len(self.ids):
            self._grow()
        self.size += 1
        return self.size - 1

    # `filters.Columns`: what a rule's test reads
    def __getitem__(self, column: str) -> np.ndarray:
        return self.cols[column][: self.size]

    def codes(self, column: str, values: Sequence[str]) -> np.ndarray:
        known = self._codes.get(column, {})
        return np.array([known[v] for v in values if v in known], dtype=np.int32)

    def mask(self, tests: list[Callable[[Columns], np.ndarray]]) -> np.ndarray:
        mask = self.alive[: self.size].copy()
        for test in tests:
            mask &= test(self)
        return mask


class VectorIndex:
    def __init__(self, dims: int):
        self.dims = dims
        self._lock = threading.RLock()
        self._parts: dict[str, _Partition] = {}
        self._pos: dict[str, tuple[str, int]] = {}
        self._codes: dict[str, dict[str, int]] = {c: {} for c in INDEX_COLUMNS if c not in _TIME}
        self._basis: np.ndarray | None = None  # dims x _AXES, orthonormal columns
        self._basis_rows = 0  # rows the index held when the axes were computed
        self.last_seq = 0

    def __len__(self) -> int:
        return len(self._pos)

    def _column(self, column: str, values: tuple[Any, ...]) -> Sequence[Any]:
        """Values of one indexed column as its array holds them."""
        if column in _TIME:
            return values
        codes = self._codes[column]
        return [codes.setdefault(v, len(codes) + 1) for v in values]

    def upsert_many(self, ids: list[str], vectors: np.ndarray, metas: list[RowMeta]) -> None:
        """Insert or replace rows (distinct ids; `vectors` has one row per id): one array write per scope."""
        with self._lock, one_blas_thread():
            bounds = None if self._basis is None else _bounds(vectors, self._basis)  # one product for the batch
            placed: dict[str, tuple[list[int], list[int]]] = {}  # scope -> (positions in the batch, slots)
            for n, (memory_id, meta) in enumerate(zip(ids, metas)):
                where = self._pos.get(memory_id)
                if where is not None and where[0] != meta.scope:
                    self.remove(memory_id)
                    where = None
                part = self._parts.get(meta.scope)
                if part is None:
                    part = self._parts[meta.scope] = _Partition(self.dims, self._codes)
                slot = part.slot() if where is None else where[1]
                self._pos[memory_id] = (meta.scope, slot)
                part.ids[slot] = memory_id
                rows, slots = placed.setdefault(meta.scope, ([], []))
                rows.append(n)
                slots.append(slot)
            for scope, (rows, slots) in placed.items():
                part = self._parts[scope]
                part.mat[slots] = vectors[rows]
                if bounds is not None:
                    part.bounds[slots] = bounds[rows]
                part.alive[slots] = True
                for column, values in zip(INDEX_COLUMNS, zip(*(metas[n].values for n in rows))):
                    part.cols[column][slots] = self._column(column, values)

    def remove(self, memory_id: str) -> None:
        with self._lock:
            where = self._pos.pop(memory_id, None)
            if where is not None:
                part = self._parts[where[0]]
                part.alive[where[1]] = False
                part.ids[where[1]] = None
                part.free.append(where[1])

    def vector(self, memory_id: str) -> np.ndarray | None:
        with self._lock:
            where = self._pos.get(memory_id)
            return None if where is None else self._parts[where[0]].mat[where[1]].copy()

    def search(self, query: np.ndarray, k: int, filters: Filters) -> list[tuple[str, float]]:
        """The k nearest rows passing the filters the index holds (`filters.index_tests`), best
        first, as (id, cosine)."""
        with self._lock, one_blas_thread():
            if k <= 0:
                return []
            scopes = filters.scopes
            names = list(self._parts) if scopes is None else [s for s in scopes if s in self._parts]
            tests = index_tests(filters)
            found: list[tuple[float, str]] = []
            for name in names:
                part = self._parts[name]
                if part.size == 0:
                    continue
                sims = part.mat[: part.size] @ query
                sims[~part.mask(tests)] = -np.inf
                top = np.argpartition(-sims, k - 1)[:k] if sims.size > k else np.arange(sims.size)
                found.extend((float(sims[i]), part.ids[i]) for i in top if sims[i] != -np.inf)  # type: ignore[misc]
            found.sort(key=lambda x: -x[0])
            return [(memory_id, score) for score, memory_id in found[:k]]

    def nearest_many(
        self, queries: np.ndarray, scope: str, min_score: float, now: datetime | None = None
    ) -> list[tuple[str, float] | None]:
        """For each query, its most similar live row in one scope if that reaches `min_score` (the
        deduplication of a batch), else None.

        Exact, and cheap in a large scope: a row is compared in full only when an upper bound of
        its dot product with the query, from their coordinates on the stored vectors' main axes,
        reaches `min_score`. For u = a + a' and v = b + b' (parts on and off the axes),
        u·v = a·b + a'·b' <= a·b + |a'||b'|. Near-duplicates pass it; few other rows do."""
        queries = np.asarray(queries, dtype=np.float32)
        with self._lock, one_blas_thread():
            part = self._parts.get(scope)
            if part is None or part.size == 0 or len(queries) == 0:
                return [None] * len(queries)
            live = part.mask(index_tests(Filters(now=now)))
            # Once a batch has made the axes, pruning pays for a single query too; one never makes them.
            prune = part.size >= _PRUNE_FROM and (len(queries) >= _BULK_QUERIES or self._basis is not None)
            basis = self._axes() if prune else None
            out: list[tuple[str, float] | None] = []
            for start in range(0, len(queries), _QUERY_BLOCK):
                out += _nearest(part, live, queries[start : start + _QUERY_BLOCK], basis, min_score)
            return out

    def _axes(self) -> np.ndarray | None:
        """The main axes of the stored vectors (top eigenvectors of their second-moment matrix, from
        a sample), computed on first need and again whenever the index has grown 4x since. Any
        orthonormal axes keep the bound exact; these keep it tight (a handful of rows per query)."""
        total = len(self)
        if self.dims <= 2 * _AXES:
            return None
        if self._basis is None or total > 4 * self._basis_rows:
            if total < _AXES * 4:
                return None
            rng = np.random.default_rng(0)
            share = min(1.0, _BASIS_SAMPLE / total)
            sample = np.concatenate([
                p.mat[rng.choice(live, int(np.ceil(share * len(live))), replace=False)]
                for p in self._parts.values()
                if len(live := np.flatnonzero(p.alive[: p.size]))
            ])
            values, vectors = np.linalg.eigh((sample.T @ sample).astype(np.float64))
            self._basis = np.ascontiguousarray(vectors[:, np.argsort(values)[::-1][:_AXES]], dtype=np.float32)
            self._basis_rows = total
            for p in self._parts.values():
                for start in range(0, p.size, 8192):
                    p.project(self._basis, slice(start, min(start + 8192, p.size)))
        return self._basis


def _nearest(
    part: _Partition, live: np.ndarray, queries: np.ndarray, basis: np.ndarray | None, min_score: float
) -> list[tuple[str, float] | None]:
    """`VectorIndex.nearest_many` for one block of queries: a full product without `basis`."""
    n = part.size
    out: list[tuple[str, float] | None] = [None] * len(queries)
    if basis is None:
        sims = queries @ part.mat[:n].T
        sims[:, ~live] = -np.inf
        for i, b in enumerate(np.argmax(sims, axis=1)):
            if sims[i, b] >= min_score:
                out[i] = (part.ids[b], float(sims[i, b]))  # type: ignore[assignment]
        return out
    bound = _bounds(queries, basis) @ part.bounds[:n].T
    floor = min_score - _SLACK
    for q in np.flatnonzero(bound.max(axis=1) >= floor):  # a scan per query that has a candidate
        rows = np.flatnonzero(bound[q] >= floor)
        rows = rows[live[rows]]
        if len(rows):
            sims = part.mat[rows] @ queries[q]
            b = int(np.argmax(sims))
            if sims[b] >= min_score:
                out[q] = (part.ids[rows[b]], float(sims[b]))  # type: ignore[assignment]
    return out
