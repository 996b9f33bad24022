"""Exact in-memory cosine search over a numpy matrix, kept in sync with the database.

Why exact and in memory: at 100k × 384 dims a matrix-vector product takes a few ms on
two cores, recall is 1.0 by construction, and filters are cheap boolean masks (see
docs/vector-search.md for the measurements against sqlite-vec and HNSW). Every write —
by this process or another — appends to the `changes` log through triggers, so before a
search the index applies only the rows changed since it last looked.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np


@dataclass
class RowMeta:
    scope: str
    category: str
    created: float  # epoch seconds
    deleted: bool
    expires: float  # epoch seconds, inf when it never expires


class VectorIndex:
    def __init__(self, dims: int, capacity: int = 1024):
        self.dims = dims
        self._lock = threading.RLock()
        self._alloc(capacity)
        self._pos: dict[str, int] = {}
        self._free: list[int] = []
        self._size = 0  # slots ever used (high-water mark)
        self._codes: dict[str, int] = {}
        self.last_seq = 0

    def _alloc(self, capacity: int) -> None:
        self._mat = np.zeros((capacity, self.dims), dtype=np.float32)
        self._ids: list[str | None] = [None] * capacity
        self._alive = np.zeros(capacity, dtype=bool)
        self._deleted = np.zeros(capacity, dtype=bool)
        self._scope = np.zeros(capacity, dtype=np.int32)
        self._category = np.zeros(capacity, dtype=np.int32)
        self._created = np.zeros(capacity, dtype=np.float64)
        self._expires = np.full(capacity, np.inf, dtype=np.float64)

    def _grow(self) -> None:
        old = (self._mat, self._ids, self._alive, self._deleted, self._scope, self._category, self._created, self._expires)
        n = len(self._ids)
        self._alloc(n * 2)
        self._mat[:n] = old[0]
        self._ids[:n] = old[1]
        for new, prev in zip(
            (self._alive, self._deleted, self._scope, self._category, self._created, self._expires), old[2:]
        ):
            new[:n] = prev

    def _code(self, name: str) -> int:
        code = self._codes.get(name)
        if code is None:
            code = self._codes[name] = len(self._codes) + 1
        return code

    def __len__(self) -> int:
        return len(self._pos)

    def upsert(self, memory_id: str, vector: np.ndarray, meta: RowMeta) -> None:
        with self._lock:
            slot = self._pos.get(memory_id)
            if slot is None:
                if self._free:
                    slot = self._free.pop()
                else:
                    if self._size == len(self._ids):
                        self._grow()
                    slot = self._size
                    self._size += 1
                self._pos[memory_id] = slot
                self._ids[slot] = memory_id
            self._mat[slot] = vector
            self._alive[slot] = True
            self._deleted[slot] = meta.deleted
            self._scope[slot] = self._code(meta.scope)
            self._category[slot] = self._code(meta.category)
            self._created[slot] = meta.created
            self._expires[slot] = meta.expires

    def remove(self, memory_id: str) -> None:
        with self._lock:
            slot = self._pos.pop(memory_id, None)
            if slot is not None:
                self._alive[slot] = False
                self._ids[slot] = None
                self._free.append(slot)

    def clear(self) -> None:
        with self._lock:
            self._alloc(1024)
            self._pos.clear()
            self._free.clear()
            self._size = 0
            self.last_seq = 0

    def vector(self, memory_id: str) -> np.ndarray | None:
        slot = self._pos.get(memory_id)
        return None if slot is None else self._mat[slot].copy()

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
        with self._lock:
            n = self._size
            if n == 0 or k <= 0:
                return []
            mask = self._alive[:n].copy()
            if only_deleted:
                mask &= self._deleted[:n]
            elif not include_deleted:
                mask &= ~self._deleted[:n]
            if not include_expired:
                mask &= self._expires[:n] > now
            if scopes is not None:
                codes = [self._codes[s] for s in scopes if s in self._codes]
                mask &= np.isin(self._scope[:n], codes)
            if categories is not None:
                codes = [self._codes[c] for c in categories if c in self._codes]
                mask &= np.isin(self._category[:n], codes)
            if since is not None:
                mask &= self._created[:n] >= since
            if until is not None:
                mask &= self._created[:n] <= until
            candidates = np.flatnonzero(mask)
            if candidates.size == 0:
                return []
            if candidates.size == n:
                sims = self._mat[:n] @ query
            else:
                sims = self._mat[candidates] @ query
            if sims.size > k:
                top = np.argpartition(-sims, k - 1)[:k]
            else:
                top = np.arange(sims.size)
            top = top[np.argsort(-sims[top], kind="stable")]
            slots = top if candidates.size == n else candidates[top]
            return [(self._ids[s], float(sims[t])) for s, t in zip(slots, top)]  # type: ignore[misc]
