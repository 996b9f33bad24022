"""The in-memory vector index of the SQLite backend: batch nearest-neighbour lookups (dedup)
must equal a brute-force scan, in small scopes (full product) and large ones (pruned by a
bound on the main axes)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import numpy as np
import pytest

from clawrecall.storage.vector_index import _PRUNE_FROM, RowMeta, VectorIndex


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, timezone.utc)

DIMS = 384


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _clustered(rng: np.random.Generator, n: int) -> np.ndarray:
    """Anisotropic vectors around a few centres, like sentence embeddings."""
    centres = rng.standard_normal((12, DIMS)) * np.linspace(3, 0.2, DIMS)
    return _unit(centres[rng.integers(0, 12, n)] + rng.standard_normal((n, DIMS)) * 0.6)


def _fill(index: VectorIndex, scope: str, vectors: np.ndarray, *, deleted: set[int] = frozenset()) -> list[str]:
    ids = [f"{scope}-{i}" for i in range(len(vectors))]
    index.upsert_many(ids, vectors, [RowMeta.of(scope, category="fact", created_at=0.0, deleted_at=0.0 if i in deleted else None) for i in range(len(ids))])
    return ids


def _brute(queries: np.ndarray, stored: np.ndarray, ids: list[str], alive: np.ndarray, min_score: float):
    sims = queries @ stored.T
    sims[:, ~alive] = -np.inf
    out = []
    for row in sims:
        b = int(np.argmax(row))
        out.append((ids[b], float(row[b])) if row[b] >= min_score else None)
    return out


def _near_copies(rng: np.random.Generator, stored: np.ndarray, n: int, noise: float) -> np.ndarray:
    return _unit(stored[rng.integers(0, len(stored), n)] + rng.standard_normal((n, DIMS)) * noise)


@pytest.mark.parametrize("size", [_PRUNE_FROM // 2, _PRUNE_FROM * 3])
@pytest.mark.parametrize("min_score", [0.95, 0.8])
def test_nearest_many_equals_a_full_scan(size, min_score):
    rng = np.random.default_rng(size)
    index = VectorIndex(DIMS)
    stored = _clustered(rng, size)
    deleted = set(rng.choice(size, size // 10, replace=False).tolist())
    ids = _fill(index, "user:a", stored, deleted=deleted)
    _fill(index, "user:b", _clustered(rng, 500))  # another scope is never consulted
    alive = np.array([i not in deleted for i in range(size)])
    queries = np.concatenate([
        _near_copies(rng, stored, 40, 0.005),  # near-duplicates, some of deleted rows
        _near_copies(rng, stored, 40, 0.03),  # around the threshold
        _clustered(rng, 40),  # unrelated
    ])
    got = index.nearest_many(queries, "user:a", min_score=min_score, now=_at(0.0))
    assert (index._basis is not None) == (size >= _PRUNE_FROM)  # the large scope took the pruned path
    want = _brute(queries, stored, ids, alive, min_score)
    assert [g and g[0] for g in got] == [w and w[0] for w in want]
    for g, w in zip(got, want):
        if w is not None:
            assert g[1] == pytest.approx(w[1], abs=1e-5)
    assert sum(w is not None for w in want) >= 30  # the case is not vacuous
    assert sum(w is None for w in want) >= 30


def test_nearest_many_stays_exact_after_the_index_grows_past_its_axes():
    """The axes come from the rows present when first needed; rows added later, from elsewhere
    in the space, are still found (the bound holds for any axes)."""
    rng = np.random.default_rng(7)
    index = VectorIndex(DIMS)
    first = _clustered(rng, _PRUNE_FROM)
    _fill(index, "global", first)
    index.nearest_many(first[:40], "global", min_score=0.95, now=_at(0.0))  # a batch: computes the axes
    axes = index._basis
    assert axes is not None
    index.remove("global-5")  # its slot is reused below, after the axes exist
    first[5] = _unit(rng.standard_normal((1, DIMS)))[0]
    index.upsert_many(["global-5"], first[5:6], [RowMeta.of("global", category="fact", created_at=0.0)])
    later = _unit(rng.standard_normal((_PRUNE_FROM, DIMS)))  # isotropic: far from those axes
    for i, v in enumerate(later):  # one at a time, as single adds arrive (the partition grows)
        index.upsert_many([f"late-{i}"], v[None, :], [RowMeta.of("global", category="fact", created_at=0.0)])
    queries = np.concatenate([_near_copies(rng, later, 40, 0.01), first[5:6]])
    got = index.nearest_many(queries, "global", min_score=0.95, now=_at(0.0))
    assert index._basis is axes  # 2x growth: the same axes still serve
    stored = np.concatenate([first, later])
    ids = [f"global-{i}" for i in range(len(first))] + [f"late-{i}" for i in range(len(later))]
    assert got == [
        (w[0], pytest.approx(w[1], abs=1e-5)) if w else None
        for w in _brute(queries, stored, ids, np.ones(len(stored), bool), 0.95)
    ]
    assert all(g is not None for g in got)


def test_a_batch_written_after_the_axes_exist_is_found_in_each_of_its_scopes():
    """One upsert, once the axes exist, of rows interleaved across scopes, replacing a row in
    place and moving one to another scope: each row's bound is the one of its own vector."""
    rng = np.random.default_rng(13)
    index = VectorIndex(DIMS)
    a, b = _clustered(rng, _PRUNE_FROM), _clustered(rng, _PRUNE_FROM)
    _fill(index, "user:a", a)
    _fill(index, "user:b", b)
    index.nearest_many(a[:40], "user:a", min_score=0.95, now=_at(0.0))  # a batch: computes the axes
    assert index._basis is not None
    batch = _clustered(rng, 60)
    ids = [f"new-{i}" for i in range(58)] + ["user:a-3", "user:a-7"]  # a-3 replaced in place, a-7 moves to b
    scopes = ["user:a" if i % 3 else "user:b" for i in range(58)] + ["user:a", "user:b"]
    index.upsert_many(ids, batch, [RowMeta.of(s, category="fact", created_at=0.0) for s in scopes])
    expected = {scope: {f"{scope}-{i}": v for i, v in enumerate(old)} for scope, old in (("user:a", a), ("user:b", b))}
    for memory_id, scope, v in zip(ids, scopes, batch):
        for rows in expected.values():
            rows.pop(memory_id, None)
        expected[scope][memory_id] = v
    for scope, rows in expected.items():
        stored, stored_ids = np.stack(list(rows.values())), list(rows)
        mine = batch[[i for i, s in enumerate(scopes) if s == scope]]
        queries = np.concatenate([_near_copies(rng, mine, 30, 0.005), _near_copies(rng, stored, 10, 0.005)])
        got = index.nearest_many(queries, scope, min_score=0.95, now=_at(0.0))
        want = _brute(queries, stored, stored_ids, np.ones(len(stored), bool), 0.95)
        assert got == [(w[0], pytest.approx(w[1], abs=1e-5)) if w else None for w in want]
        assert sum(w is not None and w[0] in ids for w in want) >= 25  # the new rows are the ones found


