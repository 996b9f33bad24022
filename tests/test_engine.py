"""The engine end to end on a real SQLite file and a real PostgreSQL; tests marked `model` embed with the
real all-MiniLM-L6-v2 model, the others with the `hash` provider (conftest.py)."""

from __future__ import annotations

import functools
import json
import uuid
from datetime import datetime, timedelta, timezone
from fractions import Fraction

import numpy as np
import pytest
from legacy import load

from clawrecall import (
    AmbiguousIdError,
    Caller,
    ConfigError,
    EmbeddingMismatchError,
    Memory,
    NotFoundError,
    ScopeError,
    ValidationError,
    WritesDisabledError,
)
from clawrecall.config import AccessConfig
from clawrecall.engine import _writes as engine_writes
from clawrecall.engine._validate import new_ids
from clawrecall.storage import open_store
from clawrecall.storage.migrations import CORE, latest


def _rows(mem, sql="SELECT count(*) FROM memories", params=()):
    """One value from plain SQL on the store's own database (either backend)."""
    return mem._store.run(sql, params)[0][0]


def _nested(depth: int) -> dict:
    top = node = {}
    for _ in range(depth):
        node["a"] = node = {}
    return top


def _text_left_anywhere(mem, word: str) -> int:
    """Rows that still hold `word`: the memories and history tables, and SQLite's full-text tables."""
    like, p = f"%{word}%", mem._store.dialect.p
    n = _rows(mem, f"SELECT count(*) FROM memories WHERE content LIKE {p}", (like,))
    n += _rows(mem, f"SELECT count(*) FROM history WHERE CAST(before AS TEXT) LIKE {p} OR CAST(after AS TEXT) LIKE {p}",
               (like, like))
    if mem._store.backend == "sqlite":
        n += _rows(mem, f"SELECT count(*) FROM memories_fts WHERE memories_fts MATCH '{word}'")
        n += _rows(mem, f"SELECT count(*) FROM memories_trgm WHERE memories_trgm MATCH '{word}'")
    return n


def test_lifecycle_store_search_update_delete_undelete_forget(mem):
    added = mem.add("User prefers dark mode in every editor", user_id="alice", category="preference")
    mem.add("Her cat is called Miso", user_id="alice", category="fact")
    mem.add("The quarterly report is due on Friday", user_id="alice", category="action_item")
    assert added.action == "created"

    hits = mem.search("which editor theme does alice prefer?", user_id="alice")
    assert hits[0].memory.id == added.id
    assert hits[0].age == "just now"
    assert mem.config.retrieval.min_score <= hits[0].score <= 1


    updated = mem.update(added.id, content="User prefers light mode since moving to a bright office", user_id="alice")
    assert updated.content.startswith("User prefers light mode")
    hits = mem.search("bright office light theme", user_id="alice")
    assert hits[0].memory.id == added.id  # re-embedded and re-indexed

    mem.delete(added.id, user_id="alice")
    assert added.id not in [h.memory.id for h in mem.search("light mode", user_id="alice")]
    assert mem.get(added.id, user_id="alice").deleted_at is not None
    assert added.id in [h.memory.id for h in mem.search("light mode", user_id="alice", include_deleted=True)]

    mem.undelete(added.id, user_id="alice", agent_id="assistant")
    assert mem.search("light mode", user_id="alice")[0].memory.id == added.id

    actions = [h.action for h in mem.history(added.id)]
    assert actions == ["add", "update", "delete", "undelete"]
    update = mem.history(added.id)[1]
    assert update.before == {"content": "User prefers dark mode in every editor"}
    assert update.after["content"].startswith("User prefers light mode")
    assert update.actor == "user:alice"
    assert mem.history(added.id)[3].actor == "user:alice agent:assistant"  # an agent acting for a user is both

    mem.forget(added.id, user_id="alice")
    with pytest.raises(NotFoundError):
        mem.get(added.id)
    assert _rows(mem, f"SELECT count(*) FROM memories WHERE id = '{added.id}'") == 0
    assert _text_left_anywhere(mem, "bright") == 0
    assert _text_left_anywhere(mem, "dark") == 0
    assert [h.action for h in mem.history(added.id)][-1] == "forget"
    assert mem.history(added.id[:8]) == mem.history(added.id)  # by prefix too, for the administrator
    with pytest.raises(NotFoundError):
        mem.history(added.id[:8], user_id="alice")
    assert added.id not in {h.memory.id for h in mem.search("light mode office", user_id="alice", min_score=0.0)}


@pytest.mark.model
def test_scores_are_absolute_and_min_score_says_nothing_is_relevant(mem):
    """The first hit of any query used to score ~1; now an unrelated query's hits score low, below the default
    minimum, so the answer is "nothing", while a related query keeps its hit."""
    mem.add("User prefers dark mode in every editor", user_id="alice", category="preference")
    mem.add("Deploys to production happen on Tuesdays", category="decision")
    assert mem.search("quantum chromodynamics lattice gauge", user_id="alice") == []
    everything = mem.search("quantum chromodynamics lattice gauge", user_id="alice", min_score=0)
    assert len(everything) == 2 and all(h.score < mem.config.retrieval.min_score for h in everything)
    related = mem.search("which days do we deploy to production?", user_id="alice")
    assert related[0].memory.content.startswith("Deploys") and related[0].score > 0.5
    assert mem.search("which days do we deploy to production?", user_id="alice", min_score=0.999) == []
    # any real number will do, a numpy one included (scores are often computed with numpy)
    for number in (np.float32(0.999), np.float64(0.999), Fraction(999, 1000)):
        assert mem.search("which days do we deploy to production?", user_id="alice", min_score=number) == []
    assert len(mem.search("quantum chromodynamics lattice gauge", user_id="alice", min_score=np.float64(0))) == 2
    for bad in (1.5, -0.1, float("nan"), np.float64("nan"), True, np.bool_(True), "0.5", [0.5]):
        with pytest.raises(ValidationError, match="min_score must be between 0 and 1"):
            mem.search("deploys", min_score=bad)


def test_keyword_searches_need_no_query_vector(mem, monkeypatch):
    """bm25 and trigram searches never embed (they work while the embedding provider is down); with no query
    vector they cannot score on the absolute scale, and keep their ranking score, saying why."""
    mem.add("The billing service runs on PostgreSQL 18", category="fact")

    def down(texts):
        raise AssertionError("a keyword-only search embedded its query")

    monkeypatch.setattr(mem._embedding, "queries", down)
    mem._built_pipeline = None
    for mode in ("bm25", "trigram"):
        hits = mem.search("billing PostgreSQL", mode=mode, explain=True)
        assert hits and hits[0].score == pytest.approx(hits[0].explain["ranking"], abs=1e-6)
        assert "no query vector" in hits[0].explain["relevance"]["uncalibrated"]


def test_min_score_applies_before_the_limit(mem, monkeypatch):
    """A search returns the best-ranked `limit` hits that reach `min_score`, not the first `limit` hits filtered."""
    from clawrecall.retrieval import pipeline

    for n in range(3):
        mem.add(f"Note {n} about the billing service", category="fact")
    real = pipeline.apply_relevance

    def first_irrelevant(items, *args, **kwargs):
        out = real(items, *args, **kwargs)
        for position, item in enumerate(out):
            item.relevance = 0.0 if position == 0 else 0.9
        return out

    monkeypatch.setattr(pipeline, "apply_relevance", first_irrelevant)
    ranked = mem.search("billing service", limit=3, min_score=0)
    hit = mem.search("billing service", limit=1, min_score=0.5)
    assert [h.memory.id for h in hit] == [ranked[1].memory.id]


def test_another_models_scores_are_ranking_scores_with_one_warning(db_target, caplog):
    """The calibration belongs to the model it was fitted for: with another, a hit's score is its ranking
    score, explain says so, and the log says it once."""
    fitted_for = f"local/some-other-model-{uuid.uuid4().hex[:8]}"  # warned about once per process
    with Memory.open(db_target, retrieval={"relevance": {"model": fitted_for}}) as other:
        other.add("The billing service runs on PostgreSQL 18", category="fact")
        with caplog.at_level("WARNING", logger="clawrecall.retrieval"):
            first = other.search("billing database", explain=True)
            other.search("billing database")
        assert first and first[0].score == pytest.approx(first[0].explain["ranking"], abs=1e-6)
        assert f"fitted for {fitted_for}" in first[0].explain["relevance"]["uncalibrated"]
        assert [r.message.count("ranking scores") for r in caplog.records] == [1]


