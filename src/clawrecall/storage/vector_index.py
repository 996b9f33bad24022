"""Exact in-memory cosine search, one numpy matrix per scope, kept in sync with the database.

Why exact and in memory: a matrix-vector product is memory-bound, so its cost is the rows
it reads; scopes are hard partitions and nearly every search names one or a few, so one
matrix per scope means a search reads only the rows it may return (no row copying, no
filtering after the fact), and recall is 1.0 by construction. Every write — by this
process or another — appends to the `changes` log through triggers, so before a search
the index applies only the rows changed since it last looked (see `sqlite.py`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from functools import lru_cache

import numpy as np


_BULK_QUERIES = 32  # from this many vectors at once, `nearest_many` uses every BLAS thread


@lru_cache(maxsize=1)
def _blas():
    """These products are small and memory-bound: one BLAS thread is as fast, and a second one
    stalls for milliseconds whenever another process holds the other core. (Built on first
    search: inspecting the loaded libraries takes a while, and `stats` never searches.)"""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@dataclass
class RowMeta:
    scope: str
    category: str
    created: float  # epoch seconds
    deleted: bool
    expires: float  # epoch seconds, inf when it never expires


class _Partition:
    """The rows of one scope: a growable matrix plus the per-row fields filters need."""

    def __init__(self, dims: int, capacity: int = 256):
        self.dims = dims
        self.size = 0  # slots ever used (high-water mark)
        self.free: list[int] = []
        self._alloc(capacity)

    def _alloc(self, capacity: int) -> None:
        self.mat = np.zeros((capacity, self.dims), dtype=np.float32)
        self.ids: list[str | None] = [None] * capacity
        self.alive = np.zeros(capacity, dtype=bool)
        self.deleted = np.zeros(capacity, dtype=bool)
        self.category = np.zeros(capacity, dtype=np.int32)
        self.created = np.zeros(capacity, dtype=np.float64)
        self.expires = np.full(capacity, np.inf, dtype=np.float64)

    def _grow(self) -> None:
        old = (self.mat, self.ids, self.alive, self.deleted, self.category, self.created, self.expires)
        n = len(self.ids)
        self._alloc(n * 2)
        self.mat[:n], self.ids[:n] = old[0], old[1]
        for new, prev in zip((self.alive, self.deleted, self.category, self.created, self.expires), old[2:]):
            new[:n] = prev

    def slot(self) -> int:
        if self.free:
            return self.free.pop()
        if self.size == len(self.ids):
            self._grow()
        self.size += 1
        return self.size - 1

    def mask(self, categories: np.ndarray | None, since: float | None, until: float | None,
             include_deleted: bool, only_deleted: bool, include_expired: bool, now: float) -> np.ndarray:
        n = self.size
        mask = self.alive[:n].copy()
        if only_deleted:
            mask &= self.deleted[:n]
        elif not include_deleted:
            mask &= ~self.deleted[:n]
        if not include_expired:
            mask &= self.expires[:n] > now
        if categories is not None:
            mask &= np.isin(self.category[:n], categories)
        if since is not None:
            mask &= self.created[:n] >= since
        if until is not None:
            mask &= self.created[:n] <= until
        return mask


class VectorIndex:
    def __init__(self, dims: int):
        self.dims = dims
        self._lock = threading.RLock()
        self._parts: dict[str, _Partition] = {}
        self._pos: dict[str, tuple[str, int]] = {}
        self._codes: dict[str, int] = {}
        self.last_seq = 0

    def __len__(self) -> int:
        return len(self._pos)

    def _code(self, name: str) -> int:
        return self._codes.setdefault(name, len(self._codes) + 1)

    def upsert(self, memory_id: str, vector: np.ndarray, meta: RowMeta) -> None:
        with self._lock:
            where = self._pos.get(memory_id)
            if where is not None and where[0] != meta.scope:
                self.remove(memory_id)
                where = None
            part = self._parts.get(meta.scope)
            if part is None:
                part = self._parts[meta.scope] = _Partition(self.dims)
            slot = part.slot() if where is None else where[1]
            self._pos[memory_id] = (meta.scope, slot)
            part.ids[slot] = memory_id
            part.mat[slot] = vector
            part.alive[slot] = True
            part.deleted[slot] = meta.deleted
            part.category[slot] = self._code(meta.category)
            part.created[slot] = meta.created
            part.expires[slot] = meta.expires

    def remove(self, memory_id: str) -> None:
        with self._lock:
            where = self._pos.pop(memory_id, None)
            if where is not None:
                part = self._parts[where[0]]
                part.alive[where[1]] = False
                part.ids[where[1]] = None
                part.free.append(where[1])

    def vector(self, memory_id: str) -> np.ndarray | None:
        where = self._pos.get(memory_id)
        return None if where is None else self._parts[where[0]].mat[where[1]].copy()

    def search(
        self,
        query: np.ndarray,
        k: int,
        *,
        scopes: list[str] | None,
        categories: list[str] | None,
        since: float | None,
        until: float | None,
        include_deleted: bool,
        only_deleted: bool,
        include_expired: bool,
        now: float,
    ) -> list[tuple[str, float]]:
        """The k nearest rows passing the filters, best first, as (id, cosine)."""
        with self._lock, _blas().limit(limits=1, user_api="blas"):
            if k <= 0:
                return []
            names = list(self._parts) if scopes is None else [s for s in scopes if s in self._parts]
            codes = None if categories is None else np.array([self._codes[c] for c in categories if c in self._codes])
            found: list[tuple[float, str]] = []
            for name in names:
                part = self._parts[name]
                if part.size == 0:
                    continue
                sims = part.mat[: part.size] @ query
                sims[~part.mask(codes, since, until, include_deleted, only_deleted, include_expired, now)] = -np.inf
                top = np.argpartition(-sims, k - 1)[:k] if sims.size > k else np.arange(sims.size)
                found.extend((float(sims[i]), part.ids[i]) for i in top if sims[i] != -np.inf)  # type: ignore[misc]
            found.sort(key=lambda x: -x[0])
            return [(memory_id, score) for score, memory_id in found[:k]]

    def nearest_many(self, queries: np.ndarray, scope: str, now: float) -> list[tuple[str, float] | None]:
        """For each query, its nearest live row in one scope (deduplication of a batch: one matmul)."""
        # A batch is a real matrix product, and nothing else runs meanwhile: every core helps.
        with self._lock, _blas().limit(limits=None if len(queries) >= _BULK_QUERIES else 1, user_api="blas"):
            part = self._parts.get(scope)
            if part is None or part.size == 0 or len(queries) == 0:
                return [None] * len(queries)
            live = part.mask(None, None, None, False, False, False, now)
            if not live.any():
                return [None] * len(queries)
            sims = queries @ part.mat[: part.size].T
            sims[:, ~live] = -np.inf
            best = np.argmax(sims, axis=1)
            return [(part.ids[b], float(sims[i, b])) for i, b in enumerate(best)]  # type: ignore[misc]