def test_once_the_axes_exist_a_single_query_is_pruned_and_exact(monkeypatch):
    """A single add's dedup takes the pruned path too (at 4.6k rows: 0.04 ms instead of 0.3)."""
    from clawrecall.storage import vector_index

    rng = np.random.default_rng(11)
    index = VectorIndex(DIMS)
    stored = _clustered(rng, _PRUNE_FROM * 2)
    ids = _fill(index, "global", stored)
    queries = np.concatenate([_near_copies(rng, stored, 20, 0.005), _clustered(rng, 20)])
    bases = []
    nearest = vector_index._nearest
    monkeypatch.setattr(vector_index, "_nearest", lambda part, live, q, basis, m: bases.append(basis) or nearest(part, live, q, basis, m))
    assert index.nearest_many(queries[:1], "global", min_score=0.95, now=_at(0.0)) is not None
    assert bases == [None]  # no axes yet: one query does not pay for them
    index.nearest_many(queries, "global", min_score=0.95, now=_at(0.0))  # a batch makes them
    assert index._basis is not None
    bases.clear()
    got = [index.nearest_many(q[None, :], "global", min_score=0.95, now=_at(0.0))[0] for q in queries]
    assert len(bases) == len(queries) and all(b is index._basis for b in bases)
    want = _brute(queries, stored, ids, np.ones(len(stored), bool), 0.95)
    assert got == [(w[0], pytest.approx(w[1], abs=1e-5)) if w else None for w in want]
    assert sum(w is not None for w in want) == 20


