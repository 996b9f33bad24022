"""In-memory cosine search, one numpy matrix per scope, kept in sync with the database.

Why in memory: a matrix-vector product is memory-bound, so its cost is the rows it reads;
scopes are hard partitions and nearly every search names one or a few, so one matrix per
scope means a search reads only the rows it may return (no row copying, no filtering after
the fact). A scope of up to `exact_rows` rows is read whole: recall 1.0 by construction.
A larger one is kept in clusters (an inverted file) and a search reads the clusters nearest
the query, as PostgreSQL's HNSW serves a filter that leaves more than its
`exact_search_rows`. Every write — by this process or another — appends to the `changes`
log, so before a search the index applies only the rows changed since it last looked (see
`sqlite.py`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Sequence

import numpy as np

from .._blas import one_blas_thread
from .._time import as_utc
from .filters import INDEX_COLUMNS, Columns, Filters, index_tests
from .schema import MEMORIES

log = logging.getLogger(__name__)


_AXES = 32  # `nearest_many` first compares a batch on the stored vectors' 32 main axes ...
_BULK_QUERIES = 32  # ... when it holds at least this many vectors (or the axes exist) ...
_PRUNE_FROM = 384  # ... in a scope of at least this many rows (below, the full product is as cheap)
_BASIS_SAMPLE = 5_000  # rows the axes are computed from (more makes them no better for this)
_SLACK = 1e-3  # float32 rounding allowance on the bound
_QUERY_BLOCK = 256  # queries compared at once: temporaries stay bounded for any batch size
# A clustered scope: sqrt(rows) clusters (at most _MAX_CLUSTERS), of which a search reads the nearest
# share (with the rows added since the clustering). Measured in docs/vector-search.md: recall@50
# against the whole scope, and time.
_PROBE_SHARE = 1 / 3
_MAX_CLUSTERS = 1024
_CLUSTER_FROM = 1_000  # a smaller scope is always read whole (`exact_rows` 0 included): clusters save nothing
_RECLUSTER_SHARE = 0.25  # rows added or replaced since the clustering, as a share of it, that redo it
_KMEANS_ROUNDS = 8
_KMEANS_SAMPLE = 32  # rows per cluster the centroids are computed from


@dataclass(slots=True)
class _Lists:
    """The clusters of a large partition, whose slots were put in cluster order: cluster j is slots
    `starts[j]:starts[j+1]`. Slots from `clustered` on were added since and are read by every search;
    a clustered slot whose row is removed or gets another vector is left dead (`stale`), not reused."""

    centroids: np.ndarray  # clusters x dims, unit length
    starts: np.ndarray
    clustered: int
    stale: int = 0

    def ranges(self, query: np.ndarray, size: int) -> list[tuple[int, int]]:
        """The slot ranges a search for `query` reads: its nearest clusters and the rows added since."""
        probe = max(1, int(np.ceil(len(self.centroids) * _PROBE_SHARE)))
        sims = self.centroids @ query
        near = np.argpartition(-sims, probe - 1)[:probe] if probe < len(sims) else np.arange(len(sims))
        return [(int(self.starts[j]), int(self.starts[j + 1])) for j in np.sort(near)] + [(self.clustered, size)]

    def outdated(self, size: int) -> bool:
        return (size - self.clustered) + self.stale > _RECLUSTER_SHARE * self.clustered


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

    @classmethod
    def stored(cls, scope: str, values: Sequence[Any]) -> RowMeta:
        """From the `INDEX_COLUMNS` values as a record or a backend holds them (a time as a datetime, as
        ISO text on SQLite, or as epoch seconds already)."""
        return cls(scope, tuple(_epoch(v) if c in _TIME else v for c, v in zip(INDEX_COLUMNS, values)))


def _epoch(value: datetime | str | float | None) -> float:
    if value is None:
        return np.nan
    if isinstance(value, float):
        return value
    return (datetime.fromisoformat(value) if isinstance(value, str) else as_utc(value)).timestamp()


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
        self.live = 0  # rows held
        self.free: list[int] = []
        self.lists: _Lists | None = None  # clusters, once the partition holds more than `exact_rows`
        self.touched: set[int] | None = None  # while clusters are made: the slots written since their snapshot
        self.searches = 0  # in this process (clusters are made from the second on)
        self.unclusterable = False  # making clusters failed: it is read whole
        self.version = 0  # bumped by every write of a vector: `product` keeps its last answer until then
        self._product: tuple[int, np.ndarray, np.ndarray] | None = None  # (version, query, cosines of every slot)
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
        self.live += 1
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

    def product(self, query: np.ndarray) -> np.ndarray:
        """The cosines of every slot with `query` (read-only), kept until the next write or another query: a
        search of messages reads the same scope again for their windows (`Store.vector_candidates`), and a
        filter checked in SQL widens with the same query. The product is memory-bound, so it costs the
        scope's bytes (20k rows: ~3 ms) each time; the second read is a lookup."""
        last = self._product
        if last is not None and last[0] == self.version and len(last[2]) == self.size and np.array_equal(last[1], query):
            return last[2]
        sims = self.mat[: self.size] @ query
        sims.flags.writeable = False
        self._product = (self.version, query.copy(), sims)
        return sims

    def similarities(
        self, query: np.ndarray, tests: list[Callable[[Columns], np.ndarray]], k: int, exact_rows: int
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The cosines of the rows a search reads, -inf where a test fails, and their slots (None: all,
        in order). Clustered, it reads the nearest clusters, each a contiguous run of slots (one product
        each, no row copied), unless the filters leave at most `exact_rows` rows (then those rows alone,
        exactly, as PostgreSQL decides by a filter's rows) or the clusters read hold fewer than k of them."""
        mask = self.mask(tests)
        if self.lists is not None:
            passing = int(np.count_nonzero(mask))
            if passing > exact_rows:
                ranges = self.lists.ranges(query, self.size)
                slots = np.concatenate([np.arange(a, b) for a, b in ranges])
                kept = mask[slots]
                if np.count_nonzero(kept) >= k:
                    sims = np.concatenate([self.mat[a:b] @ query for a, b in ranges])
                    sims[~kept] = -np.inf
                    return sims, slots
            elif passing * 4 <= self.size:  # few rows: copying them out costs less than reading all (<~30 %)
                rows = np.flatnonzero(mask)
                return self.mat[rows] @ query, rows
        sims = self.product(query).copy()
        sims[~mask] = -np.inf
        return sims, None


class VectorIndex:
    def __init__(self, dims: int, exact_rows: int = 50_000, capacity: int = 256):
        self.dims = dims
        self.exact_rows = exact_rows  # a scope holding more is searched through its clusters
        self.capacity = capacity  # rows a new scope's arrays are made for (they double as it grows)
        self._lock = threading.RLock()
        self.clustering: threading.Thread | None = None  # the one scope being clustered, in the background
        self._stopped = False
        self._parts: dict[str, _Partition] = {}
        self._pos: dict[str, tuple[str, int]] = {}
        self._codes: dict[str, dict[str, int]] = {c: {} for c in INDEX_COLUMNS if c not in _TIME}
        self._basis: np.ndarray | None = None  # dims x _AXES, orthonormal columns
        self._basis_rows = 0  # rows the index held when the axes were computed
        self.last_seq = 0

    def __len__(self) -> int:
        return len(self._pos)

    def rows(self, scopes: Sequence[str] | None) -> int:
        """Rows held in these scopes (all when None), without the lock: each read is one atomic step."""
        if scopes is None:
            return len(self._pos)
        return sum(p.live for s in scopes if (p := self._parts.get(s)) is not None)

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
                if where is not None and (where[0] != meta.scope or self._clustered_moves(where, vectors[n])):
                    self.remove(memory_id)
                    where = None
                part = self._parts.get(meta.scope)
                if part is None:
                    part = self._parts[meta.scope] = _Partition(self.dims, self._codes, self.capacity)
                slot = part.slot() if where is None else where[1]
                if part.touched is not None:
                    part.touched.add(slot)
                self._pos[memory_id] = (meta.scope, slot)
                part.ids[slot] = memory_id
                rows, slots = placed.setdefault(meta.scope, ([], []))
                rows.append(n)
                slots.append(slot)
            for scope, (rows, slots) in placed.items():
                part = self._parts[scope]
                part.mat[slots] = vectors[rows]
                part.version += 1
                if bounds is not None:
                    part.bounds[slots] = bounds[rows]
                part.alive[slots] = True
                for column, values in zip(INDEX_COLUMNS, zip(*(metas[n].values for n in rows))):
                    part.cols[column][slots] = self._column(column, values)

    def nbytes(self) -> int:
        """The memory the rows take: each scope's arrays as allocated, and ~150 bytes a row for its id."""
        with self._lock:
            arrays = sum(p.mat.nbytes + p.bounds.nbytes + p.alive.nbytes + sum(c.nbytes for c in p.cols.values())
                         + 8 * len(p.ids) for p in self._parts.values())
            return arrays + 150 * len(self._pos)

    def drop_scope(self, scope: str) -> None:
        """Forget every row of a scope."""
        with self._lock:
            part = self._parts.pop(scope, None)
            if part is not None:
                for memory_id in part.ids[: part.size]:
                    if memory_id is not None:
                        self._pos.pop(memory_id, None)

    def remove(self, memory_id: str, scope: str | None = None) -> None:
        """Forget a row; with `scope`, only if it is held there (it may have moved to another since)."""
        with self._lock:
            where = self._pos.get(memory_id)
            if where is not None and (scope is None or where[0] == scope):
                del self._pos[memory_id]
                part = self._parts[where[0]]
                part.alive[where[1]] = False
                part.ids[where[1]] = None
                part.live -= 1
                if part.touched is not None:
                    part.touched.add(where[1])
                if part.lists is not None and where[1] < part.lists.clustered:
                    part.lists.stale += 1  # a new row there would sit in another row's cluster
                else:
                    part.free.append(where[1])

    def _clustered_moves(self, where: tuple[str, int], vector: np.ndarray) -> bool:
        """Whether a replaced row must leave its clustered slot: its vector changed (a re-embedded edit)."""
        part = self._parts[where[0]]
        return (part.lists is not None and where[1] < part.lists.clustered
                and not np.array_equal(part.mat[where[1]], vector.astype(np.float32, copy=False)))

    def vector(self, memory_id: str) -> np.ndarray | None:
        with self._lock:
            where = self._pos.get(memory_id)
            return None if where is None else self._parts[where[0]].mat[where[1]].copy()

    def search(self, query: np.ndarray, k: int, filters: Filters) -> list[tuple[str, float]]:
        """The k nearest rows passing the filters the index holds (`filters.index_tests`), best
        first, as (id, cosine). Fewer than k only when fewer pass: a caller that filters further
        and widens k reaches every row."""
        with self._lock:
            if k <= 0:
                return []
            scopes = filters.scopes
            names = list(self._parts) if scopes is None else [s for s in dict.fromkeys(scopes) if s in self._parts]
            for name in names:
                self._keep_clusters(name)
            return self._search([self._parts[name] for name in names], query, k, filters)

    def _search(self, parts: list[_Partition], query: np.ndarray, k: int, filters: Filters) -> list[tuple[str, float]]:
        with one_blas_thread():
            tests = index_tests(filters)
            found: list[tuple[float, str]] = []
            for part in parts:
                if part.size == 0:
                    continue
                sims, slots = part.similarities(query, tests, k, self.exact_rows)
                top = np.argpartition(-sims, k - 1)[:k] if sims.size > k else np.arange(sims.size)
                found.extend((float(sims[i]), part.ids[i if slots is None else slots[i]])
                             for i in top if sims[i] != -np.inf)
            found.sort(key=lambda x: -x[0])
            return [(memory_id, score) for score, memory_id in found[:k]]

    def _keep_clusters(self, scope: str) -> None:
        """Under the lock, at a search: from a scope's second search in this process (a one-off command
        would never use them), start clustering it in the background when it holds more than
        `exact_rows` rows, and again once rows added or replaced since reach `_RECLUSTER_SHARE`; until
        that is done it is read as before. A clustered scope is read whole again once it shrinks to
        half the line (not at the line: a scope hovering there would be clustered at every crossing)."""
        part = self._parts[scope]
        line = max(self.exact_rows, _CLUSTER_FROM)
        if part.lists is not None and part.live <= line // 2:
            part.free.extend(int(i) for i in np.flatnonzero(~part.alive[: part.lists.clustered]))  # its dead slots
            part.lists = None
        part.searches += 1
        stale = part.lists is None or part.lists.outdated(part.size)
        idle = self.clustering is None or not self.clustering.is_alive()
        if part.live > line and stale and part.searches >= 2 and not part.unclusterable and idle and not self._stopped:
            thread = threading.Thread(target=self._cluster, args=(scope, part), daemon=True, name="clawrecall-clusters")
            thread.start()
            part.touched = set()  # the thread takes its snapshot once this search lets go of the lock
            self.clustering = thread

    def stop(self) -> None:
        """The store dropped this index: a clustering under way ends at its next step."""
        self._stopped = True

    def _cluster(self, scope: str, part: _Partition) -> None:
        """In the background: k-means over a snapshot of the scope's rows, the scope's rows laid out in
        cluster order in a new partition, then, under the lock, that partition swapped in with every row
        written since the snapshot (added, replaced, removed: `part.touched`) taken from the live one,
        outside the clusters. Without the lock, the snapshot reads only rows no writer touches."""
        try:
            with self._lock:
                if self._parts.get(scope) is not part:
                    return
                slots = np.flatnonzero(part.alive[: part.size])
                mat, cols, ids = part.mat, {c: v[slots] for c, v in part.cols.items()}, [part.ids[i] for i in slots]
            with one_blas_thread():  # background work: the cores belong to the searches and the model
                vectors = mat[slots]
                clusters = min(_MAX_CLUSTERS, int(np.sqrt(len(slots))))
                centroids = _kmeans(vectors, clusters, lambda: self._stopped)
                cluster = _nearest_centroid(vectors, centroids)
            in_order = np.argsort(cluster, kind="stable")
            new = _Partition(self.dims, self._codes, capacity=len(slots) + len(slots) // 4 + 256)
            n = new.size = len(slots)
            np.take(vectors, in_order, axis=0, out=new.mat[:n])
            del vectors
            for c, values in cols.items():
                np.take(values, in_order, out=new.cols[c][:n])
            new.ids[:n] = [ids[i] for i in in_order]
            new.alive[:n] = True
            placed = {memory_id: (scope, slot) for slot, memory_id in enumerate(new.ids[:n])}
            lists = _Lists(centroids, np.searchsorted(cluster[in_order], np.arange(clusters + 1)), n)
            with self._lock:
                if self._parts.get(scope) is part and not self._stopped:
                    self._swap(scope, part, new, slots[in_order], placed, lists)
        except _Stopped:
            pass
        except Exception as exc:  # searches go on reading the scope whole; say why once
            log.warning("the vector index could not cluster %s (it is read whole): %s", scope, exc)
            part.unclusterable = True
        finally:
            with self._lock:
                part.touched = None

    def _swap(self, scope: str, part: _Partition, new: _Partition, order: np.ndarray,
              placed: dict[str | None, tuple[str, int]], lists: _Lists) -> None:
        """Under the lock: `new` (the snapshot's rows, `order` their slots in `part`) takes the rows
        written since from `part`, and replaces it."""
        n = len(order)
        np.take(part.bounds, order, axis=0, out=new.bounds[:n])  # as of now: the axes may have changed
        touched = np.zeros(part.size, dtype=bool)
        touched[list(part.touched or ())] = True
        dead = np.flatnonzero(touched[order])  # written since: not where the snapshot put them
        for i in dead:
            placed.pop(new.ids[i], None)
            new.ids[i] = None
        new.alive[dead] = False
        snapshot = np.zeros(part.size, dtype=bool)
        snapshot[order] = True
        since = np.flatnonzero(part.alive[: part.size] & (touched | ~snapshot))
        while n + len(since) > len(new.ids):
            new._grow()
        end = new.size = n + len(since)
        new.mat[n:end], new.bounds[n:end], new.alive[n:end] = part.mat[since], part.bounds[since], True
        for c, values in part.cols.items():
            new.cols[c][n:end] = values[since]
        new.ids[n:end] = [part.ids[i] for i in since]
        placed.update((memory_id, (scope, slot)) for slot, memory_id in enumerate(new.ids[n:end], n))
        new.live = int(np.count_nonzero(new.alive[:end]))
        lists.stale = len(dead)
        new.lists = lists
        self._pos.update(placed)  # type: ignore[arg-type]
        self._parts[scope] = new

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


class _Stopped(Exception):
    """The index was dropped while its clusters were being made."""


def _kmeans(rows: np.ndarray, clusters: int, stopped: Callable[[], bool] = lambda: False) -> np.ndarray:
    """Spherical k-means on a sample (seeded: the same store clusters the same way): unit centroids."""
    rng = np.random.default_rng(0)
    sample = rows[rng.choice(len(rows), min(len(rows), clusters * _KMEANS_SAMPLE), replace=False)]
    centroids = sample[rng.choice(len(sample), clusters, replace=False)].copy()
    for _ in range(_KMEANS_ROUNDS):
        if stopped():
            raise _Stopped
        nearest = _nearest_centroid(sample, centroids)
        by_cluster = np.argsort(nearest, kind="stable")
        bounds = np.searchsorted(nearest[by_cluster], np.arange(clusters))
        sums = np.zeros_like(centroids)
        filled_rows = np.unique(nearest)
        sums[filled_rows] = np.add.reduceat(sample[by_cluster], bounds[filled_rows], axis=0)
        norms = np.linalg.norm(sums, axis=1)
        filled = norms > 0
        centroids[filled] = sums[filled] / norms[filled, None]  # an empty cluster keeps its centroid
    return centroids


def _nearest_centroid(rows: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each row's most similar centroid, in blocks (the products stay small)."""
    out = np.empty(len(rows), dtype=np.int64)
    for start in range(0, len(rows), 8192):
        out[start : start + 8192] = np.argmax(rows[start : start + 8192] @ centroids.T, axis=1)
    return out


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
                out[i] = (part.ids[b], float(sims[i, b]))
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
                out[q] = (part.ids[rows[b]], float(sims[b]))
    return out