def test_purge_removes_only_memories_deleted_past_retention(mem):
    old = mem.add("Old deleted note about gardening", category="fact")
    recent = mem.add("Recently deleted note about cycling", category="fact")
    kept = mem.add("Live note about swimming", category="fact")
    mem.delete(old.id)
    mem.delete(recent.id)
    past = datetime.now(timezone.utc) - timedelta(days=31)  # age the first deletion past the 30-day retention
    with mem._store.transaction():
        p = mem._store.dialect.p
        mem._store.run(f"UPDATE memories SET deleted_at = {p} WHERE id = {p}", (mem._store.dialect.ts(past), old.id))
    assert mem.purge() == 1
    with pytest.raises(NotFoundError):
        mem.get(old.id)
    assert mem.get(recent.id).deleted_at is not None
    assert mem.get(kept.id).deleted_at is None
    assert mem.purge(older_than_days=0) == 1
    assert mem.count(include_deleted=True) == 1


def test_dedup_returns_existing_id_within_scope_only(mem):
    first = mem.add("User prefers dark mode in every editor", user_id="alice")
    again = mem.add("User prefers dark mode in every editor.", user_id="alice")
    assert again.action == "duplicate" and again.existing_id == first.id and again.similarity >= 0.95
    other_user = mem.add("User prefers dark mode in every editor", user_id="bob")
    assert other_user.action == "created"
    forced = mem.add("User prefers dark mode in every editor", user_id="alice", dedup=False)
    assert forced.action == "created"
    assert mem.count(user_id="alice") == 2


@pytest.mark.model  # a paraphrase is a duplicate at 0.5 only by meaning
def test_dedup_threshold_is_configurable(db_target):
    with Memory.open(db_target, dedup={"threshold": 0.5}) as m:
        m.add("User prefers dark mode in every editor")
        assert m.add("The user likes dark themes in editors").action == "duplicate"
    with Memory.open(db_target, dedup={"enabled": False}) as m:
        assert m.add("User prefers dark mode in every editor").action == "created"


def test_add_many_is_one_batch_with_in_batch_dedup(mem):
    results = mem.add_many(
        [
            {"content": "Project Falcon ships in March", "category": "decision", "tags": ["falcon"]},
            {"content": "Project Falcon ships in March"},
            {"content": "Bob owns the billing service", "user_id": "bob"},
        ]
    )
    assert [r.action for r in results] == ["created", "duplicate", "created"]
    assert results[1].existing_id == results[0].id
    assert mem.get(results[2].id).scope == "user:bob"


def test_a_text_repeated_in_a_batch_is_embedded_once_and_stored_per_scope(mem):
    calls: list[list[str]] = []
    stream = mem.upkeep.embedder.stream

    def counting(texts, kind="passage"):
        calls.append(list(texts))
        return stream(texts, kind)

    mem.upkeep.embedder.stream = counting
    results = mem.add_many([{"content": "Standup is at 9:30", "user_id": u} for u in ("ann", "ben", "ann")] +
                           [{"content": "Retro is on Fridays", "user_id": "ann"}])
    assert [r.action for r in results] == ["created", "created", "duplicate", "created"]
    assert sorted(t for batch in calls for t in batch) == ["Retro is on Fridays", "Standup is at 9:30"]
    ann, ben = (mem.list(user_id=u, scope=f"user:{u}") for u in ("ann", "ben"))
    assert {r.content for r in ann} == {"Standup is at 9:30", "Retro is on Fridays"} and len(ben) == 1
    assert mem.search("standup time", user_id="ben")[0].memory.content == "Standup is at 9:30"


def test_in_batch_dedup_spans_blocks_and_keeps_scopes_apart(mem):
    import numpy as np

    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(600, 384)).astype(np.float32)
    vectors[550] = vectors[3] + 0.01 * rng.normal(size=384)  # same scope, far past the first block
    vectors[551] = vectors[4]  # another scope: not a duplicate
    vectors[552] = vectors[550]  # duplicate of a duplicate: points at what was kept
    items = [{"content": f"memory number {i}", "scope": "user:bob" if i == 551 else "global"} for i in range(600)]
    results = mem.add_many(items, embeddings=vectors)
    dupes = {i: r.existing_id for i, r in enumerate(results) if r.action == "duplicate"}
    assert dupes == {550: results[3].id, 552: results[3].id}
    assert mem.count() == 598


def test_in_batch_and_stored_duplicates_resolve_in_item_order(mem):
    """An item close to an earlier one that was kept is a duplicate of that item, even when it is also
    close to a stored memory; close only to earlier items that were themselves duplicates, it is a
    duplicate of the stored memory it matches."""
    import numpy as np

    rng = np.random.default_rng(11)

    def unit(v):
        return (v / np.linalg.norm(v)).astype(np.float32)

    def near(v, noise=0.005):
        return unit(v + noise * rng.normal(size=384))

    s, w, r, g = (unit(rng.normal(size=384)) for _ in range(4))
    z = unit(0.92 * w + np.sqrt(1 - 0.92**2) * unit(g - (g @ w) * w))  # cos(w, z) = 0.92: not duplicates,
    assert float(unit(w + z) @ w) > 0.95 and float(unit(w + z) @ z) > 0.95  # yet their mean is close to both
    stored = mem.add_many([{"content": "the same note s"}, {"content": "the same note z"}], embeddings=np.stack([s, z]))
    batch = np.stack([
        near(s),  # 0: stored duplicate of s
        near(s),  # 1: close to 0, which was not kept: duplicate of stored s
        r,  # 2: new
        near(r),  # 3: duplicate of 2
        w,  # 4: new (cos with stored z ≈ 0.92)
        unit(w + z),  # 5: close to 4 (kept) and to stored z: the batch item wins
    ])
    results = mem.add_many([{"content": f"the same note {i}"} for i in range(6)], embeddings=batch)
    assert [r.action for r in results] == ["duplicate", "duplicate", "created", "duplicate", "created", "duplicate"]
    assert [r.existing_id for r in results] == [stored[0].id, stored[0].id, None, results[2].id, None, results[4].id]


def test_texts_a_model_embeds_alike_but_that_share_no_words_are_not_duplicates(mem):
    """A model gives every text it cannot read (a script it has no tokens for, emoji) about the same vector;
    a duplicate also needs the words (character trigrams) of the one it repeats."""
    import numpy as np

    same = np.ones((1, 384), dtype=np.float32) / np.sqrt(384)
    first = mem.add_many([{"content": "ฉันชอบกาแฟ"}], embeddings=same)[0]
    batch = mem.add_many([{"content": "ฉันไม่ชอบชา"}, {"content": "茶"}, {"content": "咖啡"}, {"content": "🍕❤️"},
                          {"content": "咖啡"}], embeddings=np.repeat(same, 5, axis=0))
    assert [r.action for r in batch] == ["created", "created", "created", "created", "duplicate"]
    assert batch[4].existing_id == batch[2].id  # the same text again still is one
    again = mem.add_many([{"content": "ฉันชอบกาแฟ"}], embeddings=same)[0]
    assert (again.action, again.existing_id) == ("duplicate", first.id)