def test_nearest_many_in_an_unknown_or_empty_scope_finds_nothing():
    index = VectorIndex(DIMS)
    q = _unit(np.ones((2, DIMS)))
    assert index.nearest_many(q, "user:nobody", min_score=0.5, now=_at(0.0)) == [None, None]
    index.upsert_many(["x"], q[:1], [RowMeta.of("user:a", category="fact", created_at=0.0)])
    index.remove("x")
    assert index.nearest_many(q, "user:a", min_score=0.5, now=_at(0.0)) == [None, None]


def test_a_writer_puts_its_own_rows_in_its_index_at_commit_and_still_sees_other_writers(tmp_path):
    from clawrecall import Memory

    a, b = Memory.open(tmp_path / "m.db"), Memory.open(tmp_path / "m.db")
    try:
        a.add("The sailing club meets on Tuesdays")
        a.search("sailing", mode="vector")  # loads a's index
        mine = a.add_many([{"content": "Kayaks are stored in shed two"}, {"content": "Canoe paddles hang by the door"}])
        index = a._store._index
        assert all(index.vector(r.id) is not None for r in mine)  # taken at commit, not re-read later
        theirs = b.add("The harbour master is called Ines")
        after = a.add("Life jackets are checked every spring", dedup=False)  # (dedup would catch up first)
        assert a._store._index.vector(after.id) is None  # b wrote in between: a re-reads the log instead
        assert a.search("who is the harbour master?", mode="vector")[0].memory.id == theirs.id
        assert a.search("life jackets", mode="vector")[0].memory.id == after.id
        with pytest.raises(RuntimeError), a._store.transaction():
            gone = a.add("Rolled back: the boathouse key is under the mat")
            raise RuntimeError
        assert a._store._index.vector(gone.id) is None
        assert all(h.memory.id != gone.id for h in a.search("boathouse key", mode="vector"))
    finally:
        a.close()
        b.close()


def test_expired_rows_are_never_a_duplicate_on_the_pruned_path():
    rng = np.random.default_rng(3)
    index = VectorIndex(DIMS)
    stored = _clustered(rng, _PRUNE_FROM)
    ids = [f"m{i}" for i in range(len(stored))]
    index.upsert_many(ids, stored, [RowMeta.of("global", category="fact", created_at=0.0, expires_at=100.0 if i < 40 else None)
                                    for i in range(len(ids))])
    got = index.nearest_many(stored[:40], "global", min_score=0.95, now=_at(200.0))  # the first 40 expired at 100
    assert index._basis is not None
    assert all(g is None or g[0] not in ids[:40] for g in got)
    assert index.nearest_many(stored[:40], "global", min_score=0.95, now=_at(50.0)) == [
        (i, pytest.approx(1.0, abs=1e-5)) for i in ids[:40]
    ]


class _CommitFails:
    """The store's real connection, except that COMMIT fails (as on a full disk)."""

    def __init__(self, conn):
        self._conn = conn

    def execute(self, sql, *args):
        if sql == "COMMIT":
            raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_a_failed_commit_or_a_rollback_leaves_the_index_true_to_the_database(tmp_path):
    from clawrecall import Memory

    a, b = Memory.open(tmp_path / "m.db"), Memory.open(tmp_path / "m.db")
    try:
        a.add("The sailing club meets on Tuesdays")
        a.search("sailing", mode="vector")
        real = a._store._conn
        a._store._conn = _CommitFails(real)
        with pytest.raises(Exception, match="disk is full"):
            a.add_many([{"content": "Kayaks are stored in shed two"}, {"content": "Oars hang by the door"}])
        a._store._conn = real
        assert a.count() == 1
        a.add("Sails are patched in the loft")
        assert len(a._store._index) == a.count() == 2  # the failed batch never reached the index
        # A search inside a transaction reads its uncommitted rows; the rollback must drop them too.
        with pytest.raises(RuntimeError), a._store.transaction():
            ghost = a.add("The ghost rowboat is moored at pier nine")
            a.add("Pier nine has a blue crane")  # its dedup check reads the index, ghost included
            raise RuntimeError
        theirs = b.add("The harbour master is called Ines")  # takes the sequence numbers just rolled back
        mine = a.add("Life jackets are checked every spring")
        hits = {h.memory.id for h in a.search("harbour master, life jackets, rowboat, kayaks", mode="vector", limit=10)}
        assert {theirs.id, mine.id} <= hits
        assert all(a._store._index.vector(x) is None for x in (ghost.id,))
        assert a.count() == 4
    finally:
        a.close()
        b.close()


