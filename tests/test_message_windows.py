"""A message longer than the embedding model's window: embedded as overlapping windows by the backfill
(and again by a re-embedding, `test_reembed.py`), found by any of them, shown as one message. Both backends."""

from __future__ import annotations

import math

import pytest

from clawrecall import Memory
from clawrecall.scopes import Caller
from clawrecall.storage.migrations import MESSAGE_WINDOWS

ALICE = Caller("alice", "main", "s1")
FILLER = ("We compared the staging and production clusters, node by node, and wrote down every setting that "
          "differed between them, including the kernel parameters and the container runtime flags.\n\n")
TAIL = "Finally: the vault cron job rotates the billing database password every Tuesday at 04:00 UTC."
LONG = "Here is the full migration report.\n\n" + FILLER * 30 + TAIL


def windows_of(mem: Memory, message_id: str) -> list[tuple]:
    return mem._store.run(
        "SELECT id, content, embedding IS NOT NULL FROM memories WHERE kind = 'window' AND source_id = "
        f"{mem._store.dialect.p}", (message_id,))


def found_by_window(mem: Memory, hits: list, message_id: str):
    """The message's hit, ranked first by the vector leg with a cosine its own vector does not reach."""
    [hit] = [h for h in hits if h.memory.id == message_id]
    own = float(mem._store.vectors([message_id])[message_id] @ mem._embedding.queries([TAIL])[0])
    assert hit.explain["legs"]["vector"]["rank"] == 1 and hit.explain["legs"]["vector"]["score"] > own + 0.1
    return hit


def log_long(mem: Memory) -> str:
    mem.conversations.log([{"role": "user", "content": "How did the migration go?"},
                           {"role": "assistant", "content": LONG}], caller=ALICE)
    mem.upkeep.backfill()
    assert mem.upkeep.runtime.drain(30) and mem.upkeep.unembedded() == 0
    return mem.conversations.show("s1", caller=ALICE)[1].id


def test_a_long_message_is_embedded_as_windows_and_found_as_one_message(mem):
    message_id = log_long(mem)
    windows = windows_of(mem, message_id)
    assert len(windows) >= 2 and all(embedded for _, _, embedded in windows)
    assert any(text.endswith(TAIL) for _, text, _ in windows)
    assert all(len(text) < len(LONG) / 2 for _, text, _ in windows)
    # found by its last window, reported as the message: once, whole, with its origin
    hits = mem.search(TAIL, caller=ALICE, sources=["message"], mode="vector", explain=True)
    hit = found_by_window(mem, hits, message_id)
    assert hit.memory.kind == "message" and hit.content == LONG and hit.origin["role"] == "assistant"
    assert len(hits) == 2 and {h.memory.kind for h in hits} == {"message"}
    # the record shows one message; no read returns a window
    assert [m.content for m in mem.conversations.show("s1", caller=ALICE)] == ["How did the migration go?", LONG]
    every = mem.search("staging production cluster", caller=ALICE, sources=["memory", "message", "chunk"], limit=50)
    assert {h.memory.kind for h in every} == {"message"}
    assert mem.stats().by_kind == {"message": 2}
    # a filter of the message's own (its session, its time) holds for what its windows find
    assert mem.search(TAIL, caller=ALICE, sources=["message"], mode="vector", session_id="s2") == []
    later = mem.conversations.show("s1", caller=ALICE)[1].created_at + __import__("datetime").timedelta(seconds=1)
    assert mem.search(TAIL, caller=ALICE, sources=["message"], mode="vector", since=later) == []
    # another user finds nothing of it
    assert mem.search(TAIL, caller=Caller("bob"), sources=["message"], mode="vector") == []


def test_a_removed_message_takes_its_windows_with_it(mem):
    message_id = log_long(mem)
    assert windows_of(mem, message_id)
    mem.conversations.delete("s1", caller=ALICE)
    assert windows_of(mem, message_id) == []
    assert mem._store.run("SELECT count(*) FROM memories")[0][0] == 0


