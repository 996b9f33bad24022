"""Stores written by the release before named migrations (SQLite schema v7, PostgreSQL v5, and
the first release's v1), by the release of each numbered version before them (SQLite v2-v6, PostgreSQL
v2-v4), and by the release of every schema version since, upgrade in place, on both backends, to what a
new store is, and answer the same searches."""

from __future__ import annotations

import pytest
from legacy import LEGACY_VERSIONS, SCHEMA_VERSIONS, TOKENS, catalog, load, load_version

from clawrecall import Memory
from clawrecall.auth import TokenStore
from clawrecall.storage import is_postgres_url, open_store
from clawrecall.storage.migrations import REFUSED_BY_OLD_RELEASES, SETS, latest


def _recorded(store) -> list[tuple[str, str]]:
    return [tuple(r) for r in store.run("SELECT migration_set, name FROM migrations ORDER BY migration_set, name")]


ALL_STEPS = sorted((s.name, n) for s in SETS for n in s.steps)
RETIRED = {(s.name, n) for s in SETS for n in s.retired}  # known, recorded by some stores, no step now

pytestmark = pytest.mark.empty_db  # each test writes an old store into its database


@pytest.mark.model  # the old rows' vectors are the local model's: found by meaning, next to new ones
def test_store_of_the_last_release_upgrades_in_place_with_its_data(db_target):
    load(db_target, "latest")
    backend = "postgres" if is_postgres_url(db_target) else "sqlite"
    before = open_store(db_target, migrate=False)
    # every step the old number stands for; those added since are pending
    assert before.schema_version() == latest() - 20
    assert [s.label for s in before.pending_migrations()] == [
        "core/record-kinds", "core/validity", "core/fact-keys", "core/half-precision-vectors", "core/change-feed",
        "core/drop-sql-api", "core/message-windows", "core/no-change-feed", "core/sealed-secrets", "core/scope-vectors", "core/list-indexes",
        "core/session-index-scope", "core/window-text", "conversations/initial", "conversations/segment-summary",
        "jobs/initial", "knowledge/initial", "reembed/initial",
        "reembed/half-precision-staging", "insight/initial"]
    before.close()

    with Memory.open(db_target) as mem:
        assert sorted(_recorded(mem._store)) == ALL_STEPS
        assert mem._store.get_meta("schema_version") == REFUSED_BY_OLD_RELEASES
        assert mem.stats().schema_version == latest()
        if backend == "postgres":  # the vectors became half precision, and the HNSW index was made again over them
            assert mem._store.run("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                                  "WHERE attrelid = 'memories'::regclass AND attname = 'embedding'")[0][0] == "halfvec"
            index = mem._store.run("SELECT pg_get_indexdef('idx_memories_embedding'::regclass)")[0][0]
            assert "(embedding)::halfvec(384)" in index and "halfvec_cosine_ops" in index and "m='24'" in index

        [kept] = mem.list()
        assert kept.content == "Alice's camper van is parked behind the old mill?"
        assert (kept.tags, kept.metadata, kept.session_id, kept.scope) == (
            ["travel", "van"], {"source": "chat", "n": 1}, "s1", "user:alice")
        assert kept.importance == 0.9 and kept.created_at.year == 2025
        [gone] = mem.list(only_deleted=True)
        assert gone.content.startswith("The spare key")
        assert [h.action for h in mem.history(kept.id)] == ["add", "update"]
        assert mem.history(kept.id)[1].after == {"importance": 0.9}
        assert [e.key for e in mem.startup.list()] == ["rules"]

        tokens = TokenStore(mem._store)
        token = tokens.verify(TOKENS[backend])
        assert token is not None and token.user_id == "alice" and token.scopes == ["global", "user:alice"]
        assert tokens.verify(TOKENS[backend][:-1] + "x") is None

        # every leg finds old rows, and new rows join them
        assert mem.search("camper van", user_id="alice", mode="bm25")[0].memory.id == kept.id
        assert mem.search("camper vna", user_id="alice", mode="trigram")[0].memory.id == kept.id
        assert mem.search("where is the van parked", user_id="alice", mode="vector")[0].memory.id == kept.id
        added = mem.add("The camper van needs new tyres before the trip.", user_id="alice")
        assert {h.memory.id for h in mem.search("camper van", user_id="alice", mode="bm25")} == {kept.id, added.id}
        assert mem._store.integrity_problems() == []


@pytest.mark.parametrize("version", ["v1", "latest"])
def test_upgraded_stores_have_the_schema_of_a_new_one(db_target, version, request, tmp_path):
    """From the first release's schema and from the last one's alike: the steps and a fresh
    installation make the same tables, columns, constraints, indexes, triggers, functions and views."""
    fresh_target = request.getfixturevalue("other_pg_url") if is_postgres_url(db_target) else str(tmp_path / "fresh.db")
    fresh = open_store(fresh_target)
    expected = catalog(fresh)
    fresh.close()
    load(db_target, version)
    store = open_store(db_target)
    assert store.schema_version() == latest() and sorted(_recorded(store)) == ALL_STEPS
    assert catalog(store) == expected
    store.close()


def test_store_newer_than_this_release_is_refused(tmp_path):
    path = str(tmp_path / "new.db")
    store = open_store(path)
    store.run("INSERT INTO migrations (migration_set, name, applied_at) VALUES ('core', 'valid-time', '2030-01-01')")
    store.close()
    with pytest.raises(Exception, match="core/valid-time.*upgrade clawrecall"):
        open_store(path)


def test_a_retired_step_that_a_store_recorded_is_known_and_not_counted(tmp_path):
    """core/row-revisions made what core/change-feed removes, so it is no step now: a store that
    recorded it opens up to date, neither refused as newer nor counted past the latest version."""
    path = str(tmp_path / "revisions.db")
    store = open_store(path)
    store.run("INSERT INTO migrations (migration_set, name, applied_at) VALUES ('core', 'row-revisions', '2026-01-01')")
    store.close()
    store = open_store(path)
    assert store.pending_migrations() == [] and store.schema_version() == latest()
    store.close()


@pytest.mark.skipif("postgres" not in __import__("conftest").BACKENDS, reason="PostgreSQL not selected")
@pytest.mark.model  # the database's vectors are the local model's
def test_an_upgraded_store_opens_on_a_read_only_replica(pg_server, pg_url):
    """A read-only PostgreSQL (a hot standby) of a migrated database serves reads: nothing needs changing."""
    from urllib.parse import urlsplit

    from conftest import _admin

    load(pg_url, "latest")
    open_store(pg_url).close()  # the primary migrates
    _admin(pg_server, f"ALTER DATABASE {urlsplit(pg_url).path.lstrip('/')} SET default_transaction_read_only = on")
    with Memory.open(pg_url, writes={"enabled": False}) as mem:
        assert mem._store.schema_version() == latest() and mem._store.pending_migrations() == []
        assert [m.content for m in mem.list(include_deleted=True, order="oldest")][0].startswith("Alice's camper van")
        assert mem.search("camper van", mode="bm25", user_id="alice")[0].memory.content.startswith("Alice's")


def test_a_migration_committed_between_two_reads_is_not_taken_for_a_newer_release(db_target):
    """Another process may commit its migration after `applied` found no migrations table and before it
    reads `meta.schema_version`: the number it then reads is the one newer releases set, not an unknown one."""
    from clawrecall.storage import migrations, open_store

    store = open_store(db_target)
    try:
        real = store.table_exists
        calls = []

        def not_yet_once(name: str) -> bool:
            calls.append(name)
            return False if calls.count(name) == 1 and name == migrations.MIGRATIONS.name else real(name)

        store.table_exists = not_yet_once
        done, recorded = migrations.applied(store)
        assert recorded and sum(map(len, done.values())) == migrations.latest()
    finally:
        store.close()


def test_a_failure_while_migrating_is_raised_and_leaves_the_store_as_it_was(db_target, monkeypatch):
    """The migration transaction rolls back whole: a step that fails records nothing."""
    load(db_target, "latest")

    def lock_lost() -> None:
        raise RuntimeError("lock lost")

    store = open_store(db_target, migrate=False)
    monkeypatch.setattr(store, "lock_schema", lock_lost)
    with pytest.raises(RuntimeError, match="lock lost"):
        store.migrate()
    assert not store.table_exists("migrations")
    store.close()


# What every version's store (make_schema_stores.py fills each alike) answers once upgraded, on either backend:
# (query, mode, user, the top hit's content)
ANSWERS = [
    ("camper van", "bm25", "alice", "Alice's camper van is parked behind the old mill"),
    ("where is the camper van parked", "vector", "alice", "Alice's camper van is parked behind the old mill"),
    ("camper vna", "trigram", "alice", "Alice's camper van is parked behind the old mill"),
    ("aisle seat on flights", "hybrid", "alice", "Alice prefers an aisle seat on long flights"),
    ("peanuts", "bm25", None, "Bob is allergic to peanuts and shellfish"),
    ("blue-green releases", "hybrid", None, "Our deploys go out with blue-green releases"),
    ("lasagna with basil", "vector", None, "Grandma's lasagna recipe needs fresh basil"),
    ("spare key flower pot", "bm25", None, None),  # deleted: found by no search
]


def _new_schema(target: str, request, tmp_path) -> set[tuple]:
    """The catalog of a store created new on `target`'s backend."""
    fresh_target = request.getfixturevalue("other_pg_url") if is_postgres_url(target) else str(tmp_path / "fresh.db")
    fresh = open_store(fresh_target)
    expected = catalog(fresh)
    fresh.close()
    return expected


def _upgrades_and_answers_the_same(target: str, expected: set[tuple]) -> None:
    with Memory.open(target) as mem:
        assert [r for r in _recorded(mem._store) if r not in RETIRED] == ALL_STEPS
        assert mem.stats().schema_version == latest() and catalog(mem._store) == expected
        assert mem._store.integrity_problems() == []
        for query, mode, user, top in ANSWERS:
            hits = mem.search(query, mode=mode, user_id=user, min_score=0)
            assert (hits[0].memory.content if hits else None) == top or (
                top is None and all("spare key" not in h.memory.content for h in hits)), (query, mode)
        [kept] = [m for m in mem.list(user_id="alice") if m.content.startswith("Alice's camper van")]
        assert (kept.tags, kept.metadata, kept.session_id, kept.scope, kept.importance) == (
            ["travel", "van"], {"source": "chat", "n": 1}, "s1", "user:alice", 0.9)
        assert [h.action for h in mem.history(kept.id)] == ["add", "update"]
        [gone] = mem.list(only_deleted=True)
        assert gone.content.startswith("The spare key")
        assert [(e.key, e.priority) for e in mem.startup.list()] == [("rules", 0)]
        added = mem.add("The camper van needs new tyres before the trip", user_id="alice")
        assert {h.memory.id for h in mem.search("camper van", user_id="alice", mode="bm25")} == {kept.id, added.id}


@pytest.mark.parametrize("version", SCHEMA_VERSIONS, ids=[v["name"] for v in SCHEMA_VERSIONS])
def test_every_schema_version_upgrades_and_answers_the_same(db_target, version, request, tmp_path):
    expected = _new_schema(db_target, request, tmp_path)
    load_version(db_target, version["name"])
    before = open_store(db_target, migrate=False)
    assert sorted(f"{a}/{b}" for a, b in _recorded(before)) == version["steps"]  # the store is of its version
    assert {s.label for s in before.pending_migrations()} == {f"{a}/{b}" for a, b in ALL_STEPS} - set(version["steps"])
    before.close()
    _upgrades_and_answers_the_same(db_target, expected)


@pytest.mark.model  # those releases embedded with the local model alone: the stores hold its vectors
@pytest.mark.parametrize("version", LEGACY_VERSIONS, ids=[f"{v['backend']}-{v['name']}" for v in LEGACY_VERSIONS])
def test_every_numbered_schema_version_upgrades_and_answers_the_same(version, request, tmp_path):
    """The numbered versions before named migrations (SQLite v2-v6, PostgreSQL v2-v4), each written by the
    first commit of main that had it: the number stands for its steps, and the store upgrades to a new one's."""
    if version["backend"] == "postgres":
        if "postgres" not in __import__("conftest").BACKENDS:
            pytest.skip("PostgreSQL not selected")
        target = request.getfixturevalue("pg_url")
    else:
        target = str(tmp_path / "old.db")
    expected = _new_schema(target, request, tmp_path)
    load_version(target, version["name"])
    before = open_store(target, migrate=False)
    number = version["schema_version"]
    assert before.get_meta("schema_version") == str(number) and not before.table_exists("migrations")
    assert before.schema_version() == number  # the first N core steps (PostgreSQL v4: the API tokens third)
    done = {("core", step) for step in before.legacy_versions[number]}
    assert {s.label for s in before.pending_migrations()} == {f"{a}/{b}" for a, b in ALL_STEPS if (a, b) not in done}
    before.close()
    _upgrades_and_answers_the_same(target, expected)
