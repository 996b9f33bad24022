"""One definition of what a read may see: the SQL of `Filters` and the vector index's own test of
the same rules agree, on every combination, on both backends."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import numpy as np

from clawrecall.storage import Filters

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=10)


def _fill(mem) -> None:
    items = []
    for i in range(24):
        items.append({
            "content": f"Note {i} about the harbour, boat number {i * 7}",
            "user_id": ("alice", "bob", None)[i % 3],
            "category": ("fact", "preference", "decision")[i % 3 if i % 2 else 0],
            "tags": [("sea", "land")[i % 2]],
            "session_id": f"s{i % 4}",
            "created_at": T0 + timedelta(days=i % 12),
            "expires_at": (T0 + timedelta(days=5 + i % 10)) if i % 5 == 0 else None,
        })
    added = mem.add_many(items, dedup=False)
    for result in added[::7]:
        mem.delete(result.id)


def test_the_vector_index_and_sql_apply_the_same_filters(mem):
    _fill(mem)
    store = mem._store
    query = np.asarray(mem.upkeep.embedder.embed(["harbour boat"], kind="query")[0], dtype=np.float32)
    total = store.memories.count(Filters(include_deleted=True, include_expired=True))
    combos = itertools.product(
        (None, ["global"], ["user:alice", "global"], []),  # scopes
        (None, ["fact"], ["preference", "decision"]),  # categories
        (None, ["sea"]),  # tags (checked in SQL on the index's hits)
        (None, "s1"),  # session
        (None, T0 + timedelta(days=3)),  # since
        (None, T0 + timedelta(days=8)),  # until
        ((False, False), (True, False), (False, True)),  # include_deleted, only_deleted
        (False, True),  # include_expired
    )
    seen = set()
    for scopes, categories, tags, session, since, until, (incl, only), expired in combos:
        f = Filters(scopes=scopes, categories=categories, tags=tags, session_id=session, since=since, until=until,
                    include_deleted=incl, only_deleted=only, include_expired=expired, now=NOW)
        by_sql = {r.id for r in store.memories.find(f, limit=total + 1, offset=0, order="newest")}
        by_vector = {c.id for c in store.vector_candidates(query, f, total + 1)}
        assert by_vector == by_sql, f
        seen.add(len(by_sql))
    assert len(seen) > 10  # the combinations select many different sets, not all or nothing


def test_validity_and_as_of_agree_in_sql_and_in_the_vector_index(mem):
    """Versions superseded at different times, facts true since before they were recorded: the current
    rule and every `as_of` select the same rows in SQL and in the vector index."""
    _fill(mem)
    store = mem._store
    for n, record in enumerate(store.memories.find(Filters(now=NOW), limit=100, offset=0, order="oldest")[::3]):
        mem.supersede(record.id, f"Note {n} revised: the harbour moved", valid_from=record.created_at + timedelta(days=1 + n % 3))
    mem.add("The lighthouse has stood since long before it was noted", valid_from=T0 - timedelta(days=30),
            created_at=T0 + timedelta(days=6))
    query = np.asarray(mem.upkeep.embedder.embed(["harbour boat"], kind="query")[0], dtype=np.float32)
    total = store.memories.count(Filters(include_deleted=True, include_expired=True, include_superseded=True))
    seen = set()
    for as_of in (None, *(T0 + timedelta(days=d, hours=12) for d in range(-31, 16, 2))):
        for superseded in (False, True):
            f = Filters(as_of=as_of, include_superseded=superseded, include_expired=True, now=NOW)
            by_sql = {r.id for r in store.memories.find(f, limit=total + 1, offset=0, order="newest")}
            by_vector = {c.id for c in store.vector_candidates(query, f, total + 1)}
            assert by_vector == by_sql, f
            seen.add(frozenset(by_sql))
    assert len(seen) > 10
    current = store.memories.find(Filters(include_expired=True), limit=total, offset=0, order="newest")  # now: every change is past
    assert current and all(r.superseded_by is None for r in current)
    closing = store.memories.find(Filters(now=NOW, include_expired=True), limit=total, offset=0, order="newest")
    assert any(r.valid_to is not None and r.valid_to > NOW for r in closing)  # superseded only from a later time
