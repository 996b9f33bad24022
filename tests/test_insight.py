"""Insight into memory: the search log (every door, its reports, who reads it, retention, erasure, the
off-switch) and a memory's recalls, on both backends."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from clawrecall import Caller, Memory, ScopeError, ValidationError
from clawrecall._time import utcnow
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.hooks import before_prompt_build
from clawrecall.models import LoggedHit, LoggedSearch
from clawrecall.server import create_app
from clawrecall.tools import run_tool

ALICE, BOB = Caller("alice"), Caller("bob")


@pytest.fixture
def seeded(mem):
    ids = {
        "tea": mem.add("Alice drinks oolong tea every morning", caller=ALICE).id,
        "bike": mem.add("Alice rides a red bicycle to work", caller=ALICE).id,
        "bob": mem.add("Bob plays the cello on Sundays", caller=BOB).id,
        "office": mem.add("The office closes at six on Fridays").id,
    }
    return ids


def logged(mem: Memory, **kwargs):
    mem.upkeep.runtime.drain()  # the log is written off the request path: wait for the writes queued so far
    return mem.insight.searches(**kwargs)


def test_each_search_is_logged_with_its_caller_scopes_hits_and_time(mem, seeded):
    hits = mem.search("oolong tea", caller=Caller("alice", "main", "s1"))
    mem.search("quantum chromodynamics lecture", caller=ALICE, min_score=0.99)
    rows = logged(mem, caller=ALICE)
    assert [r.query for r in rows] == ["quantum chromodynamics lecture", "oolong tea"]
    empty, found = rows
    assert (found.scope, found.user_id, found.agent_id, found.session_id, found.door) == ("user:alice", "alice", "main", "s1", "python")
    assert sorted(found.scopes or []) == ["agent:main", "global", "user:alice"] and found.mode == "hybrid"
    assert found.result_count == len(hits) > 0 and found.top_score == hits[0].score and found.took_ms > 0
    assert empty.result_count == 0 and empty.top_score is None


def test_reports_count_popular_and_unanswered_queries_and_recalled_memories(mem, seeded):
    for query in ("oolong tea", "Oolong tea", "oolong TEA", "red bicycle"):
        mem.search(query, caller=ALICE)
    for _ in range(2):
        mem.search("xylophone zeppelin", caller=ALICE, min_score=0.99)
    mem.upkeep.runtime.drain()
    popular = mem.insight.popular(caller=ALICE)
    assert [(q.query.lower(), q.count) for q in popular] == [("oolong tea", 3), ("xylophone zeppelin", 2), ("red bicycle", 1)]
    assert [(q.query, q.count, q.mean_results) for q in mem.insight.unanswered(caller=ALICE)] == [("xylophone zeppelin", 2, 0)]
    recalled = mem.insight.recalled(caller=ALICE)
    assert recalled[0].memory.id == seeded["tea"] and recalled[0].count == 3
    assert seeded["bob"] not in {r.memory.id for r in recalled}  # never in alice's reach, never in her hits
    assert mem.insight.never_recalled(caller=ALICE) == []  # all stored lately: too young to judge
    backdate(mem, days=60)
    never = [m.id for m in mem.insight.never_recalled(caller=ALICE)]
    assert never == [seeded["office"]]  # the others were found lately; bob's is not in alice's scopes
    assert {m.id for m in mem.insight.never_recalled()} == {seeded["bob"], seeded["office"]}


def backdate(mem: Memory, *, days: float) -> None:
    """Every memory stored `days` ago (the test's clock: the log's own times stay now)."""
    d = mem._store.dialect
    with mem._store.transaction():
        mem._store.run(f"UPDATE memories SET created_at = {d.p}", (d.ts(utcnow() - timedelta(days=days)),))


def test_a_caller_reads_its_own_searches_and_the_administrator_all(mem, seeded):
    mem.search("oolong tea", caller=ALICE)
    mem.search("cello", caller=BOB)
    mem.search("office hours")  # the administrator's: only the administrator reads it
    mem.upkeep.runtime.drain()
    assert [r.query for r in mem.insight.searches(caller=ALICE)] == ["oolong tea"]
    assert [r.query for r in mem.insight.searches(caller=BOB)] == ["cello"]
    assert {r.query for r in mem.insight.searches()} == {"oolong tea", "cello", "office hours"}
    assert [r.query for r in mem.insight.searches(scope="user:bob")] == ["cello"]
    with pytest.raises(ScopeError):
        mem.insight.searches(caller=BOB, scope="user:alice")
    assert [q.query for q in mem.insight.popular(caller=BOB)] == ["cello"]


def test_a_memorys_recalls_show_only_the_searches_the_caller_may_read(mem, seeded):
    office = seeded["office"]
    mem.search("when does the office close", caller=ALICE)
    mem.search("office closing time", caller=BOB)
    mem.upkeep.runtime.drain()
    as_alice = mem.insight.recalls(office, caller=ALICE)
    assert len(as_alice) == 2 and all(r.score > 0 and r.rank >= 1 for r in as_alice)
    assert {r.query for r in as_alice} == {"when does the office close", None}  # bob's question stays bob's
    assert {r.query for r in mem.insight.recalls(office)} == {"when does the office close", "office closing time"}
    from clawrecall import NotFoundError
    with pytest.raises(NotFoundError):
        mem.insight.recalls(seeded["tea"], caller=BOB)  # a memory bob may not read: not found, as every read by id


def test_erasing_a_person_erases_its_searches_and_the_hits_on_its_memories(mem, seeded):
    mem.search("oolong tea", caller=ALICE)
    mem.search("what does alice drink, oolong?")  # the administrator's search found alice's memory
    mem.search("cello", caller=BOB)
    mem.upkeep.runtime.drain()
    assert mem.erase(user_id="alice", dry_run=True).erased["searches"] == 1
    counts = mem.erase(user_id="alice").erased
    assert counts["searches"] == 1
    assert {r.query for r in mem.insight.searches()} == {"what does alice drink, oolong?", "cello"}
    hits = mem._store.run("SELECT memory_id FROM search_hits")
    assert seeded["tea"] not in {str(r[0]) for r in hits} and hits  # bob's and the admin's other hits stay


def test_forget_waits_for_a_log_write_in_flight_so_its_hits_do_not_come_back(mem, seeded, monkeypatch):
    """The log's queue takes the searches noted and writes them; a forget meanwhile flushes the log first and
    must wait for that write, else it lands after the forget and brings back a hit on the forgotten memory."""
    recorder, append = mem._recorder, mem._store.search_log.append
    writing, contended = threading.Event(), threading.Event()

    class Watched:  # the recorder's write lock, saying when a second flush waits for the first
        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            if not self.lock.acquire(blocking=False):
                contended.set()
                self.lock.acquire()

        def __exit__(self, *exc):
            self.lock.release()

    def held_write(rows):  # the queue's write, held until the forget's flush is waiting for it
        writing.set()
        contended.wait(30)
        append(rows)

    monkeypatch.setattr(recorder, "_writing", Watched(recorder._writing))
    monkeypatch.setattr(mem._store.search_log, "append", held_write)
    mem.search("oolong tea", caller=ALICE)
    assert writing.wait(30)
    mem.forget(seeded["tea"], caller=ALICE)
    mem.upkeep.runtime.drain()
    assert contended.is_set()
    assert seeded["tea"] not in {str(r[0]) for r in mem._store.run("SELECT memory_id FROM search_hits")}


def test_searches_noted_together_are_written_in_one_transaction_and_read_at_once(mem, seeded, monkeypatch):
    """The log's writer waits `WRITE_AFTER_S` and writes every search noted meanwhile at once (one transaction,
    not one each, off the searches' way); a read of the log writes what is noted first."""
    from clawrecall.insight import log as search_log

    monkeypatch.setattr(search_log, "WRITE_AFTER_S", 3600)  # nothing written on its own during the test
    writes: list[int] = []
    append = mem._store.search_log.append
    monkeypatch.setattr(mem._store.search_log, "append", lambda rows: writes.append(len(rows)) or append(rows))
    for query in ("oolong tea", "red bicycle", "cello"):
        mem.search(query, caller=ALICE)
    assert writes == []
    assert {s.query for s in mem.insight.searches(caller=ALICE)} == {"oolong tea", "red bicycle", "cello"}
    assert writes == [3]
    mem.search("office hours", caller=ALICE)
    assert mem.upkeep.runtime.drain(30) and writes == [3, 1]  # a drain starts the waiting write at once


