"""Facts that stay true until superseded, on both backends: the old version is kept, reads see the
current one by default and `as_of` a time what was true then; history and `versions` show the chain."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from clawrecall import Caller, Memory
from clawrecall.config import AccessConfig, ScopeAccess
from clawrecall.errors import ScopeError, ValidationError

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def _ftp(mem: Memory, *, at: datetime = T0) -> tuple[str, str]:
    """Alice's FTP: 250 W recorded at `at`, 260 W from ten days later."""
    old = mem.add("Alice's cycling FTP is 250 W", user_id="alice", category="fact", tags=["bike"], importance=0.9,
                  created_at=at).id
    new = mem.supersede(old, "Alice's cycling FTP is 260 W", user_id="alice", valid_from=at + timedelta(days=10))
    return old, new.id


def test_supersede_closes_the_old_fact_and_opens_the_new_one_keeping_both(mem):
    old, new = _ftp(mem)
    before, after = mem.get(old, user_id="alice"), mem.get(new, user_id="alice")
    assert before.content.endswith("250 W") and before.deleted_at is None  # nothing is deleted
    assert (before.valid_to, before.superseded_by, before.is_current) == (T0 + timedelta(days=10), new, False)
    assert (after.valid_from, after.valid_to, after.supersedes, after.is_current) == (T0 + timedelta(days=10), None, old, True)
    # the new version keeps the old one's owner, scope, category, tags and importance
    assert (after.scope, after.user_id, after.category, after.tags, after.importance) == ("user:alice", "alice", "fact", ["bike"], 0.9)
    assert before.valid_from == T0  # valid from when it was recorded


def test_search_and_list_return_the_current_version_and_as_of_what_was_true_then(mem):
    old, new = _ftp(mem)
    for mode in ("hybrid", "vector", "bm25", "trigram"):
        assert [h.id for h in mem.search("cycling FTP", user_id="alice", mode=mode)] == [new], mode
    assert [m.id for m in mem.list(user_id="alice")] == [new]
    assert mem.count(user_id="alice") == 1

    between = T0 + timedelta(days=5)
    for mode in ("hybrid", "vector", "bm25", "trigram"):
        assert [h.id for h in mem.search("cycling FTP", user_id="alice", mode=mode, as_of=between)] == [old], mode
    assert [m.id for m in mem.list(user_id="alice", as_of=between)] == [old]
    assert [m.id for m in mem.list(user_id="alice", as_of=T0 + timedelta(days=10))] == [new]  # the change is at valid_from
    assert mem.list(user_id="alice", as_of=T0 - timedelta(seconds=1)) == []  # nothing was known yet
    assert {m.id for m in mem.list(user_id="alice", include_superseded=True)} == {old, new}


def test_as_of_is_valid_time_a_fact_true_since_before_it_was_recorded_counts_from_then(mem):
    """A fact recorded today, true since last year, was true 30 days ago (valid time, not when the store
    learnt it); before its valid_from it was not."""
    now = datetime.now(timezone.utc)
    fact = mem.add("Bob moved to Brno", user_id="bob", valid_from=now - timedelta(days=365)).id
    assert mem.get(fact, user_id="bob").valid_from == now - timedelta(days=365)
    assert [m.id for m in mem.list(user_id="bob", as_of=now - timedelta(days=30))] == [fact]
    assert mem.list(user_id="bob", as_of=now - timedelta(days=400)) == []
    assert [h.id for h in mem.search("Bob Brno", user_id="bob", mode="vector", as_of=now - timedelta(days=30))] == [fact]
    assert mem.search("Bob Brno", user_id="bob", mode="vector", as_of=now - timedelta(days=400)) == []


def test_a_chain_of_three_and_its_history(mem):
    old, middle = _ftp(mem)
    last = mem.supersede(middle[:8], "Alice's cycling FTP is 262 W", user_id="alice", valid_from=T0 + timedelta(days=20)).id
    ids = [old, middle, last]
    for one in ids:  # from any version, the whole chain in order
        assert [m.id for m in mem.versions(one, user_id="alice")] == ids
    assert [m.id for m in mem.versions(mem.add("unrelated", user_id="alice").id, user_id="alice")] != ids
    for day, expected in ((5, old), (15, middle), (25, last)):
        assert [m.id for m in mem.list(user_id="alice", as_of=T0 + timedelta(days=day))] == [expected]

    history = mem.history(middle, user_id="alice")
    assert [h.action for h in history] == ["add", "supersede"]
    assert history[0].after["supersedes"] == old
    assert history[1].before == {"valid_to": None, "superseded_by": None}
    assert history[1].after == {"valid_to": (T0 + timedelta(days=20)).isoformat(), "superseded_by": last}
    assert [h.action for h in mem.history(old, user_id="alice")] == ["add", "supersede"]