def test_scopes_are_hard_partitions(mem):
    secret = mem.add("Alice's bank PIN hint is her first cat", user_id="alice")
    mem.add("Bob's favourite editor is vim", user_id="bob")
    for hits in (
        mem.search("Alice bank PIN cat", user_id="bob"),
        mem.search("Alice bank PIN cat", user_id="bob", mode="bm25"),
        mem.search("Alice bank PIN cat", user_id="bob", mode="trigram"),
        mem.search("Alice bank PIN cat", user_id="bob", include_deleted=True, limit=100),
    ):
        assert secret.id not in [h.memory.id for h in hits]
    with pytest.raises(ScopeError):
        mem.search("PIN", user_id="bob", scope="user:alice")
    with pytest.raises(NotFoundError):
        mem.get(secret.id, user_id="bob")
    with pytest.raises(NotFoundError):
        mem.delete(secret.id, user_id="bob")
    with pytest.raises(NotFoundError):
        mem.forget(secret.id[:8], user_id="bob")
    with pytest.raises(ScopeError):
        mem.add("sneaky write", user_id="bob", scope="user:alice")
    assert secret.id not in [m.id for m in mem.list(user_id="bob", limit=100)]
    assert mem.count(user_id="bob") == 1
    # an unidentified local administrator sees everything; alice sees her own
    assert mem.get(secret.id).id == secret.id
    assert mem.search("bank PIN", user_id="alice")[0].memory.id == secret.id


def test_each_item_of_a_batch_is_scoped_on_its_own_and_a_refusal_is_never_remembered(mem):
    """Scopes are resolved once per (caller, scope) pair in a batch; the answer must still be per item."""
    results = mem.add_many([
        {"content": "Alice waters the ferns on Sundays", "user_id": "alice"},
        {"content": "Bob keeps his bicycle in the cellar", "user_id": "bob"},
        {"content": "Alice learns the cello in the evenings", "user_id": "alice"},
        {"content": "The team retro moved to Thursday afternoons"},
        {"content": "Bob reviews the roadmap for project apollo", "user_id": "bob", "scope": "project:apollo"},
    ])
    assert [mem.get(r.id).scope for r in results] == ["user:alice", "user:bob", "user:alice", "global", "project:apollo"]
    count = mem.count()
    for _ in range(2):  # the same refusal twice: an error is not cached as an answer
        with pytest.raises(ScopeError, match="^item 2: "):
            mem.add_many([
                {"content": "Bob likes strong coffee", "user_id": "bob"},
                {"content": "Bob writes into Alice's memory", "user_id": "bob", "scope": "user:alice"},
            ])
    with pytest.raises(ValidationError, match="invalid user_id"):
        mem.add_many([{"content": "Nobody can say who wrote this"}], user_id=["not", "text"])
    assert mem.count() == count


def test_an_item_may_name_no_other_owner_than_its_caller(mem):
    """The write scope is decided with the caller: an item naming another user or agent cannot plant a
    memory in that user's or agent's scope, through add_many or import_jsonl."""
    evil, bob = Caller(agent_id="evil"), Caller(user_id="bob")
    token = Caller(scopes=("global",))  # a token bound to no identity is not the administrator
    for caller, item in (
        (evil, {"content": "Planted into alice", "user_id": "alice"}),
        (evil, {"content": "Planted into another agent", "agent_id": "victim"}),
        (evil, {"content": "Planted into another agent", "agent_id": "victim", "scope": "agent:victim"}),
        (bob, {"content": "Planted into an agent", "agent_id": "victim", "scope": "agent:victim"}),
        (bob, {"content": "Planted into an agent", "scope": "agent:victim"}),
        (token, {"content": "Signed as alice", "user_id": "alice", "scope": "global"}),
    ):
        with pytest.raises(ScopeError):
            mem.add_many([item], caller=caller)
        with pytest.raises(ScopeError, match="^line 1: "):
            mem.import_jsonl([json.dumps(item)], caller=caller)
    with pytest.raises(ScopeError):
        mem.add("Planted into alice", caller=evil, scope="user:alice")
    assert mem.count() == 0
    # naming one's own ids is fine, and the ids an item leaves out are the caller's
    both = Caller(user_id="bob", agent_id="main")
    made = mem.add_many([{"content": "Bob keeps the spare keys in the red tin", "user_id": "bob"}], caller=both)[0]
    assert (made.memory.scope, made.memory.user_id, made.memory.agent_id) == ("user:bob", "bob", "main")
    made = mem.add_many([{"content": "Agent main answers in French", "agent_id": "main", "scope": "agent:main"}],
                        caller=both)[0]
    assert (made.memory.scope, made.memory.user_id, made.memory.agent_id) == ("agent:main", "bob", "main")


def test_a_markdown_import_stores_sections_as_its_caller(mem):
    """The Markdown import goes through the same rule: its sections belong to the calling agent (and
    user), and a token's allow-list still decides the agent's scope."""
    from clawrecall.openclaw import MarkdownFile, import_markdown

    files = [MarkdownFile("MEMORY.md", "- The release checklist lives in the blue binder.\n")]
    import_markdown(mem, Caller(user_id="bob", agent_id="main"), files)
    [stored] = mem.list()
    assert (stored.scope, stored.user_id, stored.agent_id) == ("agent:main", "bob", "main")
    with pytest.raises(ScopeError):
        import_markdown(mem, Caller(agent_id="other", scopes=("global",)), files)
    assert mem.count() == 1


def test_global_memories_are_visible_to_every_user_but_not_writable_into_other_users(mem):
    shared = mem.add("The office wifi password rotates monthly", category="fact")
    assert mem.get(shared.id).scope == "global"
    assert shared.id in [h.memory.id for h in mem.search("wifi password", user_id="carol")]
    assert mem.search("wifi password", user_id="carol", scope="user:carol") == []


def test_id_prefixes_resolve_and_ambiguity_is_an_error(mem):
    a = mem.add("First memory about tea")
    assert mem.get(a.id[:8]).id == a.id
    assert mem.get(a.id.upper()).id == a.id
    with pytest.raises(ValidationError):
        mem.get("abc")
    with pytest.raises(NotFoundError):
        mem.get("00000000")
    # two ids sharing a prefix, written as an import would
    mem.add_many([
        {"content": "tea one", "id": "aaaaaaaa-0000-4000-8000-000000000001"},
        {"content": "coffee two", "id": "aaaaaaaa-0000-4000-8000-000000000002"},
    ], dedup=False)
    with pytest.raises(AmbiguousIdError) as err:
        mem.get("aaaaaaaa")
    assert "aaaaaaaa-0000-4000-8000-000000000001" in str(err.value)
    assert mem.get("aaaaaaaa-0000-4000-8000-000000000002").content == "coffee two"