def _top(index: VectorIndex, query: np.ndarray, k: int, scope: str = "user:a", **filters) -> list[str]:
    from clawrecall.storage import Filters

    return [i for i, _ in index.search(query, k, Filters(scopes=[scope], now=_at(0.0), **filters))]


def _brute_top(query: np.ndarray, stored: np.ndarray, ids: list[str], k: int) -> list[str]:
    sims = stored @ query
    return [ids[i] for i in np.argsort(-sims, kind="stable")[:k]]


def _spread(rng: np.random.Generator, n: int, centres: int = 200) -> np.ndarray:
    """Many topics, as a long history holds: clusters have something to tell apart."""
    middle = rng.standard_normal((centres, DIMS))
    return _unit(middle[rng.integers(0, centres, n)] + rng.standard_normal((n, DIMS)) * 0.3)


def _clustered_by_search(index: VectorIndex, query: np.ndarray, scope: str = "user:a") -> None:
    """The second search of a scope starts the clustering in the background; wait for it."""
    _top(index, query, 1, scope)
    _top(index, query, 1, scope)
    assert index.clustering is not None
    index.clustering.join()


def _clustered_scope(seed: int, n: int) -> tuple[np.random.Generator, VectorIndex, np.ndarray, list[str]]:
    """A scope of n rows (the line at 1,000), clustered."""
    rng = np.random.default_rng(seed)
    index = VectorIndex(DIMS, exact_rows=1_000)
    stored = _spread(rng, n)
    ids = _fill(index, "user:a", stored)
    _clustered_by_search(index, stored[0])
    assert index._parts["user:a"].lists is not None
    return rng, index, stored, ids


def _meta(scope: str = "user:a", **values) -> RowMeta:
    return RowMeta.of(scope, category="fact", created_at=0.0, **values)


def test_a_scope_larger_than_exact_rows_is_searched_through_its_nearest_clusters():
    rng = np.random.default_rng(21)
    index = VectorIndex(DIMS, exact_rows=2_000)
    stored = _spread(rng, 6_000)
    ids = _fill(index, "user:a", stored)
    small = _spread(rng, 1_500)
    small_ids = _fill(index, "user:b", small)
    queries = _near_copies(rng, stored, 60, 0.1)
    assert _top(index, queries[0], 50) == _brute_top(queries[0], stored, ids, 50)  # read whole until clustered
    assert index.clustering is None  # a first search starts nothing: a one-off command would not use clusters
    _clustered_by_search(index, queries[0])
    part = index._parts["user:a"]
    assert part.lists is not None and len(part.lists.centroids) == 77  # sqrt(6,000) clusters
    recall, first = [], []
    for q in queries:
        got = _top(index, q, 50)
        recall.append(len(set(got) & set(_brute_top(q, stored, ids, 50))) / 50)
        first.append(len(set(got[:10]) & set(_brute_top(q, stored, ids, 10))) / 10)
    read = sum(b - a for a, b in part.lists.ranges(queries[0], part.size))
    assert read < len(stored) / 2  # the nearest third of the clusters, not the scope
    assert np.mean(recall) >= 0.9 and np.mean(first) >= 0.95  # approximate (the real model: docs/vector-search.md)
    for q in stored[:20]:  # a stored row's cluster is among its nearest
        assert _top(index, q, 1) == _brute_top(q, stored, ids, 1)
    assert index._parts["user:b"].lists is None  # at most exact_rows: every row compared
    for q in _near_copies(rng, small, 20, 0.3):
        assert _top(index, q, 10, "user:b") == _brute_top(q, small, small_ids, 10)
    q = queries[1]  # asked for more rows than the nearest clusters hold (a caller filtering further widens so): all
    assert _top(index, q, 3_000) == _brute_top(q, stored, ids, 3_000)