def test_an_erasure_takes_the_searches_noted_and_not_yet_written(mem, seeded, monkeypatch):
    """A search just before a person's erasure is theirs too: the log writes what is noted first, or its
    rows would land after the erasure and keep the person's words."""
    from clawrecall.insight import log as search_log

    monkeypatch.setattr(search_log, "WRITE_AFTER_S", 3600)  # not written on its own during the test
    mem.search("oolong tea", caller=ALICE)
    assert mem.erase(user_id="alice").erased["searches"] == 1
    mem.upkeep.runtime.drain()
    assert "oolong tea" not in {r[0] for r in mem._store.run("SELECT query FROM search_log")}


def test_the_log_can_be_switched_off(db_target, seeded_off=None):
    with Memory.open(db_target, insight={"search_log": False}) as mem:
        mem.add("Alice drinks oolong tea", caller=ALICE)
        mem.search("oolong", caller=ALICE)
        assert logged(mem) == []


def test_the_sweep_removes_searches_past_the_retention(mem, seeded):
    old = utcnow() - timedelta(days=91)
    search = LoggedSearch(id="00000000-0000-4000-8000-000000000001", at=old, door="python", scope="user:alice",
                          user_id="alice", query="an old question", mode="hybrid", result_count=1, top_score=0.9,
                          took_ms=1.0)
    mem._store.search_log.append([(search, [LoggedHit(log_id=search.id, rank=1, memory_id=seeded["tea"], score=0.9, at=old)])])
    mem.search("a new question", caller=ALICE)
    mem.upkeep.runtime.drain()
    assert mem.upkeep.sweep().searches_pruned == 1
    assert [r.query for r in mem.insight.searches()] == ["a new question"]
    assert mem.insight.recalls(seeded["tea"]) == []