def test_only_the_current_live_memory_is_superseded_and_a_refusal_changes_nothing(mem):
    old, new = _ftp(mem)
    with pytest.raises(ValidationError, match="already superseded"):
        mem.supersede(old, "Alice's FTP is 255 W", user_id="alice")
    with pytest.raises(ValidationError, match="must be after"):
        mem.supersede(new, "Alice's FTP is 255 W", user_id="alice", valid_from=T0)
    with pytest.raises(ValidationError, match="future"):
        mem.supersede(new, "Alice's FTP is 255 W", user_id="alice", valid_from=datetime.now(timezone.utc) + timedelta(days=1))
    with pytest.raises(ValidationError, match="content"):
        mem.supersede(new, "  ", user_id="alice")
    with pytest.raises(ValidationError, match="category"):
        mem.supersede(new, "Alice's FTP is 255 W", user_id="alice", category="nonsense")
    mem.delete(new, user_id="alice")
    with pytest.raises(ValidationError, match="deleted"):
        mem.supersede(new, "Alice's FTP is 255 W", user_id="alice")
    mem.undelete(new, user_id="alice")
    with pytest.raises(ScopeError):  # bob may not write alice's memories (he cannot even see them)
        mem.supersede(new, "Alice's FTP is 100 W", user_id="bob", scope="user:alice")
    assert mem.count(user_id="alice", include_deleted=True) == 1
    assert len(mem.list(user_id="alice", include_superseded=True)) == 2
    assert mem.get(new, user_id="alice").superseded_by is None


def test_a_project_writer_supersedes_anothers_fact_in_its_own_name(mem):
    mem.config.access = AccessConfig(scopes={"project:atlas": ScopeAccess(write=["user:alice", "user:bob"])})
    old = mem.add("Atlas ships in May", caller=Caller("alice", "planner"), scope="project:atlas").id
    new = mem.supersede(old, "Atlas ships in June", caller=Caller("bob", "main"))
    assert (new.scope, new.user_id, new.agent_id, new.supersedes) == ("project:atlas", "bob", "main", old)
    # the author through another agent: the new words are that agent's
    again = mem.supersede(new.id, "Atlas ships in July", caller=Caller("bob", "helper"))
    assert (again.user_id, again.agent_id) == ("bob", "helper")
    with pytest.raises(ScopeError, match="read-only"):  # a reader may not
        mem.config.access = AccessConfig(scopes={"project:atlas": ScopeAccess(read=["user:carol"], write=["user:bob"])})
        mem.supersede(again.id, "Atlas ships never", caller=Caller("carol"))


def test_the_new_version_is_not_a_duplicate_of_the_one_it_replaces(mem):
    """The corrected text is often nearly the old one: superseding never deduplicates against it, and a
    later add of the old text is no duplicate of the superseded version."""
    _ftp(mem)
    again = mem.add("Alice's cycling FTP is 250 W", user_id="alice")
    assert again.action == "created"


def test_export_and_import_keep_the_chain(mem, tmp_path):
    import io

    old, new = _ftp(mem)
    out = io.StringIO()
    assert mem.export_jsonl(out, user_id="alice") == 2
    target = Memory.open(tmp_path / "copy.db")
    try:
        assert target.import_jsonl(out.getvalue().splitlines(), user_id="alice").created == 2
        assert [m.id for m in target.list(user_id="alice")] == [new]
        assert [m.id for m in target.versions(old, user_id="alice")] == [old, new]
        assert [m.id for m in target.list(user_id="alice", as_of=T0 + timedelta(days=1))] == [old]
    finally:
        target.close()


def test_a_time_in_the_query_lifts_what_was_said_then(mem):
    now = datetime.now(timezone.utc)
    older = mem.add("Dinner with Carol at the Italian place", user_id="alice", created_at=now - timedelta(days=40)).id
    recent = mem.add("Dinner with Carol at the Thai place", user_id="alice", created_at=now - timedelta(days=1)).id
    plain = mem.search("dinner with Carol", user_id="alice", mode="bm25", explain=True)
    assert {h.id for h in plain} == {older, recent} and all("when" not in h.explain for h in plain)
    hits = mem.search("dinner with Carol yesterday", user_id="alice", mode="bm25", explain=True)
    assert hits[0].id == recent and hits[0].explain["when"] == pytest.approx(0.2)
    assert [h.id for h in hits] == [recent, older]  # a boost, not a filter
    ru = mem.search("ужин с Carol вчера", user_id="alice", mode="bm25", explain=True)
    assert ru and ru[0].id == recent and "when" in ru[0].explain


@pytest.mark.empty_db
def test_a_store_of_the_last_release_gets_validity_and_its_memories_are_current_from_their_creation(db_target):
    """The migration adds columns only: old rows are valid from their `created_at` and still true."""
    from legacy import load

    from clawrecall.storage import Filters, open_store

    load(db_target, "latest")
    store = open_store(db_target)
    try:
        [kept] = store.memories.find(Filters(), limit=10, offset=0, order="newest")
        assert (kept.valid_from, kept.valid_to, kept.superseded_by, kept.supersedes) == (kept.created_at, None, None, None)
        assert store.run("SELECT count(*) FROM memories WHERE valid_from IS NOT NULL")[0][0] == 0  # no row rewritten
        at = kept.created_at
        assert [m.id for m in store.memories.find(Filters(as_of=at), limit=10, offset=0, order="newest")] == [kept.id]
        assert store.memories.find(Filters(as_of=at - timedelta(seconds=1)), limit=10, offset=0, order="newest") == []
        assert store.memories.count(Filters(include_superseded=True, include_deleted=True)) == 2
    finally:
        store.close()
