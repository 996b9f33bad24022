"""The facts of a segment (`Facts`) on both backends: a segment's decisions applied in one transaction (new facts,
repeats, supersedes, occurrences, the source messages' keys), the rule fallback, session summaries,
and what recall and ranking make of occurrences."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import pytest

from clawrecall import Memory
from clawrecall.extraction.schema import validate
from clawrecall.hooks.recall import before_prompt_build
from clawrecall.errors import ValidationError
from clawrecall.models import Occurrence
from clawrecall.scopes import Caller
from clawrecall.tools import run_tool

ALICE = Caller("alice", "main", "s1")
T0 = datetime(2026, 3, 16, 9, 0, tzinfo=timezone.utc)
FTP_250 = "On 2026-03-02 the user's functional threshold power was 250 W."


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def segment(mem: Memory, texts: list[tuple[str, str]], *, session: str = "s1", start: datetime = T0, caller=ALICE):
    """A conversation logged and its segment closed: (segment, its messages)."""
    transcript = [{"role": role, "content": text, "timestamp": ms(start + timedelta(minutes=i))}
                  for i, (role, text) in enumerate(texts)]
    mem.conversations.log(transcript, caller=caller, session_id=session, now=start + timedelta(minutes=len(texts)))
    closed = mem.conversations.end(session, caller=caller)
    assert closed is not None
    return closed, mem._store.messages.in_segment(closed.id)


def fact(text: str, *, action: str = "new", existing: str | None = None, source=(1,), confidence: float = 0.9,
         category: str = "fact", valid_from: str | None = None, sentiment: str = "neutral", visibility=None) -> dict:
    return {"text": text, "category": category, "entities": ["user"], "importance": 0.6, "confidence": confidence,
            "valid_from": valid_from, "sentiment": sentiment, "source": list(source), "action": action,
            "existing": existing, "visibility": visibility}


def extract(mem: Memory, seg, facts: list[dict], within=None):
    """What the extraction job does with a model's answer: prompt, validate, decide, apply."""
    p = mem._facts.prompt(seg)
    extraction, errors = validate({"facts": facts, "summary": None}, categories=mem.config.categories,
                                  messages=len(p.shown), known=len(p.known))
    assert errors == [], errors
    decisions = mem._facts.decide(seg, p, extraction)
    return p, decisions, mem._facts.apply(seg, p.shown, decisions, within=within)


def ftp_fact(mem: Memory):
    """A stored FTP fact of alice, stated once on 2026-03-02."""
    seg, _ = segment(mem, [("user", "ramp test done: 250 watts"), ("assistant", "Nice work.")],
                     start=datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc), session="s0")
    _, _, result = extract(mem, seg, [fact(FTP_250, valid_from="2026-03-02")])
    [fact_id] = result.created
    return mem.get(fact_id, caller=ALICE)


def test_a_new_fact_is_a_dated_memory_linked_to_its_messages_with_one_occurrence(mem):
    seg, messages = segment(mem, [("user", "I moved to Brno last month, loving it"), ("assistant", "Welcome to Brno!")])
    p, [d], result = extract(mem, seg, [fact("In February 2026 the user moved to Brno.", category="fact",
                                             valid_from="2026-02-01", sentiment="neutral")])
    assert d.action == "new" and result.created and result.occurrences == 1 and result.keyed == 1
    record = mem.get(result.created[0], caller=ALICE)
    assert record.source_type == "extraction" and record.source_id == seg.id and record.scope == "user:alice"
    assert record.metadata == {"entities": ["user"], "segment_id": seg.id, "message_ids": [messages[0].id]}
    assert record.valid_from == datetime(2026, 2, 1, tzinfo=timezone.utc)
    assert (record.importance, record.confidence, record.visibility.value, record.session_id) == (0.6, 0.9, "shared", "s1")
    [occ] = mem.insight.occurrences(record.id, caller=ALICE)
    assert (occ.at, occ.segment_id, occ.session_id, occ.message_ids) == (messages[0].created_at, seg.id, "s1", [messages[0].id])
    assert occ.snippet == "I moved to Brno last month, loving it" and occ.sentiment == "neutral"
    assert [h.action for h in mem.history(record.id, caller=ALICE)] == ["add"]