def test_long_messages_embedded_before_windows_get_them_from_the_backfill(mem):
    """What the message-windows migration does to a store of the release before: its long messages go back
    to the backfill's queue, which embeds them again with their windows."""
    message_id = log_long(mem)
    mem._store.run("DELETE FROM memories WHERE kind = 'window'")  # a store from before windows
    assert windows_of(mem, message_id) == [] and mem.upkeep.unembedded() == 0
    with mem._store.transaction():
        mem._store.run(MESSAGE_WINDOWS[1])  # the migration's own statement
    assert mem.upkeep.unembedded() == 1  # the long message; the short question keeps its vector
    mem.upkeep.backfill()
    assert len(windows_of(mem, message_id)) >= 2 and mem.upkeep.unembedded() == 0
    found_by_window(mem, mem.search(TAIL, caller=ALICE, sources=["message"], mode="vector", explain=True), message_id)


@pytest.mark.model
def test_the_last_paragraph_of_a_long_answer_is_found_by_meaning(db_target):
    """all-MiniLM-L6-v2 reads 256 tokens: without windows the vector of a long answer holds only its start."""
    with Memory.open(db_target) as mem:
        topics = ["the garden irrigation schedule", "the family trip to Lisbon", "learning the cello",
                  "the kitchen renovation budget", "training for a half marathon"]
        for n, topic in enumerate(topics):
            body = f"Let me summarise what we discussed about {topic}.\n\n" + (
                f"There are several things to keep in mind about {topic}, and each deserves a careful look.\n\n" * 25)
            ending = TAIL if n == 2 else f"In short, {topic} is on track."
            mem.conversations.log([{"role": "assistant", "content": body + ending}], caller=ALICE,
                                  session_id=f"s{n}")
        mem.upkeep.backfill()
        target = mem.conversations.show("s2", caller=ALICE)[0].id
        question = "when is the billing database password rotated?"
        assert mem.search(question, caller=ALICE, sources=["message"], mode="vector", limit=1)[0].memory.id == target
        [hit] = mem.search(question, caller=ALICE, sources=["message"], limit=1)
        assert hit.memory.id == target and hit.score >= 0.15  # what the recall hook injects: its gate


def test_a_message_erased_while_its_windows_are_embedded_leaves_no_window(mem, monkeypatch):
    """The backfill embeds a long message's windows for seconds; an erasure meanwhile removes the message,
    and the windows, written after it, must not outlive it (nothing would find them to remove)."""
    passages = mem._embedding.passages
    erased: list[dict] = []

    def erase_midway(texts):
        if not erased:
            erased.append(mem.erase(user_id="alice").erased)
        return passages(texts)

    monkeypatch.setattr(mem._embedding, "passages", erase_midway)
    mem.conversations.log([{"role": "assistant", "content": LONG}], caller=ALICE)
    mem.upkeep.backfill()
    assert mem.upkeep.runtime.drain(30)
    assert erased and erased[0]["messages"] == 1
    assert mem._store.run("SELECT count(*) FROM memories")[0][0] == 0


def test_an_erasure_removes_windows_whose_message_is_gone(mem):
    message_id = log_long(mem)
    mem._store.run(f"DELETE FROM memories WHERE id = {mem._store.dialect.p}", (message_id,))  # as a crash could leave
    assert windows_of(mem, message_id)
    mem.erase(user_id="alice")
    assert mem._store.run("SELECT count(*) FROM memories")[0][0] == 0


def test_only_the_roles_searches_read_are_cut_into_windows(db_target):
    """A pasted tool output as long as the report gets no windows (no search reads its role unless asked),
    until the store is told to search that role too."""
    with Memory.open(db_target) as mem:
        mem.conversations.log([{"role": "user", "content": LONG}, {"role": "tool_result", "content": LONG}], caller=ALICE)
        mem.upkeep.backfill()
        said, tool = mem.conversations.show("s1", caller=ALICE)
        assert tool.role == "tool_result" and windows_of(mem, tool.id) == []
        assert len(windows_of(mem, said.id)) >= 2
    with Memory.open(db_target, retrieval={"message_roles": ["user", "assistant", "tool_result"]}) as mem:
        mem.conversations.log([{"role": "tool_result", "content": LONG + " (again)"}], caller=ALICE)
        mem.upkeep.backfill()
        again = mem.conversations.show("s1", caller=ALICE)[-1]
        assert again.role == "tool_result" and len(windows_of(mem, again.id)) >= 2


