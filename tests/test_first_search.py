"""The first search after writes costs what a later one does: what a search of a scope computes once (the
common words its vector query leaves out, `RetrievalPipeline._vector_query`) the write path computes after
the new rows' vectors are stored, off the request path. Both backends."""

from __future__ import annotations

from clawrecall.scopes import Caller

ALICE = Caller("alice", "main")
TURNS = [{"role": "user" if n % 2 == 0 else "assistant",
          "content": f"Alice asked about the {topic} on day {n}: it is fine." if n % 2 == 0 else f"The {topic} is on track, Alice."}
         for n, topic in enumerate(["garden irrigation schedule", "cello lessons", "kitchen budget"] * 20)]


def test_the_first_search_after_new_vectors_reads_no_sample_of_its_scopes(mem, monkeypatch):
    mem.conversations.log(TURNS, caller=ALICE, session_id="s1")
    mem.upkeep.backfill()
    assert mem.upkeep.runtime.drain(30) and mem.upkeep.unembedded() == 0
    sampled: list[object] = []
    find = mem._store.memories.find
    monkeypatch.setattr(mem._store.memories, "find", lambda *a, **k: sampled.append(a) or find(*a, **k))
    hits = mem.search("how are the cello lessons going?", caller=ALICE)
    assert hits and sampled == []
    # what the write path counted is what the search would have counted itself
    [(key, (_, warmed))] = mem._pipeline._common.items()
    assert "alice" in warmed
    monkeypatch.undo()
    mem._pipeline._common.clear()
    mem.search("how are the cello lessons going?", caller=ALICE)
    assert mem._pipeline._common[key][1] == warmed