def test_a_repeat_adds_an_occurrence_and_recall_says_how_often_and_when(mem):
    known = ftp_fact(mem)
    seg, messages = segment(mem, [("user", "reminder: my FTP is still 250"), ("assistant", "Noted.")])
    p, [d], result = extract(mem, seg, [fact(FTP_250, action="repeat", existing="F1", sentiment="reminder")])
    assert [k.id for k in p.known] == [known.id] and d.action == "repeat"
    assert result.repeated == [known.id] and result.created == [] and result.occurrences == 1
    assert [o.sentiment for o in mem.insight.occurrences(known.id, caller=ALICE)] == ["neutral", "reminder"]
    [hit] = mem.search("functional threshold power", caller=ALICE, min_score=0, sources=["memory"])
    assert hit.discussed is not None and hit.discussed.count == 2
    assert hit.discussed.first_at.date().isoformat() == "2026-03-02" and hit.discussed.last_at == messages[0].created_at
    assert hit.model_dump(mode="json")["discussed"]["count"] == 2  # REST and MCP return the same object
    result = run_tool(mem, Caller("alice", "main", "s2"), "memory_recall", {"query": "functional threshold power"})
    assert "discussed 2 times, first on 2026-03-02, last on 2026-03-16" in result.text
    assert result.details["memories"][0]["discussed"]["count"] == 2
    block = before_prompt_build(mem, {"prompt": "what is my functional threshold power?"}, Caller("alice", "main", "s2"))
    assert "discussed 2 times, first on 2026-03-02, last on 2026-03-16)" in block["prependContext"]
    result = run_tool(mem, ALICE, "memory_search", {"query": "functional threshold power"})
    assert "discussed 2 times" in result.text and result.details["results"][0]["discussed"]["count"] == 2
    from clawrecall.cli.commands import hits_text

    header, row = hits_text([hit], explain=False).splitlines()
    assert "DISCUSSED" in header and "2×, last 2026-03-16" in row


def test_a_new_fact_that_repeats_a_known_one_is_a_repeat(mem):
    known = ftp_fact(mem)
    seg, _ = segment(mem, [("user", "my FTP is 250"), ("assistant", "ok")])
    _, [d], result = extract(mem, seg, [fact(FTP_250)])
    assert d.action == "repeat" and d.reason == "it repeats F1" and result.repeated == [known.id]
    assert len(mem.list(caller=ALICE)) == 1


def test_an_update_supersedes_the_known_fact_and_as_of_still_sees_the_old_value(mem):
    old = ftp_fact(mem)
    seg, messages = segment(mem, [("user", "did the ramp test, FTP is 262 now!"), ("assistant", "Up from 250!")])
    text = "On 2026-03-16 the user's functional threshold power was 262 W."
    _, [d], result = extract(mem, seg, [fact(text, action="update", existing="F1", sentiment="update")])
    [(closed_id, new_id)] = result.updated
    assert d.action == "update" and closed_id == old.id and result.occurrences == 1
    new, closed = mem.get(new_id, caller=ALICE), mem.get(old.id, caller=ALICE)
    assert new.supersedes == old.id and closed.superseded_by == new.id
    assert closed.valid_to == new.valid_from == messages[0].created_at
    assert new.category == "fact" and new.source_type == "extraction"
    assert [r.id for r in mem.list(caller=ALICE)] == [new.id]
    assert [r.id for r in mem.list(caller=ALICE, as_of=datetime(2026, 3, 10, tzinfo=timezone.utc))] == [old.id]
    assert [h.action for h in mem.history(old.id, caller=ALICE)] == ["add", "supersede"]
    [hit] = mem.search("functional threshold power", caller=ALICE, min_score=0, sources=["memory"])
    assert hit.memory.id == new.id and hit.discussed.count == 1  # the new value was said once


def test_an_update_the_model_is_unsure_of_keeps_both(mem):
    old = ftp_fact(mem)
    seg, _ = segment(mem, [("user", "maybe my FTP is 262 now? not sure"), ("assistant", "Test again?")])
    text = "On 2026-03-16 the user thought their functional threshold power might be 262 W."
    _, [d], result = extract(mem, seg, [fact(text, action="update", existing="F1", confidence=0.3)])
    assert d.action == "keep_both" and result.kept_both and result.updated == []
    kept = mem.get(result.kept_both[0], caller=ALICE)
    assert kept.metadata["related"] == old.id and mem.get(old.id, caller=ALICE).superseded_by is None
    assert {r.id for r in mem.list(caller=ALICE)} == {old.id, kept.id}