def test_every_door_is_named_in_the_log(db_target, tmp_path):
    with Memory.open(db_target) as mem:
        mem.add("Alice drinks oolong tea every morning", caller=ALICE)
        mem.search("python door tea", caller=ALICE)
        assert not run_tool(mem, ALICE, "memory_recall", {"query": "tool door tea"}).is_error  # a tool called from Python
        before_prompt_build(mem, {"prompt": "in-process hook: which tea do I drink?", "messages": []},
                            Caller("alice", "main", "s1"))
        app = create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True)
        with TestClient(app, base_url="http://127.0.0.1:8765") as http:
            who = {"X-Clawrecall-User": "alice"}
            assert http.post("/v1/search", json={"query": "rest door tea"}, headers=who).status_code == 200
            assert http.post("/v1/hooks/before_prompt_build", headers={**who, "X-Clawrecall-Session": "s2"},
                             json={"prompt": "hook door: which tea do I drink?", "messages": []}).status_code == 200
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "memory_recall", "arguments": {"query": "mcp door tea"}}}
            answer = http.post("/mcp", json=call, headers={**who, "Accept": "application/json, text/event-stream"})
            assert answer.status_code == 200, answer.text
            mem.upkeep.runtime.drain()
            listed = http.get("/v1/insight/searches", headers=who).json()["searches"]
    result = CliRunner().invoke(cli, ["--db", db_target, "search", "cli door tea", "--user", "alice", "--json"])
    assert result.exit_code == 0, result.output
    with Memory.open(db_target) as mem:
        doors = {r.query: r.door for r in mem.insight.searches(caller=ALICE)}
    assert doors["python door tea"] == "python" and doors["tool door tea"] == "python"
    assert doors["in-process hook: which tea do I drink?"] == "python"
    assert doors["rest door tea"] == "rest" and doors["mcp door tea"] == "mcp" and doors["cli door tea"] == "cli"
    assert doors["hook door: which tea do I drink?"] == "hook"
    assert {r["query"] for r in listed} >= {"rest door tea", "mcp door tea"}