def test_metadata_nested_to_the_limit_is_stored_and_read_back(mem):
    made = mem.add("deep", metadata=_nested(63))
    assert mem.get(made.id).metadata == _nested(63)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"content": ""}, "content must not be empty"),
        ({"content": "   "}, "content must not be empty"),
        ({"content": "x", "importance": 7}, "between 0 and 1"),
        ({"content": "x", "confidence": -0.1}, "between 0 and 1"),
        ({"content": "x", "category": "gossip"}, "unknown category 'gossip'"),
        ({"content": "x", "scope": "team"}, "invalid scope"),
        ({"content": "x", "visibility": "public"}, "visibility"),
        ({"content": "x", "tags": [""]}, "invalid tag"),
        ({"content": "x", "metadata": {"when": object()}}, "JSON"),
        # PostgreSQL cannot store NUL: neither backend takes it, anywhere in a memory
        ({"content": "\x00"}, "content must not contain NUL"),
        ({"content": "x", "title": "a\x00b"}, "title must not contain NUL"),
        ({"content": "x", "tags": ["ok", "b\x00"]}, "a tag must not contain NUL"),
        ({"content": "x", "metadata": {"k": ["v", "\x00"]}}, "metadata must not contain NUL"),
        ({"content": "x", "metadata": {"\x00": 1}}, "metadata must not contain NUL"),
        ({"content": "x", "session_id": "s\x00"}, "session_id must not contain NUL"),
        ({"content": "x", "source_id": "\x00"}, "source_id must not contain NUL"),
        ({"content": "x", "user_id": "bob\x00"}, "invalid user_id"),
        ({"content": "x", "scope": "custom:a\x00b"}, "invalid scope"),
        # what Python makes of bytes that are not UTF-8 (argv, surrogateescape) is not stored anywhere
        ({"content": "caf\udce9"}, "content is not valid Unicode text"),
        ({"content": "x", "title": "\ud800"}, "title is not valid Unicode text"),
        ({"content": "x", "tags": ["\udcff"]}, "a tag is not valid Unicode text"),
        ({"content": "x", "metadata": {"k\udcff": 1}}, "metadata is not valid Unicode text"),
        ({"content": "x", "session_id": "\udcff"}, "session_id is not valid Unicode text"),
        ({"content": "x", "user_id": "b\udcff"}, "invalid user_id"),
        # wrong types are named, never coerced
        ({"content": b"bytes"}, "content: Input should be a valid string"),
        ({"content": "x", "tags": "abc"}, "tags: Input should be a valid list"),
        ({"content": "x", "importance": True}, "importance: Input should be a valid number"),
        ({"content": "x", "importance": "0.5"}, "importance: Input should be a valid number"),
        ({"content": "x", "metadata": [1]}, "metadata: Input should be a valid dictionary"),
        ({"content": "x", "metadata": {"score": float("nan")}}, "metadata must be JSON-serialisable: Out of range float"),
        ({"content": "x", "metadata": _nested(5000)}, "metadata is nested too deeply"),
        # deeper than the history's JSON encoder goes (255), which failed the write after validation
        ({"content": "x", "metadata": _nested(300)}, "metadata is nested 301 levels deep; the limit is 64"),
        ({"content": "x", "metadata": {"a": functools.reduce(lambda a, _: [a], range(64), 1)}},
         "metadata is nested 65 levels deep; the limit is 64"),
        ({"content": "x", "metadata": {"blob": "y" * 100_000}}, "metadata is 100012 characters as JSON; the limit is 100000"),
        # the short text fields are labels, with limits of their own
        ({"content": "x", "title": "t" * 1001}, "title is 1001 characters; the limit is 1000"),
        ({"content": "x", "session_id": "s" * 201}, "session_id is 201 characters; the limit is 200"),
        ({"content": "x", "source_type": "s" * 201}, "source_type is 201 characters; the limit is 200"),
        ({"content": "x", "source_id": "s" * 1001}, "source_id is 1001 characters; the limit is 1000"),
        ({"content": "x", "category": ""}, "unknown category ''"),
        ({"content": "x", "created_at": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))}, "created_at: .* out of range"),
        ({"content": "x", "expires_at": "soon"}, "expires_at: Input should be a valid datetime"),
    ],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(mem, kwargs, message):
    with pytest.raises(ValidationError, match=message):
        mem.add(**kwargs)
    assert _rows(mem) == 0
    assert _rows(mem, "SELECT count(*) FROM history") == 0


def test_nul_characters_in_reads_and_updates_are_clear_errors(mem):
    kept = mem.add("A memory that stays as it is")
    for call, message in (
        (lambda: mem.search("tea\x00"), "query must not contain NUL"),
        (lambda: mem.search("tea", tags=["\x00"]), "a tag must not contain NUL"),
        (lambda: mem.list(session_id="\x00"), "session_id must not contain NUL"),
        (lambda: mem.search("tea", user_id="\x00"), "invalid user_id"),
        (lambda: mem.update(kept.id, content="new\x00"), "content must not contain NUL"),
        (lambda: mem.update(kept.id, title="t" * 1001), "title is 1001 characters; the limit is 1000"),
        (lambda: mem.update(kept.id, title=5), "title must be a string, got int"),
        (lambda: mem.add("a memory of a session", caller=Caller("alice", "main", "s" * 201)),
         "session_id is 201 characters; the limit is 200"),  # the caller's session id, when the item names none
        (lambda: mem.update(kept.id, title="\x00"), "title must not contain NUL"),
        (lambda: mem.update(kept.id, metadata={"a": "\x00"}), "metadata must not contain NUL"),
        (lambda: mem.startup.set("k\x00", "rules"), "key must not contain NUL"),
        (lambda: mem.startup.set("k", "rules\x00"), "content must not contain NUL"),
        (lambda: mem.startup.delete("k\x00"), "key must not contain NUL"),
    ):
        with pytest.raises(ValidationError, match=message):
            call()
    assert mem.get(kept.id).content == "A memory that stays as it is"
    assert len(mem.history(kept.id)) == 1


def test_add_many_with_one_bad_item_writes_nothing(mem):
    with pytest.raises(ValidationError, match="item 2"):
        mem.add_many([{"content": "fine"}, {"content": "bad", "importance": 2}])
    for items, kwargs, message in (
        ("abc", {}, "^add_many takes a list of items, got str$"),
        ({"content": "one"}, {}, "^add_many takes a list of items, got dict$"),
        ([{"content": "fine"}, "text"], {}, "^item 2: expected a mapping or a NewMemory, got str$"),
        ([{"content": "a"}, {"content": "b"}], {"embeddings": [["x"] * 384] * 2}, "^embeddings must be numbers"),
    ):
        with pytest.raises(ValidationError, match=message):
            mem.add_many(items, **kwargs)
    assert _rows(mem) == 0


def test_read_arguments_of_the_wrong_kind_are_clear_errors(mem):
    mem.add("Tea at five", created_at=datetime(2026, 3, 1, tzinfo=timezone.utc))
    assert len(mem.search("tea", since="2026-02-01")) == 1  # ISO text is a time too
    assert mem.list(until="2026-02-01T00:00:00Z") == []
    for call, message in (
        (lambda: mem.search("tea", limit=True), "^limit must be between 1 and 1,000, got True$"),
        (lambda: mem.list(offset=False), "^offset must be between 0 and"),
        (lambda: mem.search("tea", since=5), "^since must be a datetime or ISO-8601 text, got int$"),
        (lambda: mem.list(since="last week"), "^since: not an ISO-8601 date or time: 'last week'$"),
        (lambda: mem.list(until="0001-01-01T00:00:00+05:00"), "^until: 0001-01-01T00:00:00\\+05:00 is out of range in UTC$"),
        (lambda: mem.search("caf\udce9"), "^query is not valid Unicode text"),
        (lambda: mem.update(mem.list()[0].id, importance=True), "^importance must be between 0 and 1, got True$"),
        (lambda: mem.list(user_id=""), "^invalid user_id '': ids are strings of 1–200 characters"),
        (lambda: mem.count(agent_id="a" * 201), "^invalid agent_id 'a{76}\\.\\.\\.: ids are strings of 1–200"),
        (lambda: mem.search("tea", scope="custom:" + "x" * 100_000), "^invalid scope 'custom:x{69}\\.\\.\\.: use global.*1–200 characters"),
    ):
        with pytest.raises(ValidationError, match=message):
            call()


@pytest.mark.model  # counts the local model's runs
def test_a_batch_rejected_by_validation_stops_its_embedding(mem, model_runs):
    from clawrecall.embeddings import _onnx

    runs = model_runs(mem.upkeep.embedder)
    items = [{"content": f"Note {i} on topic {i % 17}"} for i in range(3000)]
    items[2500]["category"] = "no-such-category"
    with pytest.raises(ValidationError, match="item 2501: unknown category"):
        mem.add_many(items)
    assert sum(runs) <= _onnx._AHEAD + mem.upkeep.embedder.batch_size  # started while validating, then dropped
    assert _rows(mem) == 0


def test_update_validates_and_keeps_the_record_on_error(mem):
    a = mem.add("Deploys happen on Tuesday", category="fact")
    with pytest.raises(ValidationError):
        mem.update(a.id, importance=7)
    with pytest.raises(ValidationError):
        mem.update(a.id, content="")
    assert mem.get(a.id).importance == 0.7 and mem.get(a.id).content == "Deploys happen on Tuesday"
    assert [h.action for h in mem.history(a.id)] == ["add"]