def test_apply_inside_a_transaction_that_fails_writes_nothing(mem):
    old = ftp_fact(mem)
    seg, messages = segment(mem, [("user", "FTP is 262 now, and I bought a gravel bike"), ("assistant", "Great!")])

    @contextmanager
    def failing():  # as a job's lease commit does when the lease was lost
        with mem._store.transaction():
            yield
            raise RuntimeError("lease lost")

    before = mem._store.history.count([old.id])
    with pytest.raises(RuntimeError, match="lease lost"):
        extract(mem, seg, [
            fact("On 2026-03-16 the user's functional threshold power was 262 W.", action="update", existing="F1"),
            fact("In March 2026 the user bought a gravel bike."),
        ], within=failing)
    assert [r.id for r in mem.list(caller=ALICE)] == [old.id] and mem.get(old.id, caller=ALICE).superseded_by is None
    assert len(mem.insight.occurrences(old.id, caller=ALICE)) == 1 and mem._store.history.count([old.id]) == before
    assert mem._store.memories.fetch([messages[0].id])[messages[0].id].keys is None


def test_a_message_is_found_by_the_facts_it_gave_and_still_shows_what_was_said(mem):
    seg, messages = segment(mem, [("user", "did the ramp test today, 262!"), ("assistant", "Well done.")])
    mem.upkeep.backfill()
    query = "functional threshold power"
    assert mem.search(query, caller=Caller("alice", "main", "s2"), sources=["message"], mode="bm25") == []
    before = {h.memory.id: h.similarity for h in mem.search(query, caller=Caller("alice", "main", "s2"),
                                                            sources=["message"], mode="vector", min_score=0)}
    extract(mem, seg, [fact("On 2026-03-16 the user's functional threshold power was 262 W.")])
    reader = Caller("alice", "main", "s2")
    hit, *rest = mem.search(query, caller=reader, sources=["message"], mode="bm25")
    assert hit.memory.id == messages[0].id and hit.content == "did the ramp test today, 262!"
    assert [h.memory.id for h in rest] in ([], [messages[1].id])  # its session neighbour may come along
    vector_hits = mem.search(query, caller=reader, sources=["message"], mode="vector", min_score=0)
    assert vector_hits[0].memory.id == messages[0].id
    assert vector_hits[0].similarity > before.get(messages[0].id, 0.0) + 0.2
    keys = mem._store.memories.fetch([messages[0].id])[messages[0].id].keys
    assert keys == "On 2026-03-16 the user's functional threshold power was 262 W."
    assert mem._store.integrity_problems() == []  # the full-text index holds what its source says
    mem.reembed()  # a new model embeds the content and keys again, as apply did
    assert mem.search(query, caller=reader, sources=["message"], mode="vector", min_score=0)[0].similarity == \
        pytest.approx(vector_hits[0].similarity, abs=1e-5)
    # a second fact from the same message joins the keys; the first is not repeated
    seg2 = seg.model_copy(update={"id": seg.id})
    mem._facts.apply(seg2, messages, mem._facts.decide(seg, mem._facts.prompt(seg), validate(
        {"facts": [fact("On 2026-03-16 the user did a ramp test.")], "summary": None},
        categories=mem.config.categories, messages=2, known=1)[0]))
    assert mem._store.memories.fetch([messages[0].id])[messages[0].id].keys.split("\n") == [
        "On 2026-03-16 the user's functional threshold power was 262 W.", "On 2026-03-16 the user did a ramp test."]


def test_keys_are_not_made_when_switched_off(db_target):
    with Memory.open(db_target, extraction={"augment_keys": False}) as mem:
        seg, messages = segment(mem, [("user", "did the ramp test, 262!"), ("assistant", "ok")])
        _, _, result = extract(mem, seg, [fact("On 2026-03-16 the user's functional threshold power was 262 W.")])
        assert result.keyed == 0 and mem._store.memories.fetch([messages[0].id])[messages[0].id].keys is None