def test_the_reports_over_rest_and_the_cli(db_target):
    with Memory.open(db_target) as mem:
        tea = mem.add("Alice drinks oolong tea every morning", caller=ALICE).id
        for _ in range(2):
            mem.search("oolong tea", caller=ALICE)
        mem.upkeep.runtime.drain()
        with TestClient(create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True),
                        base_url="http://127.0.0.1:8765") as http:
            who = {"X-Clawrecall-User": "alice"}
            assert http.get("/v1/insight/popular", headers=who).json()["queries"][0]["count"] == 2
            assert http.get("/v1/insight/unanswered", headers=who).json()["queries"] == []
            assert http.get("/v1/insight/recalled", headers=who).json()["recalled"][0]["memory"]["id"] == tea
            assert len(http.get(f"/v1/insight/memories/{tea}/recalls", headers=who).json()["recalls"]) == 2
            assert http.get(f"/v1/insight/memories/{tea}/recalls", headers={"X-Clawrecall-User": "bob"}).status_code == 404
            assert http.get("/v1/insight/never-recalled", headers=who).json()["memories"] == []
    run = CliRunner()
    for command, key in (("popular", "count"), ("recalled", "count"), ("searches", "query")):
        result = run.invoke(cli, ["--db", db_target, "insight", command, "--user", "alice", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)[0][key] in (2, "oolong tea")
    result = run.invoke(cli, ["--db", db_target, "insight", "recalls", tea[:8], "--user", "alice", "--json"])
    assert result.exit_code == 0 and len(json.loads(result.output)) == 2
    result = run.invoke(cli, ["--db", db_target, "insight", "popular", "--user", "alice"])
    assert result.exit_code == 0 and "oolong tea" in result.output


def test_why_an_extracted_fact_is_stored_and_recalled(mem):
    from test_facts import ALICE as ALICE_S1
    from test_facts import extract, fact, segment

    seg, messages = segment(mem, [("user", "I moved to Brno last month, loving it"), ("assistant", "Welcome to Brno!")])
    _, _, result = extract(mem, seg, [fact("In February 2026 the user moved to Brno.", valid_from="2026-02-01")])
    [fact_id] = result.created
    mem.search("where does the user live now? Brno", caller=ALICE)
    mem.upkeep.runtime.drain()
    p = mem.insight.why(fact_id[:8], caller=ALICE_S1)
    assert p.memory.id == fact_id and p.origin == "extraction" and "segment" in p.explanation
    assert p.segment is not None and p.segment.id == seg.id
    assert [m.id for m in p.messages] == [messages[0].id] and p.messages[0].content.startswith("I moved to Brno")
    assert [o.segment_id for o in p.occurrences] == [seg.id]
    assert [h.action for h in p.history] == ["add"] and p.added_at is not None
    assert [r.query for r in p.recalls] == ["where does the user live now? Brno"]
    from clawrecall import NotFoundError
    with pytest.raises(NotFoundError):
        mem.insight.why(fact_id, caller=BOB)


def test_why_names_each_origin(mem, tmp_path):
    added = mem.add("Alice prefers window seats", caller=ALICE).id
    assert not run_tool(mem, ALICE, "memory_store", {"content": "Alice is allergic to peanuts"}).is_error
    stored = mem.list(caller=ALICE, source_type="tool")[0].id
    notes = tmp_path / "trip.md"
    notes.write_text("# Trip\n\nThe passport is in the top drawer.\n")
    ingested = mem.files.ingest(notes, caller=ALICE)
    chunk = mem.search("passport drawer", caller=ALICE, sources=["chunk"])[0].memory.id
    why_added, why_tool, why_chunk = (mem.insight.why(i, caller=ALICE) for i in (added, stored, chunk))
    assert (why_added.origin, why_added.added_by) == ("add", "user:alice")
    assert why_tool.origin == "tool" and "memory_store" in why_tool.explanation
    assert why_chunk.origin == "file" and why_chunk.file is not None and why_chunk.file.id == ingested.file_id
    exported = tmp_path / "out.jsonl"
    with exported.open("w") as f:
        mem.export_jsonl(f, caller=ALICE)
    with Memory.open(tmp_path / "other.db") as other, exported.open() as f:
        other.import_jsonl(f)
        imported = other.list()[0]
        why = other.insight.why(imported.id)
        assert why.origin == "import" and why.explanation.startswith("imported from a JSONL export")


def test_why_over_rest_and_the_cli(db_target):
    with Memory.open(db_target) as mem:
        tea = mem.add("Alice drinks oolong tea every morning", caller=ALICE).id
        mem.search("oolong tea", caller=ALICE)
        mem.upkeep.runtime.drain()
        with TestClient(create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True),
                        base_url="http://127.0.0.1:8765") as http:
            body = http.get(f"/v1/insight/memories/{tea}/why", headers={"X-Clawrecall-User": "alice"}).json()
            assert body["origin"] == "add" and len(body["recalls"]) == 1
            assert http.get(f"/v1/insight/memories/{tea}/why", headers={"X-Clawrecall-User": "bob"}).status_code == 404
    result = CliRunner().invoke(cli, ["--db", db_target, "insight", "why", tea[:8], "--user", "alice", "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["recalls"][0]["query"] == "oolong tea"
    result = CliRunner().invoke(cli, ["--db", db_target, "insight", "why", tea[:8], "--user", "alice"])
    assert result.exit_code == 0 and "Origin:" in result.output and "Recalled: 1 time" in result.output


def test_coverage_counts_each_kind_exactly_after_writes_the_backfill_and_another_models_vectors(mem):
    from test_facts import extract, fact, segment

    mem.add("Alice drinks oolong tea every morning", caller=ALICE)
    mem.add("Alice rides a red bicycle to work", caller=ALICE)
    mem.add("Bob plays the cello", caller=BOB)
    seg, _ = segment(mem, [("user", "I moved to Brno last month"), ("assistant", "Welcome to Brno!")])
    extract(mem, seg, [fact("In February 2026 the user moved to Brno.")])

    def of(**kwargs):
        return {c.kind: (c.total, c.embedded, c.waiting, c.other_model) for c in mem.insight.coverage(**kwargs)}

    before = of(caller=ALICE)
    assert before["memory"] == (2, 2, 0, 0) and before["fact"] == (1, 1, 0, 0)
    messages = before["message"]
    assert messages[0] == 2 and messages[2] == messages[0] - messages[1]  # recorded first, embedded by the backfill
    mem.upkeep.backfill()
    assert of(caller=ALICE)["message"] == (2, 2, 0, 0)
    assert of()["memory"] == (3, 3, 0, 0)  # the administrator: bob's too
    d = mem._store.dialect
    with mem._store.transaction():  # a vector left by another model (a re-embedding under way, a swapped provider)
        mem._store.run(f"UPDATE memories SET embedding_model = {d.p} WHERE content = {d.p}", ("other/model", "Alice rides a red bicycle to work"))
    [memories] = [c for c in mem.insight.coverage(caller=ALICE) if c.kind == "memory"]
    assert (memories.total, memories.embedded, memories.other_model, memories.percent) == (2, 1, 1, 50.0)
    assert memories.models["other/model"] == 1
    mem.reembed()
    assert of(caller=ALICE)["memory"] == (2, 2, 0, 0)


def test_rows_added_and_searches_per_period_in_the_callers_scopes(mem, seeded):
    mem.add("Alice is allergic to peanuts", caller=ALICE, category="fact", source_type="extraction")
    mem.search("oolong tea", caller=ALICE)
    mem.search("cello", caller=BOB)
    mem.upkeep.runtime.drain()
    month, day = utcnow().strftime("%Y-%m"), utcnow().strftime("%Y-%m-%d")
    added = {(a.period, a.category, a.source): a.count for a in mem.insight.added(caller=ALICE)}
    assert added == {(month, "other", "memory"): 3, (month, "fact", "fact"): 1}  # alice's and global: never bob's
    assert sum(a.count for a in mem.insight.added()) == 5 and mem.insight.added(caller=ALICE, bucket="day")[0].period == day
    assert [(s.period, s.count) for s in mem.insight.searched(caller=ALICE)] == [(day, 1)]
    assert [(s.period, s.count) for s in mem.insight.searched(bucket="month")] == [(month, 2)]
    with pytest.raises(ValidationError):
        mem.insight.added(bucket="week")


def test_a_list_by_author_level_and_source_sorted_by_importance_or_recalls(mem, seeded):
    scout = mem.add("Alice's scout mapped the trail", caller=Caller("alice", "scout"), visibility="private", importance=0.95)
    fact = mem.add("Alice is allergic to peanuts", caller=ALICE, source_type="extraction", importance=0.1)
    assert [m.id for m in mem.list(agent="scout")] == [scout.id]
    assert [m.id for m in mem.list(visibility="private")] == [scout.id]
    assert {m.id for m in mem.list(user="alice")} == {seeded["tea"], seeded["bike"], scout.id, fact.id}
    assert [m.id for m in mem.list(caller=BOB, user="alice")] == []  # a filter never widens what the caller reads
    assert [m.id for m in mem.list(source_type="extraction")] == [fact.id]
    by_importance = [m.id for m in mem.list(order="importance")]
    assert by_importance[0] == scout.id and by_importance[-1] == fact.id
    for _ in range(2):
        mem.search("red bicycle to work", caller=ALICE, limit=1)
    mem.search("the office closes on Fridays", limit=1)
    mem.upkeep.runtime.drain()
    by_recalls = [m.id for m in mem.list(order="recalls")]
    assert by_recalls[:2] == [seeded["bike"], seeded["office"]] and len(by_recalls) == 6  # then the rest: no cap
    pages = [m.id for offset in range(0, 6, 4) for m in mem.list(order="recalls", limit=4, offset=offset)]
    assert pages == by_recalls  # paged across the found and the never-found ones, none twice
    assert mem.list(order="recalls", limit=2, offset=4) == mem.list(order="recalls")[4:]
    assert mem.delete_bulk(agent="scout", caller=ALICE) == 1 and mem.list(agent="scout") == []
    with pytest.raises(ValidationError):
        mem.list(visibility="public")


def test_rest_and_the_cli_list_by_the_same_filters_and_sorts(db_target):
    with Memory.open(db_target) as mem:
        scout = mem.add("Dana's scout found the trailhead", caller=Caller("dana", "scout"), visibility="private",
                        importance=0.95).id
        fact = mem.add("Dana is allergic to hazelnuts", caller=Caller("dana"), source_type="extraction").id
        plain = mem.add("Dana waters the orchids", caller=Caller("dana"), importance=0.2).id
        mem.add("Erin likes jazz", caller=Caller("erin"))
        with TestClient(create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True),
                        base_url="http://127.0.0.1:8765") as http:
            def listed(**params):
                r = http.get("/v1/memories", params=params)
                assert r.status_code == 200, r.text
                return [m["id"] for m in r.json()["memories"]]
            assert sorted(listed(user="dana")) == sorted([scout, fact, plain])
            assert listed(agent="scout") == [scout] and listed(user="dana", visibility="private") == [scout]
            assert listed(user="dana", source="fact") == [fact]
            assert listed(user="dana", order="importance") == [scout, fact, plain]
            assert http.get("/v1/memories", params={"source": "window"}).status_code in (400, 422)
        run = CliRunner()
        result = run.invoke(cli, ["--db", db_target, "list", "--of-user", "dana", "--source", "fact", "--json"])
        assert result.exit_code == 0, result.output
        assert [m["id"] for m in json.loads(result.output)] == [fact]
        result = run.invoke(cli, ["--db", db_target, "list", "--of-user", "dana", "--by-agent", "scout",
                                  "--visibility", "private", "--order", "importance", "--json"])
        assert [m["id"] for m in json.loads(result.output)] == [scout]
        result = run.invoke(cli, ["--db", db_target, "list", "--of-user", "dana", "--order", "importance", "--json"])
        assert [m["id"] for m in json.loads(result.output)] == [scout, fact, plain]