def test_search_filters(mem):
    base = datetime(2025, 1, 1, tzinfo=timezone.utc)
    mem.add_many([
        {"content": "Decided to use PostgreSQL for billing", "category": "decision", "tags": ["db"], "created_at": base},
        {"content": "PostgreSQL upgrade is scheduled", "category": "action_item", "tags": ["ops"], "created_at": base + timedelta(days=40)},
        {"content": "PostgreSQL backups run nightly", "category": "fact", "tags": ["ops", "db"], "created_at": base + timedelta(days=80)},
    ])
    assert {h.memory.category for h in mem.search("PostgreSQL", category="decision")} == {"decision"}
    assert {h.memory.content for h in mem.search("PostgreSQL", tags=["ops"])} == {
        "PostgreSQL upgrade is scheduled", "PostgreSQL backups run nightly"}
    window = mem.search("PostgreSQL", since=base + timedelta(days=10), until=base + timedelta(days=50))
    assert [h.memory.content for h in window] == ["PostgreSQL upgrade is scheduled"]
    with pytest.raises(ValidationError):
        mem.search("PostgreSQL", category="nope")
    with pytest.raises(ValidationError):
        mem.search("")
    with pytest.raises(ValidationError):
        mem.search("x", limit=0)


def test_explain_shows_every_stage(mem):
    mem.add("Alice prefers green tea in the morning", user_id="alice", category="preference")
    hit = mem.search("what tea does alice drink", user_id="alice", explain=True)[0]
    assert set(hit.explain["legs"]) >= {"vector", "bm25"}
    assert {"fused", "final"} <= set(hit.explain)
    assert hit.explain["final"] == pytest.approx(hit.score, abs=1e-5)


def test_typo_and_cjk_found_by_trigram_leg(mem):
    mem.add("Kubernetes cluster upgrade is planned for June")
    cjk = mem.add("用户喜欢深色主题的编辑器")
    assert mem.search("kubernets clustr", mode="trigram")[0].memory.content.startswith("Kubernetes")
    assert mem.search("深色主题", mode="trigram")[0].memory.id == cjk.id
    assert mem.search("深色主题")[0].memory.id == cjk.id


@pytest.mark.model  # the hybrid search's relevance weighs the model's cosine
def test_a_cjk_word_of_one_or_two_characters_is_found_inside_longer_text(mem):
    """No trigram fits "咖啡", and BM25 indexes a run of CJK text as one token."""
    coffee = mem.add("我每天早上喝咖啡，不加糖", user_id="alice")
    mem.add("用户喜欢在所有编辑器中使用深色模式", user_id="alice")
    mem.add("咖啡豆放在冰箱里", user_id="bob")
    for mode in ("trigram", "hybrid"):
        hits = mem.search("咖啡", user_id="alice", mode=mode)
        assert hits[0].memory.id == coffee.id and all(h.memory.user_id != "bob" for h in hits)
    assert [h.memory.id for h in mem.search("糖 咖啡", user_id="alice", mode="trigram")] == [coffee.id]
    assert mem.search("茶", user_id="alice", mode="trigram") == []


def test_expired_memories_are_hidden(mem):
    gone = mem.add("Temporary door code 4411", expires_at=datetime.now(timezone.utc) - timedelta(minutes=1))
    live = mem.add("Permanent door code 9000")
    ids = [h.memory.id for h in mem.search("door code")]
    assert live.id in ids and gone.id not in ids
    assert mem.stats().expired == 1


def test_list_count_stats(mem):
    mem.add_many([{"content": f"note number {i} about topic {i}", "category": "fact"} for i in range(5)])
    mem.add("a preference about tabs over spaces", category="preference", user_id="alice")
    assert len(mem.list(limit=3)) == 3
    assert len(mem.list(limit=3, offset=3)) == 3
    assert [m.content for m in mem.list(order="oldest", limit=1)] == ["note number 0 about topic 0"]
    assert mem.count() == 6 and mem.count(category="preference") == 1
    mem.delete(mem.list(category="preference")[0].id)
    assert mem.count() == 5 and mem.count(include_deleted=True) == 6
    assert len(mem.list(only_deleted=True)) == 1
    stats = mem.stats()
    assert (stats.total, stats.active, stats.deleted) == (6, 5, 1)
    assert stats.by_category == {"fact": 5}
    assert stats.embedding.model == "hashed-word-trigrams" and stats.embedding.dimensions == 384
    assert stats.schema_version == latest() and stats.backend == mem._store.backend


def test_writes_disabled_by_config(db_target):
    with Memory.open(db_target) as m:
        a = m.add("kept memory")
    with Memory.open(db_target, writes={"enabled": False}) as m:
        for call in (lambda: m.add("x"), lambda: m.delete(a.id), lambda: m.update(a.id, content="y"), lambda: m.forget(a.id)):
            with pytest.raises(WritesDisabledError):
                call()
        assert m.search("kept memory")[0].memory.id == a.id


def test_embedding_model_mismatch_is_caught_at_open(db_target):
    with Memory.open(db_target) as m:
        m.add("vectors from the configured model")
    with pytest.raises(EmbeddingMismatchError) as err:
        Memory.open(db_target, embedding={"provider": "openai", "model": "text-embedding-3-small", "api_key": "k"})
    text = str(err.value)
    assert "hash/hashed-word-trigrams (384 dims)" in text and "openai/text-embedding-3-small (1536 dims)" in text
    with pytest.raises(EmbeddingMismatchError, match="768 dims"):
        Memory.open(db_target, embedding={"dimensions": 768})
    # a store opened without the check (doctor, stats) still reads
    with Memory.open(db_target, check_embedding=False, embedding={"dimensions": 768}) as m:
        assert m.count() == 1


def test_unknown_config_key_and_missing_variable(db_path, tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="unknown keys: bogus"):
        Memory.open(db_path, bogus=1)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[embedding]\nprovider = "openai"\napi_key = "${MISSING_KEY_FOR_TEST}"\n')
    monkeypatch.delenv("MISSING_KEY_FOR_TEST", raising=False)
    with pytest.raises(ConfigError, match="Environment variable MISSING_KEY_FOR_TEST is not set"):
        Memory.open(db_path, config_path=cfg)
    assert not db_path.exists()


def test_two_handles_on_one_file_see_each_others_writes(db_target):
    a = Memory.open(db_target)
    b = Memory.open(db_target)
    try:
        first = a.add("Written by the first handle about sailing")
        assert b.search("sailing")[0].memory.id == first.id
        b.delete(first.id)
        assert a.search("sailing") == [] or a.search("sailing")[0].memory.id != first.id
        b.undelete(first.id)
        b.forget(first.id)
        assert all(h.memory.id != first.id for h in a.search("sailing"))
    finally:
        a.close()
        b.close()


def test_a_change_applies_to_the_memory_as_stored_when_it_commits(db_target, monkeypatch):
    """Another process changes or erases a memory while this one embeds its new content or decides
    to delete it: neither change is undone, and an erased memory does not come back."""
    a = Memory.open(db_target)
    b = Memory.open(db_target)
    try:
        doomed = a.add("The dentist appointment is on Friday").id
        embed = a._embedding.passages

        def embed_while_b_changes(texts):
            b.update(doomed, title="health")
            return embed(texts)

        a._embedding.passages = embed_while_b_changes
        changed = a.update(doomed, content="The dentist appointment is on Monday")
        assert (changed.title, changed.content) == ("health", "The dentist appointment is on Monday")
        assert b.get(doomed).title == "health"
        assert [(h.action, h.before) for h in b.history(doomed)][-1] == (
            "update", {"content": "The dentist appointment is on Friday"}
        )

        resolve = engine_writes.resolve

        def resolve_while_b_changes(store, *args):
            found = resolve(store, *args)
            if store is a._store:
                b.update(doomed, importance=0.2)
            return found

        monkeypatch.setattr(engine_writes, "resolve", resolve_while_b_changes)
        deleted = a.delete(doomed)
        assert deleted.deleted_at is not None and deleted.importance == 0.2 and deleted.title == "health"
        assert b.get(doomed).importance == 0.2
        monkeypatch.undo()

        def embed_while_b_forgets(texts):
            b.forget(doomed)
            return embed(texts)

        a._embedding.passages = embed_while_b_forgets
        with pytest.raises(NotFoundError, match="erased"):
            a.update(doomed, content="My PIN is 9999")
        assert [h.action for h in b.history(doomed)][-1] == "forget"
        *earlier, erased = b.history(doomed)
        assert all(h.before is None and h.after is None for h in earlier)
        # the forget row keeps where the memory was (for the change feed), nothing of what it said
        assert erased.before is None and erased.after == {"scope": "global", "agent_id": None, "visibility": "shared"}
        assert b.count(include_deleted=True) == 0
    finally:
        a.close()
        b.close()