def test_known_facts_are_the_scopes_current_ones_and_never_secret(mem):
    ftp_fact(mem)
    mem.add("The user's bank PIN is 1234 for the FTP account.", caller=ALICE, visibility="secret", category="fact")
    mem.add("Bob's FTP is 300 W.", user_id="bob", category="fact")
    known = mem._facts.known("user:alice", "what is my FTP power", 10)
    assert [k.content for k in known] == [FTP_250]


def test_the_rule_fallback_captures_user_messages_by_the_capture_rules(mem):
    seg, messages = segment(mem, [("user", "I prefer dark mode in every editor"), ("assistant", "I prefer light."),
                                  ("user", "ok thanks")])
    result = mem._facts.rule_fallback(seg, messages, ALICE)
    [record] = [mem.get(i, caller=ALICE) for i in result.created]
    assert record.content == "I prefer dark mode in every editor" and record.category == "preference"
    assert record.source_type == "extraction" and record.confidence == 0.5
    assert result.occurrences == 1
    again, _ = segment(mem, [("user", "I prefer dark mode in every editor"), ("assistant", "Still?")], session="s3")
    assert mem._facts.rule_fallback(again, mem._store.messages.in_segment(again.id)).repeated == [record.id]


def test_a_session_summary_is_one_memory_linked_to_the_session(mem):
    seg, _ = segment(mem, [("user", "planning the Brno trip"), ("assistant", "Sure.")])
    first = mem._facts.summarize(seg, "The user planned a trip to Brno.")
    assert (first.category, first.session_id, first.source_type, first.source_id) == ("session_summary", "s1", "session_summary", "s1")
    assert first.metadata == {"segment_ids": [seg.id]}
    second = mem._facts.summarize(seg, "The user planned a trip to Brno by train.", segment_ids=[seg.id, "other"])
    assert second.supersedes == first.id
    [current] = mem.list(caller=ALICE, category="session_summary")
    assert current.id == second.id and current.metadata == {"segment_ids": [seg.id, "other"]}


def test_recurring_facts_rank_higher_and_explain_says_why(db_target):
    with Memory.open(db_target, retrieval={"importance_weight": 0}) as mem:
        a = mem.add("The user trains on the bike every morning.", caller=ALICE).id
        b = mem.add("The user trains on the bike every evening.", caller=ALICE).id
        at = datetime(2026, 3, 1, tzinfo=timezone.utc)
        mem._store.occurrences.insert([
            Occurrence(id=f"00000000-0000-4000-8000-00000000000{i}", memory_id=b, scope="user:alice",
                       at=at + timedelta(days=i), message_ids=[]) for i in range(4)
        ])
        weighted = mem.search("user trains on the bike", caller=ALICE, explain=True, min_score=0)
        assert [h.memory.id for h in weighted] == [b, a]
        assert weighted[0].explain["recurrence"] == {"occurrences": 4, "factor": 1.2}
        assert "recurrence" not in weighted[1].explain
    with Memory.open(db_target, retrieval={"importance_weight": 0, "recurrence_weight": 0}) as mem:
        unweighted = {h.memory.id: h for h in mem.search("user trains on the bike", caller=ALICE, explain=True, min_score=0)}
        assert all("recurrence" not in h.explain for h in unweighted.values())
        assert unweighted[b].discussed.count == 4 and unweighted[a].discussed is None  # the hits still say it


def test_erasing_a_person_removes_their_occurrences_and_counts_them(mem):
    known = ftp_fact(mem)
    seg, _ = segment(mem, [("user", "FTP still 250"), ("assistant", "ok")])
    extract(mem, seg, [fact(FTP_250, action="repeat", existing="F1")])
    assert mem.erase(user_id="alice", dry_run=True).erased["occurrences"] == 2
    assert mem.erase(user_id="alice").erased["occurrences"] == 2
    assert mem._store.occurrences.summary([known.id]) == {}


def test_rest_search_hits_carry_discussed(mem):
    from fastapi.testclient import TestClient

    from clawrecall.auth import TokenStore
    from clawrecall.server import create_app

    known = ftp_fact(mem)
    http = TestClient(create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True),
                      base_url="http://127.0.0.1:8765", headers={"X-Clawrecall-User": "alice"})
    [hit] = http.post("/v1/search", json={"query": "functional threshold power", "min_score": 0, "sources": ["memory"]}).json()["results"]
    assert hit["memory"]["id"] == known.id
    assert hit["discussed"] == {"count": 1, "first_at": "2026-03-02T08:00:00Z", "last_at": "2026-03-02T08:00:00Z"}