def test_a_filter_that_leaves_few_rows_of_a_clustered_scope_reads_them_all():
    """As PostgreSQL reads a filter's rows exactly when it leaves few: k hits whenever k rows pass."""
    rng = np.random.default_rng(25)
    index = VectorIndex(DIMS, exact_rows=1_000)
    stored = _spread(rng, 4_000)
    ids = [f"m{i}" for i in range(len(stored))]
    rare = set(rng.choice(len(stored), 30, replace=False).tolist())
    index.upsert_many(ids, stored, [RowMeta.of("user:a", category="rare" if i in rare else "fact", created_at=0.0)
                                    for i in range(len(ids))])
    _clustered_by_search(index, stored[0])
    assert index._parts["user:a"].lists is not None
    few = [ids[i] for i in sorted(rare)]
    for q in _near_copies(rng, stored, 20, 0.1):
        assert _top(index, q, 10, categories=["rare"]) == _brute_top(q, stored[sorted(rare)], few, 10)


def test_a_clustered_scope_finds_rows_added_replaced_and_removed_since_and_reclusters_as_it_grows():
    rng, index, stored, ids = _clustered_scope(22, 2_000)
    first = index._parts["user:a"].lists
    assert first is not None and first.clustered == 2_000
    fresh = _spread(rng, 3)
    index.upsert_many(["new-0"], fresh[:1], [_meta()])
    index.upsert_many([ids[5]], fresh[1:2], [_meta()])  # re-embedded
    index.upsert_many([ids[6]], stored[6:7], [_meta(importance=0.9)])  # the same vector
    index.remove(ids[7])
    assert _top(index, fresh[0], 1) == ["new-0"]
    assert _top(index, fresh[1], 1) == [ids[5]]
    assert ids[5] not in _top(index, stored[5], 5)  # its old vector is gone
    assert _top(index, stored[6], 1) == [ids[6]]  # a change of other columns keeps its clustered slot
    assert ids[7] not in _top(index, stored[7], 5)
    assert index._parts["user:a"].lists is first and index.clustering.is_alive() is False  # 2 of 2,000: no new clustering
    assert index.rows(["user:a"]) == 2_000 and index.rows(None) == 2_000
    more = _spread(rng, 600)
    _fill(index, "user:a", more)  # ids user:a-0.. again: the first 600 rows' new vectors (and user:a-7 back)
    assert index.rows(["user:a"]) == 2_001
    later = _spread(rng, 100)
    index.upsert_many([f"late-{i}" for i in range(100)], later, [_meta()] * 100)
    _clustered_by_search(index, later[0])
    again = index._parts["user:a"].lists
    assert again is not first and again.clustered == 2_101 and again.stale == 0  # reclustered, dead slots dropped
    want = dict(zip(ids, stored)) | dict(zip(ids[:600], more)) | {"new-0": fresh[0]}
    want |= {f"late-{i}": v for i, v in enumerate(later)}
    all_ids, all_vectors = list(want), np.stack(list(want.values()))
    for q in all_vectors[rng.choice(len(all_vectors), 30, replace=False)]:
        assert _top(index, q, 1) == _brute_top(q, all_vectors, all_ids, 1)
    assert all(np.array_equal(index.vector(i), v) for i, v in want.items())  # each id points at its moved slot
    # dedup reads the reordered slots exactly as before
    got = index.nearest_many(all_vectors[:50], "user:a", min_score=0.95, now=_at(0.0))
    assert [g and g[0] for g in got] == all_ids[:50]