def test_an_import_beside_another_import_of_the_same_file_skips_what_the_other_stored(db_target):
    lines = [json.dumps({"id": str(uuid.uuid4()), "content": f"Imported fact number {n} about rivers"}) for n in range(3)]
    a = Memory.open(db_target)
    b = Memory.open(db_target)
    try:
        add_records = a._writes.add_records  # the write path every import goes through (its records validated)
        calls = []

        def add_records_after_b(records, *args, **kwargs):  # b stores the next lines after a's check of this chunk
            calls.append(len(records))
            if len(calls) == 1:
                b.import_jsonl(lines[1:])
            return add_records(records, *args, **kwargs)

        a._writes.add_records = add_records_after_b
        counts = a.import_jsonl(lines, chunk=1)
        assert counts.model_dump(include={"read", "created", "duplicates", "skipped"}) == {
            "read": 3, "created": 1, "duplicates": 0, "skipped": 2}
        assert [(d["line"], d["reason"]) for d in counts.left_out] == [(2, "id_exists"), (3, "id_exists")]
        assert calls == [1]

        a._writes.add_records = add_records
        more = [json.dumps({"id": str(uuid.uuid4()), "content": "Imported fact about lakes"})]
        collect = a._embedding.collect

        def collect_while_b_imports(*args):  # b stores this very chunk while a embeds it
            b.import_jsonl(more)
            return collect(*args)

        a._embedding.collect = collect_while_b_imports
        with pytest.raises(ValidationError, match="already exists"):  # (skipping near-duplicates would hide the race)
            a.import_jsonl(more, on_duplicate="keep")
        a._embedding.collect = collect
        assert a.import_jsonl(more).skipped == 1
        assert a.count() == 4
    finally:
        a.close()
        b.close()


def test_data_survives_reopen_and_schema_version_is_recorded(db_target):
    with Memory.open(db_target) as m:
        a = m.add("Persisted across restarts")
    with Memory.open(db_target) as m:
        assert m.get(a.id).content == "Persisted across restarts"
        assert m.search("restarts")[0].memory.id == a.id
        assert m._store.schema_version() == latest()
        assert _rows(m, "SELECT count(*) FROM migrations WHERE migration_set = 'core'") == len(CORE.steps)


def test_create_false_refuses_a_missing_sqlite_file_and_opens_an_existing_one(tmp_path):
    from clawrecall import StorageError

    path = tmp_path / "sub" / "m.db"
    with pytest.raises(StorageError, match="^no clawrecall store at .*m\\.db: `clawrecall init`"):
        Memory.open(path, create=False)
    assert not path.parent.exists()
    with Memory.open(path) as m:
        m.add("now it exists")
    with Memory.open(f"sqlite:///{path}", create=False) as m:
        assert m.count() == 1
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(StorageError, match="^no clawrecall store at .*empty\\.db \\(the file is empty\\)"):
        Memory.open(empty, create=False)
    assert empty.stat().st_size == 0
    with Memory.open(empty) as m:  # a command that writes makes it a store
        assert m.count() == 0


def test_default_location_is_the_data_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWRECALL_HOME", str(tmp_path / "data"))
    with Memory.open() as m:
        m.add("stored in the default place")
    assert (tmp_path / "data" / "memory.db").exists()


def test_export_import_round_trip(mem, tmp_path):
    """The administrator's export, read back by the administrator, keeps every owner: the rule that an
    item names only its caller's ids is for identified callers."""
    a = mem.add("Round trip me", user_id="alice", tags=["x"], metadata={"k": 1}, category="fact")
    mem.delete(a.id, user_id="alice")
    mem.config.access = AccessConfig(scopes={"project:apollo": {"write": ["user:bob"]}})  # bob is a member
    b = mem.add("Agent main's project note", caller=Caller(user_id="bob", agent_id="main", session_id="s1"),
                scope="project:apollo", visibility="private", source_type="tool", source_id="t1")
    c = mem.add("What agent main remembers", agent_id="main")
    out = tmp_path / "export.jsonl"
    with out.open("w") as fh:
        assert mem.export_jsonl(fh, include_deleted=True) == 3
    with Memory.open(tmp_path / "other.db") as other:
        report = other.import_jsonl(out.read_text().splitlines())
        assert report.model_dump() == {"read": 3, "created": 3, "duplicates": 0, "skipped": 0, "dry_run": False, "left_out": []}
        for memory_id in (a.id, b.id, c.id):
            copy = other.get(memory_id)
            original = mem.get(memory_id)
            assert copy.model_dump(exclude={"updated_at"}) == original.model_dump(exclude={"updated_at"})
        assert other.get(b.id).user_id == "bob" and other.get(c.id).scope == "agent:main"
        assert other.import_jsonl(out.read_text().splitlines()).skipped == 3


def test_an_import_keeps_a_current_memory_beside_its_deleted_expired_or_superseded_twin(mem):
    """Deduplication compares current memories only: a backup's history lines are restored as they are, and
    never make the current fact they share a text with a duplicate."""
    lines = [json.dumps(x) for x in (
        {"content": "Carol lives in Lisbon", "user_id": "carol", "deleted_at": "2026-01-01T00:00:00Z"},
        {"content": "Carol lives in Lisbon", "user_id": "carol"},
        {"content": "The VPN code is 1234", "expires_at": "2020-01-01T00:00:00Z"},
        {"content": "The VPN code is 1234"},
        {"content": "Dave rides at 250 W", "valid_from": "2025-01-01T00:00:00Z", "valid_to": "2026-01-01T00:00:00Z"},
        {"content": "Dave rides at 250 W"},
    )]
    assert mem.import_jsonl(lines).created == 6
    assert {m.content for m in mem.list(scope="*")} == {"Carol lives in Lisbon", "The VPN code is 1234", "Dave rides at 250 W"}
    again = mem.import_jsonl(['{"content": "Carol lives in Lisbon", "user_id": "carol"}', '{"content": "Carol lives in Lisbon"}'])
    assert again.created == 1 and again.duplicates == 1  # a current twin is still one (the second: another scope)


def test_import_with_a_bad_line_writes_nothing(mem):
    lines = ['{"content": "good one"}', '{"content": "bad", "importance": 3}']
    with pytest.raises(ValidationError, match="line 2"):
        mem.import_jsonl(lines)
    with pytest.raises(ValidationError, match="line 1"):
        mem.import_jsonl(["not json"])
    assert _rows(mem) == 0


def test_session_neighbours_bring_the_answer_turn(mem):
    t0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
    turns = [
        "Alice: Did you end up going to the pottery workshop?",
        "Bob: Yes, last Saturday, and I made a blue bowl.",
        "Alice: Nice. How is your sister doing?",
        "Bob: She started a new job in Lisbon.",
    ]
    mem.add_many([
        {"content": t, "session_id": "s1", "created_at": t0 + timedelta(seconds=30 * i)} for i, t in enumerate(turns)
    ], dedup=False)
    hits = mem.search("pottery workshop", limit=2, explain=True)
    assert [h.memory.content for h in hits] == turns[:2]
    assert "neighbors" in hits[1].explain


def test_session_neighbours_are_looked_up_for_the_head_only(mem):
    """Only the 2 x limit best fused hits lend their neighbours a gain (docs/retrieval.md)."""
    t0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
    mem.add_many([
        {"content": f"Turn {i} about the garden shed and its paint", "session_id": "s1",
         "created_at": t0 + timedelta(seconds=i)} for i in range(30)
    ], dedup=False)
    asked: list[list[str]] = []
    lookup = mem._store.memories.session_neighbors
    mem._store.memories.session_neighbors = lambda ids, filters: asked.append(ids) or lookup(ids, filters)
    hits = mem.search("garden shed paint", limit=3, explain=True)
    assert len(hits) == 3 and [len(ids) for ids in asked] == [6]
    assert any("neighbors" in h.explain for h in hits)

    class Unanswered:  # a reranker that fails (keeps the order) but may lift any of its top_k
        def score(self, query, documents):
            return None

    mem._pipeline.reranker = Unanswered()
    mem.config.retrieval.rerank.top_k = 12
    mem.search("garden shed paint", limit=3)
    assert [len(ids) for ids in asked] == [6, 12]