def test_which_segments_are_extracted(db_target):
    llm = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "local"}  # configured, never called
    with Memory.open(db_target, llm=llm, extraction={"min_turns": 2}) as mem:
        short, _ = segment(mem, [("user", "hi"), ("assistant", "hello")], session="a")
        long, _ = segment(mem, [("user", "hi"), ("assistant", "hello"), ("user", "I moved to Brno"), ("assistant", "ok")],
                          session="b")
        assert (short.turn_count, long.turn_count) == (1, 2)
        assert not mem._facts.wanted(short) and mem._facts.wanted(long)
        assert not mem._facts.wanted(long.model_copy(update={"closed_at": None}))
    with Memory.open(db_target) as mem:
        assert not mem._facts.wanted(long)  # no LLM by default: nothing is extracted
    with Memory.open(db_target, llm=llm, extraction={"enabled": False}) as mem:
        assert not mem._facts.wanted(long)


def test_decisions_of_another_segment_are_refused(mem):
    seg, messages = segment(mem, [("user", "I moved to Brno"), ("assistant", "ok")])
    other, _ = segment(mem, [("user", "I prefer tea"), ("assistant", "ok")], session="s2")
    p = mem._facts.prompt(seg)
    extraction, _ = validate({"facts": [fact("In March 2026 the user moved to Brno.")], "summary": None},
                             categories=mem.config.categories, messages=len(p.shown), known=len(p.known))
    with pytest.raises(ValidationError, match="decisions name messages that are not the segment's"):
        mem._facts.apply(other, mem._store.messages.in_segment(other.id), mem._facts.decide(seg, p, extraction))
    assert mem.list(caller=ALICE) == []


def test_a_store_without_the_knowledge_set_gets_it(db_target):
    with Memory.open(db_target) as mem:
        mem._store.run("DROP TABLE fact_occurrences")
        mem._store.run("DELETE FROM migrations WHERE migration_set = 'knowledge'")
    with Memory.open(db_target) as mem:
        assert "knowledge/initial" not in [s.label for s in mem._store.pending_migrations()]
        known = ftp_fact(mem)
        assert mem._store.occurrences.summary([known.id])[known.id][0] == 1


def test_extracted_facts_take_the_writing_agents_visibility_rules(db_target):
    """A fact drjones's conversation gives gets drjones's levels (`access.agents`), as a memory drjones writes
    by hand would: private by default, shared by its category rule, and the model may only make it stricter."""
    access = {"agents": {"drjones": {"visibility": "private", "rules": {"preference": "shared"}}}}
    dj = Caller("alice", "drjones", "s1")
    with Memory.open(db_target, check_embedding=False, access=access) as mem:
        seg, _ = segment(mem, [("user", "My blood test came back fine. I like green tea. PIN 1234."),
                               ("assistant", "Good to hear.")], caller=dj)
        _, _, result = extract(mem, seg, [
            fact("On 2026-03-16 the user's blood test came back fine.", visibility="shared"),
            fact("The user likes green tea.", category="preference"),
            fact("The user's card PIN is 1234.", visibility="secret"),
        ])
        assert [mem.get(i, caller=dj).visibility.value for i in result.created] == ["private", "shared", "secret"]
        # the rules' fallback (no model answer) follows the same agent's rules
        seg2, messages = segment(mem, [("user", "I prefer dark mode in every editor"), ("assistant", "Nice."),
                                       ("user", "We decided to use PostgreSQL for the clinic's records")],
                                 caller=dj, session="s2")
        made = [mem.get(i, caller=dj) for i in mem._facts.rule_fallback(seg2, messages).created]
        assert [(m.category, m.visibility.value) for m in made] == [("preference", "shared"), ("decision", "private")]
        # another agent's facts keep the store's default
        main = Caller("alice", "main", "s3")
        seg3, _ = segment(mem, [("user", "I moved to Prague."), ("assistant", "ok")], caller=main, session="s3")
        _, _, other = extract(mem, seg3, [fact("The user moved to Prague.")])
        assert mem.get(other.created[0], caller=main).visibility.value == "shared"