def test_rows_written_while_the_clusters_are_made_are_all_found(monkeypatch):
    """Clustering runs beside searches and writes; what they wrote in between is not lost."""
    rng = np.random.default_rng(26)
    index = VectorIndex(DIMS, exact_rows=1_000)
    stored = _spread(rng, 3_000)
    ids = _fill(index, "user:a", stored)
    snapshot_taken, go_on = _held_kmeans(monkeypatch)
    q = stored[0]
    assert _top(index, q, 1) == [ids[0]]
    assert _top(index, q, 1) == [ids[0]]  # the second search starts the clustering
    assert snapshot_taken.wait(10)
    assert _top(index, stored[1], 1) == [ids[1]]  # searches go on, reading every row
    new = _spread(rng, 50)
    index.upsert_many([f"new-{i}" for i in range(50)], new, [_meta()] * 50)  # added
    replaced = _spread(rng, 20)
    index.upsert_many(ids[:20], replaced, [_meta()] * 20)  # replaced: new vectors
    for i in ids[20:40]:
        index.remove(i)  # removed; their slots are free ...
    reused = _spread(rng, 20)
    index.upsert_many([f"reuse-{i}" for i in range(20)], reused, [_meta()] * 20)  # ... and taken again
    go_on.set()
    index.clustering.join()
    part = index._parts["user:a"]
    assert part.lists is not None and part.lists.clustered == 3_000
    assert part.lists.stale == 40  # the replaced and the removed rows' clustered slots
    want = dict(zip(ids, stored)) | dict(zip(ids[:20], replaced)) | {f"new-{i}": v for i, v in enumerate(new)}
    want |= {f"reuse-{i}": v for i, v in enumerate(reused)}
    for i in ids[20:40]:
        del want[i]
    assert index.rows(["user:a"]) == part.live == len(want) == len(index._pos)
    assert all(np.array_equal(index.vector(i), v) for i, v in want.items())
    all_ids, all_vectors = list(want), np.stack(list(want.values()))
    for v in [*new, *replaced, *reused, *all_vectors[rng.choice(len(all_vectors), 30, replace=False)]]:
        assert _top(index, v, 1) == _brute_top(v, all_vectors, all_ids, 1)
    assert not set(ids[20:40]) & {i for v in stored[20:40] for i in _top(index, v, 5)}


def test_filters_apply_inside_the_clusters():
    rng = np.random.default_rng(23)
    index = VectorIndex(DIMS, exact_rows=500)
    stored = _spread(rng, 3_000)
    ids = [f"m{i}" for i in range(len(stored))]
    index.upsert_many(ids, stored, [_meta(deleted_at=0.0 if i % 2 else None) for i in range(len(ids))])
    _clustered_by_search(index, stored[0])
    assert index._parts["user:a"].lists is not None
    for i in range(0, 40):
        got = _top(index, stored[i], 10)
        assert len(got) == 10 and all(int(g[1:]) % 2 == 0 for g in got)
        assert (got[0] == ids[i]) == (i % 2 == 0)


def test_a_clustered_scope_is_read_whole_again_once_it_shrinks_to_half_the_line():
    rng, index, stored, ids = _clustered_scope(24, 1_200)
    for i in ids[:300]:
        index.remove(i)  # 900 rows: under the line, but clustering again at every crossing would cost more
    _top(index, stored[400], 1)
    part = index._parts["user:a"]
    assert part.lists is not None and part.free == []
    for i in ids[300:700]:
        index.remove(i)
    q = _near_copies(rng, stored[700:], 1, 0.3)[0]
    assert _top(index, q, 20) == _brute_top(q, stored[700:], ids[700:], 20)
    assert part.lists is None and len(part.free) == 700  # the dead slots are taken again
    assert index.clustering is None or not index.clustering.is_alive()


def test_a_scope_under_a_thousand_rows_is_never_clustered():
    rng = np.random.default_rng(27)
    index = VectorIndex(DIMS, exact_rows=0)
    stored = _spread(rng, 900)
    ids = _fill(index, "user:a", stored)
    q = _near_copies(rng, stored, 1, 0.3)[0]
    assert _top(index, q, 20) == _brute_top(q, stored, ids, 20)
    assert index.clustering is None and index._parts["user:a"].lists is None


def _held_kmeans(monkeypatch):
    """`_kmeans` waits for `go` once it has started (`started`)."""
    import threading

    from clawrecall.storage import vector_index

    started, go = threading.Event(), threading.Event()
    kmeans = vector_index._kmeans

    def held(rows, clusters, stopped):
        started.set()
        assert go.wait(10)
        return kmeans(rows, clusters, stopped)

    monkeypatch.setattr(vector_index, "_kmeans", held)
    return started, go