def _neighbour_hits(mem, query: str, limit: int) -> tuple[list[tuple[str, float]], list[str]]:
    """The hits (id, score), and the ids read while searching; then the same search with a reranker that keeps
    the order, which reads every neighbour before ranking: the hits must be the same."""
    read: list[str] = []
    fetch = mem._store.memories.fetch
    mem._store.memories.fetch = lambda ids: read.extend(ids) or fetch(ids)
    hits = [(h.id, h.score) for h in mem.search(query, limit=limit)]
    mem._store.memories.fetch = fetch

    class Unanswered:  # keeps the order
        def score(self, query, documents):
            return None

    mem._pipeline.reranker = Unanswered()
    mem.config.retrieval.rerank.top_k = 2 * limit  # the head: the same turns lend their neighbours a gain
    assert [(h.id, h.score) for h in mem.search(query, limit=limit)] == hits
    mem._pipeline.reranker = None
    return hits, read


def test_session_neighbours_that_cannot_reach_the_head_are_not_read(mem):
    """A neighbour that was not a candidate is read only when its gain could lift it into the head (2 x limit):
    here the head is six strong matches, and the small talk around them, found only as their neighbours,
    is never read."""
    t0 = datetime.now(timezone.utc) - timedelta(hours=1)
    turns = [{"content": f"Session {s}, turn {i}: the garden shed needs blue paint" if i % 2 == 0 else f"ok {s} {i}",
              "session_id": f"s{s}", "created_at": t0 + timedelta(minutes=10 * s + i)} for s in range(6) for i in range(10)]
    written = mem.add_many(turns, dedup=False)
    small_talk = {w.id for w, t in zip(written, turns) if t["content"].startswith("ok")}
    mem.config.retrieval.candidates = 6
    hits, read = _neighbour_hits(mem, "garden shed blue paint", limit=3)
    assert len(hits) == 3 and not small_talk & {i for i, _ in hits}
    assert read and not small_talk & set(read)


def test_session_neighbours_that_can_reach_the_head_are_read(mem):
    """The answer turn, not a candidate (the legs return one hit each), is the best hit's neighbour: it can beat
    the head's weaker hit, so it is read and ranked, as when every neighbour is read."""
    t0 = datetime.now(timezone.utc) - timedelta(hours=1)
    written = mem.add_many([
        {"content": "Alice: Did you end up going to the pottery workshop?", "session_id": "s1", "created_at": t0},
        {"content": "Bob: Yes, last Saturday, and I made a blue bowl.", "session_id": "s1",
         "created_at": t0 + timedelta(seconds=30)},
        *({"content": f"A note on the weather, number {i}", "created_at": t0} for i in range(20)),
    ], dedup=False)
    mem.config.retrieval.candidates = 1
    hits, read = _neighbour_hits(mem, "pottery workshop", limit=1)
    assert written[1].id in read
    assert [i for i, _ in hits] == [written[0].id]


def test_vector_query_drops_words_most_memories_contain(mem):
    mem.add_many([{"content": f"Alice: note number {i}"} for i in range(60)], dedup=False)
    mem.add_many([{"content": f"Bob: note number {i} about the garden"} for i in range(20)], dedup=False)
    seen: list[list[str]] = []
    embed = mem._pipeline.embed_queries
    mem._pipeline.embed_queries = lambda texts: seen.append(texts) or embed(texts)
    mem.search("What did Alice plant in the garden?", limit=3)
    mem.search("Who is Alice?", limit=3)
    mem.config.retrieval.vector_common_share = 0.0
    mem.search("What did Alice plant in the garden?", limit=3)
    # "alice", "note" and "number" are in more than 40% of the memories, "garden" in 25%; the
    # whole query is embedded too, in the same call, for the similarity the hits report
    assert seen == [["What did plant in the garden?", "What did Alice plant in the garden?"], ["Who is Alice?"],
                    ["What did Alice plant in the garden?"]]


def test_import_errors_name_the_line(mem):
    with pytest.raises(ValidationError, match="line 2: unknown category 'bogus'"):
        mem.import_jsonl(['{"content": "fine"}', '{"content": "fine too", "category": "bogus"}'])
    with pytest.raises(ValidationError, match="line 1: content must not be empty"):
        mem.import_jsonl(['{"content": ""}'])
    assert _rows(mem) == 0


def test_import_rejects_repeated_ids_before_writing_and_matches_ids_in_any_case(mem):
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    lines = [f'{{"id": "{a}", "content": "first"}}'] + [f'{{"content": "filler {i}"}}' for i in range(600)]
    lines.append(f'{{"id": "{a.upper()}", "content": "again"}}')
    with pytest.raises(ValidationError, match=f"^line 602: id {a} repeats line 1$"):
        mem.import_jsonl(lines, chunk=100)  # the repeat is chunks away from the first: still nothing written
    assert _rows(mem) == 0
    assert mem.import_jsonl([f'{{"id": "{b.upper()}", "content": "upper case id"}}']).created == 1
    assert mem.get(b).content == "upper case id"
    assert mem.import_jsonl([f'{{"id": "{b}", "content": "upper case id"}}']).skipped == 1
    assert _rows(mem) == 1


def test_add_many_rejects_ids_repeated_or_taken(mem):
    a = str(uuid.uuid4())
    with pytest.raises(ValidationError, match=f"^item 2: id {a} repeats item 1$"):
        mem.add_many([{"id": a, "content": "one"}, {"id": a.upper(), "content": "two"}], dedup=False)
    mem.add_many([{"id": a, "content": "one"}])
    mem.delete(a)
    with pytest.raises(ValidationError, match=f"^item 2: a memory with id {a} already exists$"):
        mem.add_many([{"content": "fresh"}, {"id": a.upper(), "content": "two"}])
    assert _rows(mem) == 1


def test_reembed_adopts_the_new_model_only_after_success(db_target, tmp_path):
    import sys

    with Memory.open(db_target) as m:
        a = m.add("Sourdough needs a warm kitchen")
    failing = {"provider": "command", "command": [sys.executable, "-c", "import sys; sys.exit(3)"], "model": "broken", "dimensions": 8}
    with Memory.open(db_target, check_embedding=False, embedding=failing) as m:
        with pytest.raises(Exception):
            m.reembed()
        assert m.upkeep.stored_fingerprint().model == "hashed-word-trigrams"
    script = tmp_path / "embed.py"
    script.write_text(
        "import json, sys\n"
        "req = json.load(sys.stdin)\n"
        "print(json.dumps([[float(len(t) % 7 + 1), 1.0, 0.5, 0.0] for t in req['texts']]))\n"
    )
    tiny = {"provider": "command", "command": [sys.executable, str(script)], "model": "tiny", "dimensions": 4}
    with Memory.open(db_target, check_embedding=False, embedding=tiny) as m:
        assert m.reembed() == 1
        assert str(m.upkeep.stored_fingerprint()) == "command/tiny (4 dims)"
    with Memory.open(db_target, embedding=tiny) as m:  # now consistent: opens, searches with 4-dim vectors
        assert m.search("Sourdough", mode="vector")[0].memory.id == a.id
        assert m.get(a.id).embedding_model == "command/tiny"


def test_a_record_names_the_model_that_embedded_it_whatever_the_item_says(mem):
    made = mem.add_many([{"content": "Tea is served at four", "embedding_model": "openai/text-embedding-3-small"}])[0]
    here = f"{mem.upkeep.embedder.provider}/{mem.upkeep.embedder.model}"
    assert here == "hash/hashed-word-trigrams"
    assert made.memory.embedding_model == mem.get(made.id).embedding_model == here