def keyword_rows(mem: Memory, word: str) -> int:
    """How many rows the BM25 leg's index holds with `word` (windows or not: the index itself, unfiltered)."""
    if mem._store.dialect.name == "postgres":
        return mem._store.run("SELECT count(*) FROM memories WHERE fts @@ to_tsquery('english', %s)", (word,))[0][0]
    return mem._store.run("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", (word,))[0][0]


def trigram_rows(mem: Memory, text: str) -> int:
    if mem._store.dialect.name == "postgres":
        return 1  # pg_trgm indexes `content` itself; its leg filters windows out (the search statements are not changed here)
    return mem._store.run("SELECT count(*) FROM memories_trgm WHERE memories_trgm MATCH ?", (f'"{text}"',))[0][0]


def test_the_keyword_indexes_hold_a_long_message_once_not_its_windows_again(mem):
    """A window's text is its message's, which the keyword indexes hold whole: indexed again, every keyword match
    of a long message came twice, and a keyword leg filtered the copies out past its best matches."""
    message_id = log_long(mem)
    assert any("vault" in text for _, text, _ in windows_of(mem, message_id))
    assert keyword_rows(mem, "vault") == 1 and trigram_rows(mem, "vault cron") == 1
    assert mem.search("vault cron", caller=ALICE, sources=["message"], mode="bm25")[0].memory.id == message_id
    # deleting the message and its windows leaves the indexes whole (no 'delete' of a row they never held)
    mem.conversations.delete("s1", caller=ALICE)
    assert keyword_rows(mem, "vault") == 0 and mem._store.integrity_problems() == []


def test_the_window_text_migration_takes_windows_out_of_the_keyword_indexes(mem):
    """A store of the release before indexed windows' text: the window-text step leaves the messages alone indexed."""
    message_id = log_long(mem)
    store = mem._store
    with store.transaction():  # as the release before indexed them
        if store.dialect.name == "postgres":
            store.run("UPDATE memories SET fts = to_tsvector('english', content) WHERE kind = 'window'")
        else:
            store.run("INSERT INTO memories_fts (rowid, content, scope_key) SELECT rowid, content, hex(scope) FROM memories "
                      "WHERE kind = 'window'")
    assert keyword_rows(mem, "vault") == 2
    with store.transaction():
        for sql in store.migration_steps()["window-text"]:
            store.run(sql)
    assert keyword_rows(mem, "vault") == 1 and trigram_rows(mem, "vault cron") == 1 and store.integrity_problems() == []
    assert mem.search("vault cron", caller=ALICE, sources=["message"], mode="bm25")[0].memory.id == message_id


def test_a_message_found_by_a_window_is_length_normalised_by_that_window_without_reading_it(mem, monkeypatch):
    """Length normalisation measures a message found by one of its windows by that window's length, which
    the window search reads with the window's message: no window's record is fetched."""
    from clawrecall.retrieval import pipeline
    from clawrecall.storage.memories import Memories

    message_id = log_long(mem)
    windows = windows_of(mem, message_id)
    [last] = [len(text) for _, text, _ in windows if text.endswith(TAIL)]
    fetched: list[str] = []
    fetch = Memories.fetch
    monkeypatch.setattr(Memories, "fetch", lambda self, ids, *a, **k: (fetched.extend(ids), fetch(self, ids, *a, **k))[1])
    hit = found_by_window(mem, mem.search(TAIL, caller=ALICE, sources=["message"], explain=True), message_id)
    anchor = mem.config.retrieval.length_norm_anchor
    assert hit.explain.get("length", 1.0) == pytest.approx(max(0.3, 1 / (1 + 0.5 * math.log2(max(last / anchor, 1.0)))))
    assert hit.explain.get("length", 1.0) != pytest.approx(max(0.3, 1 / (1 + 0.5 * math.log2(len(LONG) / anchor))))
    assert fetched and not set(map(str, fetched)) & {str(w[0]) for w in windows}