def test_an_index_the_store_dropped_stops_clustering_and_changes_nothing(monkeypatch):
    started, go = _held_kmeans(monkeypatch)
    rng = np.random.default_rng(28)
    index = VectorIndex(DIMS, exact_rows=1_000)
    stored = _spread(rng, 1_500)
    _fill(index, "user:a", stored)
    part = index._parts["user:a"]
    _top(index, stored[0], 1)
    _top(index, stored[0], 1)
    assert started.wait(10)
    index.stop()
    go.set()
    index.clustering.join(10)
    assert not index.clustering.is_alive()
    assert index._parts["user:a"] is part and part.lists is None and part.touched is None


def test_a_clustering_that_fails_is_logged_once_and_the_scope_read_whole(monkeypatch, caplog):
    from clawrecall.storage import vector_index

    def fails(rows, clusters, stopped):
        raise MemoryError("no room for the clusters")

    monkeypatch.setattr(vector_index, "_kmeans", fails)
    rng = np.random.default_rng(29)
    index = VectorIndex(DIMS, exact_rows=1_000)
    stored = _spread(rng, 1_500)
    ids = _fill(index, "user:a", stored)
    _top(index, stored[0], 1)
    _top(index, stored[0], 1)
    first = index.clustering
    first.join()
    for q in _near_copies(rng, stored, 5, 0.3):
        assert _top(index, q, 10) == _brute_top(q, stored, ids, 10)
    assert index.clustering is first  # not tried again at every search
    assert [r.getMessage() for r in caplog.records] == [
        "the vector index could not cluster user:a (it is read whole): no room for the clusters"]
    index.upsert_many(["new"], stored[:1], [_meta()])  # writes go on as before
    assert index.rows(["user:a"]) == 1_501 and index._parts["user:a"].touched is None


class _CountedProducts(np.ndarray):
    """A partition's matrix that counts the products read from it (a slice of it still counts)."""

    products = 0

    def __matmul__(self, other):
        _CountedProducts.products += 1
        return np.asarray(self) @ other


def test_searches_of_one_query_read_a_scope_once_until_it_is_written():
    """A search of messages reads their scope again for the windows of the long ones, with the same query
    and other filters: the second read takes the first's cosines. A write to the scope (a new row, a
    replaced vector) is seen by the next search of that query."""
    from clawrecall.storage import Filters

    rng = np.random.default_rng(11)
    index = VectorIndex(DIMS)
    vectors = _clustered(rng, 900)
    ids = [f"r{i}" for i in range(len(vectors))]
    kinds = ["message" if i % 3 else "window" for i in range(len(vectors))]
    index.upsert_many(ids, vectors, [RowMeta.of("s", kind=k, created_at=0.0) for k in kinds])
    part = index._parts["s"]
    part.mat = part.mat.view(_CountedProducts)
    _CountedProducts.products = 0
    query = _unit(rng.standard_normal((1, DIMS)))[0]

    def expected(kind: str, k: int = 7) -> list[str]:
        sims = np.where(np.array(kinds) == kind, vectors @ query, -np.inf)
        return [ids[i] for i in np.argsort(-sims)[:k]]

    messages = index.search(query, 7, Filters(scopes=["s"], kinds=("message",)))
    windows = index.search(query, 7, Filters(scopes=["s"], kinds=("window",)))
    assert [i for i, _ in messages] == expected("message") and [i for i, _ in windows] == expected("window")
    assert _CountedProducts.products == 1
    # a new row nearest the query, and a row whose vector became the query's opposite
    index.upsert_many(["new", "r1"], np.stack([query, -query]), [RowMeta.of("s", kind="message", created_at=0.0)] * 2)
    part.mat = part.mat.view(_CountedProducts)  # kept unless the arrays grew
    after = index.search(query, 900, Filters(scopes=["s"], kinds=("message",)))
    assert after[0][0] == "new" and after[0][1] == pytest.approx(1.0, abs=1e-5)
    assert after[-1][0] == "r1" and after[-1][1] == pytest.approx(-1.0, abs=1e-5)
    assert _CountedProducts.products == 2