def test_startup_entries_by_priority_and_scope(mem):
    mem.startup.set("rules", "Never share secrets.", priority=0)
    mem.startup.set("soul", "You are a helpful assistant.", priority=1, reinforce=True)
    mem.startup.set("alice", "Alice likes short answers.", priority=1, user_id="alice")
    assert [e.key for e in mem.startup.list()] == ["rules", "alice", "soul"]
    assert [e.key for e in mem.startup.list(user_id="bob")] == ["rules", "soul"]
    mem.startup.set("rules", "Never share secrets or keys.", priority=0)
    assert mem.startup.list()[0].content == "Never share secrets or keys."
    with pytest.raises(ValidationError):
        mem.startup.set("bad", "x", priority=42)
    mem.startup.delete("rules")
    with pytest.raises(NotFoundError):
        mem.startup.delete("rules")


def test_a_startup_entry_is_deleted_from_where_set_put_it_by_default(mem):
    """`delete` without a scope looks where `set` without a scope writes: the caller's own scope,
    so alice removing her "soul" leaves the shared one of the same key alone."""
    mem.startup.set("soul", "You are a helpful assistant.")
    mine = mem.startup.set("soul", "You are Alice's terse assistant.", user_id="alice")
    assert mine.scope == "user:alice"
    mem.startup.delete("soul", user_id="alice")
    assert [(e.scope, e.key) for e in mem.startup.list(user_id="alice")] == [("global", "soul")]
    with pytest.raises(NotFoundError, match="in scope 'user:alice'"):
        mem.startup.delete("soul", user_id="alice")
    mem.startup.delete("soul")  # the administrator's default is global
    assert mem.startup.list() == []


@pytest.mark.empty_db
def test_old_schema_is_migrated_forward_on_open(db_target):
    load(db_target, "v1")
    store = open_store(db_target, migrate=False)
    p = store.dialect.p
    store.run(
        "INSERT INTO memories (id, content, category, importance, confidence, scope, created_at, updated_at) "
        f"VALUES ('11111111-1111-4111-8111-111111111111', 'from the first release', 'fact', 0.7, 1, 'global', {p}, {p})",
        (store.dialect.ts(datetime(2025, 1, 1, tzinfo=timezone.utc)),) * 2,
    )
    store.close()
    with Memory.open(db_target) as mem:
        assert mem._store.schema_version() == latest()
        assert mem.get("11111111").content == "from the first release"
        assert mem.search("first release", mode="bm25")[0].memory.id.startswith("11111111")


def test_session_neighbours_break_equal_times_by_insertion_order(mem):
    t0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
    turns = ["Alice: Where did you park the camper van?", "Bob: Behind the old mill, by the river.",
             "Alice: Great.", "Bob: Bring the spare key."]
    mem.add_many([{"content": t, "session_id": "s1", "created_at": t0} for t in turns], dedup=False)
    hits = mem.search("camper van park", limit=2, explain=True)
    assert [h.memory.content for h in hits] == turns[:2]
    assert "neighbors" in hits[1].explain


def test_sqlite_fulltext_index_stays_consistent_through_every_write(tmp_path):
    import sqlite3

    path = tmp_path / "fts.db"
    with Memory.open(path) as m:
        a = m.add("Kayak trip on the fjord", user_id="alice")
        b = m.add("Quarterly budget review", scope="project:x")
        m.update(a.id, content="Kayak trip on the fjord in June")
        m.delete(b.id)
        m.forget(a.id)
        m.add("Piano lessons on Thursdays", user_id="bob")
        assert [h.memory.content for h in m.search("piano", user_id="bob", mode="bm25")] == ["Piano lessons on Thursdays"]
        assert m.search("piano", user_id="alice", mode="bm25") == []
        # new rows are indexed in bulk after the insert: also right when a forgotten rowid is reused
        batch = m.add_many([{"content": f"Harbour crane number {i} needs grease"} for i in range(3)], dedup=False)
        m.forget(batch[-1].id)
        m.add_many([{"content": "Lighthouse keeper retires"}, {"content": "Lighthouse lamp replaced"}], dedup=False)
        assert len(m.search("harbour crane", mode="bm25")) == 2
    with sqlite3.connect(path) as conn:  # FTS5 compares its indexes with the tables they are built from
        conn.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)")
        conn.execute("INSERT INTO memories_trgm (memories_trgm, rank) VALUES ('integrity-check', 1)")
        assert conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'fjord'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM memories_trgm WHERE memories_trgm MATCH 'grease'").fetchone()[0] == 2
        assert sorted(r[0] for r in conn.execute("SELECT content FROM memories_trgm WHERE memories_trgm MATCH 'ighthous'")) == [
            "Lighthouse keeper retires", "Lighthouse lamp replaced"]


def test_list_and_purge_bounds_are_clear_errors(mem):
    mem.add("Bounds are checked at the door")
    for kwargs, message in (({"offset": 2**63}, "offset must be between 0"), ({"limit": 0}, "limit must be between 1"),
                            ({"limit": 2**63}, "limit must be between 1")):
        with pytest.raises(ValidationError, match=message):
            mem.list(**kwargs)
    for days in (-1, 1e12):
        with pytest.raises(ValidationError, match="older_than_days must be between 0 and 365000"):
            mem.purge(older_than_days=days)
    assert mem.count() == 1


def test_new_ids_are_distinct_version_4_uuids():
    ids = new_ids(20_000)
    assert len(set(ids)) == len(ids)
    parsed = [uuid.UUID(i) for i in ids]
    assert all(str(p) == i and p.version == 4 and p.variant == uuid.RFC_4122 for p, i in zip(parsed, ids))
    assert {i[19] for i in ids} == set("89ab")  # every variant nibble occurs: the bits are random
    # one call's ids share their first byte (index locality); the rest of the prefix is random
    assert {i[:2] for i in ids} == {ids[0][:2]}
    assert len({i[2:8] for i in ids}) > 19_950
    assert len({new_ids(1)[0][:2] for _ in range(200)}) > 100  # single adds spread over the key space


def test_a_batch_ids_share_a_first_byte_and_prefixes_still_resolve(mem):
    results = mem.add_many([{"content": f"fact number {n} about the batch", "user_id": "alice"} for n in range(40)],
                           dedup=False)
    ids = [r.id for r in results]
    assert len({i[:2] for i in ids}) == 1
    for memory_id in ids:
        assert mem.get(memory_id[:8], user_id="alice").id == memory_id  # 6 random hex digits tell them apart


def test_keyword_legs_return_the_best_matches_that_pass_the_filters(mem):
    """A keyword leg ranks its matches first and filters the best few: when the filters reject all
    of those, it must still find the best matches that pass, exactly as filtering every match would."""
    import numpy as np

    from clawrecall.storage import Filters

    dims = mem.upkeep.embedder.ensure_dimensions()
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(301, dims)).astype(np.float32)
    # One "kiwi" in each, in ever longer texts: every memory ranks on its own, shorter first. Two
    # of the best 40 and the 50 worst are decisions, the rest facts; one other memory says "zebra".
    decision = [i in (20, 35) or i >= 250 for i in range(300)]
    items = [
        {"content": "kiwi " + " ".join(["lorem"] * (i + 1)), "category": "decision" if decision[i] else "fact"}
        for i in range(300)
    ]
    ids = [r.id for r in mem.add_many([*items, {"content": "zebra crossing"}], embeddings=vectors, dedup=False)]
    for memory_id in ids[:10]:
        mem.delete(memory_id)
    legs = {"bm25": mem._store.text_candidates, "trigram": mem._store.fuzzy_candidates}
    for name, leg in legs.items():
        everything = [c.id for c in leg("kiwi", Filters(include_deleted=True), 400)]
        assert len(everything) == 300, name
        categories = {i: ("decision" if decision[n] else "fact") for n, i in enumerate(ids[:300])}
        cases = [
            (Filters(), [i for i in everything if i not in ids[:10]][:10]),  # the 10 best are deleted
            (Filters(categories=["decision"]), [i for i in everything if categories[i] == "decision"][:10]),
            (Filters(categories=["decision"], only_deleted=True), []),
        ]
        for filters, expected in cases:
            assert [c.id for c in leg("kiwi", filters, 10)] == expected, (name, filters)
    assert [c.id for c in mem._store.text_candidates("zebra", Filters(), 10)] == [ids[-1]]  # fewer matches than asked
