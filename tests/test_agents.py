"""Many agents, one household (docs/agents.md): an agent reads its own memories, those no agent wrote
and the other agents' shared ones, never another agent's private or secret ones; a secret only when
asked for, by its own agent. As a property over random agents, users, levels and operations on both
backends, through every door: the Python API, REST, MCP over HTTP and the tools (TestClient), the
CLI (its commands run in-process on the same store), the recall hook, recaps and time-only questions,
and export."""

from __future__ import annotations

import io
import itertools
import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawrecall import Caller, Memory, NotFoundError, ScopeError
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.hooks import before_prompt_build
from clawrecall.server import create_app
from clawrecall.tools import run_tool

AGENTS = ("main", "drjones", "bob", "frank")
USERS = ("alice", "carol")
LEVELS = ("private", "shared", "secret")


def visible(reader: Caller, memory: dict, *, secrets: bool = False) -> bool:
    """The household rule, spelled out on its own (readers here always name a user and an agent)."""
    if memory["user"] != reader.user_id:
        return False
    own = memory["agent"] == reader.agent_id
    if memory["level"] == "secret":
        return secrets and own
    return own or memory["level"] == "shared"


def doors(mem: Memory, client: TestClient, reader: Caller, db: str) -> tuple[str, dict[str, str]]:
    """Everything a reader receives from every door that answers a query or lists, as one text, and
    what each listing door returned (those list every memory the reader may see)."""
    query = "household note"
    headers = {"X-Clawrecall-User": reader.user_id, "X-Clawrecall-Agent": reader.agent_id}
    who = ["--user", reader.user_id, "--agent", reader.agent_id, "--json"]
    got = [
        *(m.content for m in mem.list(caller=reader, limit=1000, include_superseded=True)),
        *(h.memory.content for h in mem.search(query, caller=reader, limit=100, min_score=0)),
        before_prompt_build(mem, {"prompt": "what do you know about the household note?"}, reader)["prependContext"] or "",
        # a time-only question and a recap: answered by when things were said, not by what they say
        *(h.memory.content for h in mem.search("what did we talk about today?", caller=reader, limit=100)),
        before_prompt_build(mem, {"prompt": "Recap what we discussed today."}, reader)["prependContext"] or "",
        client.get("/v1/memories", params={"limit": 1000}, headers=headers).text,
        client.post("/v1/search", json={"query": query, "limit": 100, "min_score": 0}, headers=headers).text,
        client.post("/v1/context", json={"query": query}, headers=headers).text,
    ]
    listed: dict[str, str] = {}
    for name, args in (("memory_recall", {"query": query, "limit": 20}), ("memory_search", {"query": query}),
                       ("search_context", {"query": query}), ("memory_list", {"limit": 100})):
        got.append(json.dumps(run_tool(mem, reader, name, args).to_json(), default=str))
        called = client.post("/mcp", headers={**headers, "Accept": "application/json, text/event-stream"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}})
        assert called.status_code == 200 and '"isError":true' not in called.text.replace(" ", ""), called.text
        got.append(called.text)
        listed[f"mcp {name}"] = called.text
    for command in (["search", query, "--limit", "100", "--min-score", "0"], ["list", "--limit", "1000"],
                    ["export"]):
        ran = CliRunner().invoke(cli, ["--db", db, *command, *who])
        assert ran.exit_code == 0, ran.output
        got.append(ran.output)
        listed[f"cli {command[0]}"] = ran.output
    exported = io.StringIO()
    mem.export_jsonl(exported, caller=reader)
    got.append(exported.getvalue())
    listed["export"] = exported.getvalue()
    return "\n".join(got), {k: listed[k] for k in ("mcp memory_list", "cli list", "cli export", "export")}


def test_no_agent_receives_another_agents_private_or_secret_memory(db_target):
    """Random households write and re-level memories; after each step every reader's doors are read
    and hold exactly the markers the rule lets through (none it forbids), and reads by id agree."""
    marks = itertools.count()
    with Memory.open(db_target, check_embedding=False) as mem, TestClient(
            create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True),
            base_url="http://127.0.0.1:8765") as client:  # entered: MCP's session manager runs in the lifespan
        stored: dict[str, dict] = {}

        callers = st.builds(Caller, st.sampled_from(USERS), st.sampled_from(AGENTS))
        steps = st.lists(st.tuples(callers, st.sampled_from(("add", "relevel")), st.sampled_from(LEVELS),
                                   st.integers(0, 10**6), callers), min_size=1, max_size=3)

        @settings(max_examples=6, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
        @given(steps)
        def run(program: list) -> None:
            for writer, op, level, pick, reader in program:
                if op == "add" or not stored:
                    mark = f"zq{next(marks):05d}x"
                    r = mem.add(f"household note {mark}", caller=writer, visibility=level, dedup=False).memory
                    stored[r.id] = {"mark": mark, "user": writer.user_id, "agent": writer.agent_id, "level": level}
                else:
                    memory_id = sorted(stored)[pick % len(stored)]
                    m = stored[memory_id]
                    try:
                        mem.update(memory_id, caller=writer, visibility=level)
                    except (NotFoundError, ScopeError) as e:
                        # only its own agent changes a level, and an agent never makes a secret readable
                        assert (m["user"], m["agent"]) != (writer.user_id, writer.agent_id) or (
                            m["level"] == "secret" and level != "secret"), e
                    else:
                        assert m["user"] == writer.user_id and m["agent"] == writer.agent_id
                        assert not (m["level"] == "secret" and level != "secret")
                        m["level"] = level
                text, listed = doors(mem, client, reader, db_target)
                for memory_id, m in stored.items():
                    if not visible(reader, m):
                        assert m["mark"] not in text, (reader, m)
                    else:  # and the doors are really read: each listing door shows what the reader may see
                        assert [door for door, got in listed.items() if m["mark"] not in got] == [], (reader, m)
                    # by id, an explicit request: its own secrets too, never another agent's private
                    try:
                        mem.get(memory_id, caller=reader)
                        assert visible(reader, m, secrets=True), (reader, m)
                    except NotFoundError:
                        assert not visible(reader, m, secrets=True), (reader, m)
                    seen = {x.id for x in mem.list(caller=reader, limit=1000, secrets=True)}
                    assert (memory_id in seen) == visible(reader, m, secrets=True), (reader, m)

        run()


def test_a_memory_told_to_one_agent_does_not_follow_the_user_to_another(db_target):
    with Memory.open(db_target, check_embedding=False, access={"agents": {"*": {"visibility": "private"}}}) as mem:
        drjones, bob = Caller("alice", "drjones"), Caller("alice", "bob")
        blood = mem.add("My blood test came back fine", caller=drjones).memory
        tea = mem.add("Alice drinks green tea", caller=drjones, visibility="shared").memory
        said = mem.add("Alice lives in Brno", user_id="alice").memory  # her own words, no agent
        assert blood.visibility == "private"
        assert {m.id for m in mem.list(caller=bob)} == {tea.id, said.id}
        assert {m.id for m in mem.list(caller=drjones)} == {blood.id, tea.id, said.id}
        with pytest.raises(NotFoundError):
            mem.get(blood.id, caller=bob)
        with pytest.raises(NotFoundError):  # not found, so not changed or erased either
            mem.delete(blood.id, caller=bob)
        # the person and the administrator see every level but secrets
        assert {m.id for m in mem.list(user_id="alice")} == {blood.id, tea.id, said.id}


def test_per_agent_levels_and_the_master_switch(db_target):
    access = {"agents": {"*": {"visibility": "private", "rules": {"preference": "shared"}},
                         "frank": {"master": False}, "main": {"visibility": "shared"}}}
    with Memory.open(db_target, check_embedding=False, access=access) as mem:
        main, dj, frank = Caller("alice", "main"), Caller("alice", "drjones"), Caller("alice", "frank")
        assert mem.add("Alice's home router is in the attic", caller=main).memory.visibility == "shared"
        assert mem.add("Check the dosage", caller=dj).memory.visibility == "private"
        assert mem.add("Alice prefers metric units", caller=dj, category="preference").memory.visibility == "shared"
        assert [m.content for m in mem.list(caller=frank)] == []  # frank reads no other agent's memory
        assert len(mem.list(caller=dj)) == 3


def test_a_secret_is_found_only_by_its_own_agent_when_asked_and_an_agent_never_unseals_it(db_target):
    with Memory.open(db_target, check_embedding=False) as mem:
        dj, bob = Caller("alice", "drjones"), Caller("alice", "bob")
        key = mem.add("The garage code is 4711", caller=dj, visibility="secret").memory
        assert key.id not in {m.id for m in mem.list(caller=dj)}  # not without asking
        assert not mem.search("garage code", caller=dj, min_score=0)
        assert [h.memory.id for h in mem.search("garage code", caller=dj, min_score=0, secrets=True)] == [key.id]
        assert mem.get(key.id, caller=dj).content == "The garage code is 4711"
        assert key.id not in {m.id for m in mem.list(caller=bob, secrets=True)}
        with pytest.raises(ScopeError, match="may not make a secret readable"):
            mem.update(key.id, caller=dj, visibility="shared")
        result = run_tool(mem, dj, "memory_update", {"id": key.id, "visibility": "shared"})
        assert result.is_error and "may not make a secret readable" in result.text
        assert mem.get(key.id, caller=dj).visibility == "secret"
        # the person may; the change is in the history
        assert mem.update(key.id, user_id="alice", visibility="private").visibility == "private"
        assert [(h.before, h.after) for h in mem.history(key.id, user_id="alice") if h.action == "update"] == [
            ({"visibility": "secret"}, {"visibility": "private"})]
        exported = io.StringIO()
        mem.export_jsonl(exported)
        assert "4711" in exported.getvalue()  # no longer secret
        secret = mem.add("The safe code is 1234", caller=dj, visibility="secret").memory
        exported = io.StringIO()
        mem.export_jsonl(exported)
        assert "1234" not in exported.getvalue()
        exported = io.StringIO()
        mem.export_jsonl(exported, secrets=True)
        assert "1234" in exported.getvalue() and secret.id in exported.getvalue()


def test_deduplication_never_names_another_agents_private_memory(db_target):
    with Memory.open(db_target, check_embedding=False) as mem:
        dj, bob = Caller("alice", "drjones"), Caller("alice", "bob")
        private = mem.add("Alice's blood pressure is 120 over 80", caller=dj, visibility="private").memory
        made = mem.add("Alice's blood pressure is 120 over 80", caller=bob, visibility="private")
        assert made.memory is not None and made.id != private.id and made.memory.agent_id == "bob"
        shared = mem.add("Alice's cat is called Mia", caller=dj, visibility="shared").memory
        assert mem.add("Alice's cat is called Mia", caller=bob).id == shared.id  # the master copy is one row


def test_the_master_knowledge_base_one_copy_with_provenance_latest_wins_and_retraction(db_target):
    from datetime import datetime, timezone

    with Memory.open(db_target, check_embedding=False) as mem:
        dj, bob, main = Caller("alice", "drjones"), Caller("alice", "bob"), Caller("alice", "main")
        first = mem.add("Alice's dentist is Dr. Novak", caller=dj, visibility="shared").memory
        own = mem.add("Alice's dentist appointment is on Friday", caller=main, visibility="private").memory
        # provenance: the one row says which agent, which memory, when
        seen = {h.memory.id: h.memory for h in mem.search("Alice's dentist", caller=main, min_score=0)}
        assert (seen[first.id].agent_id, seen[first.id].created_at) == ("drjones", first.created_at)
        answer = before_prompt_build(mem, {"prompt": "Who is Alice's dentist?"}, main)["prependContext"]
        assert "[via drjones] Alice's dentist is Dr. Novak" in answer
        assert "[via" not in next(line for line in answer.splitlines() if "Friday" in line)
        recalled = run_tool(mem, main, "memory_recall", {"query": "Alice's dentist"}).text
        assert "[via drjones]" in recalled
        # ranked after the agent's own at equal relevance: the master weight is in the explanation
        hits = {h.memory.id: h.explain for h in mem.search("Alice's dentist", caller=main, min_score=0, explain=True)}
        assert hits[first.id]["master"] == mem.config.retrieval.master_weight and "master" not in hits[own.id]
        # a later fact from another agent wins; the earlier one stays as it was (as_of)
        before = datetime.now(timezone.utc)
        second = mem.supersede(first.id, "Alice's dentist is Dr. Dvorak", caller=bob)
        assert (second.agent_id, second.visibility, second.supersedes) == ("bob", "shared", first.id)
        now = {m.content for m in mem.list(caller=main)}
        assert "Alice's dentist is Dr. Dvorak" in now and "Alice's dentist is Dr. Novak" not in now
        assert "Alice's dentist is Dr. Novak" in {m.content for m in mem.list(caller=main, as_of=before)}
        # retraction: demoting to private, deleting or forgetting leaves no copy in another agent's reads
        mem.update(second.id, caller=bob, visibility="private")
        assert second.id not in {m.id for m in mem.list(caller=main)}
        mem.update(second.id, caller=bob, visibility="shared")
        assert second.id in {m.id for m in mem.list(caller=main)}
        mem.delete(second.id, caller=bob)
        assert second.id not in {m.id for m in mem.list(caller=main, include_superseded=True)}
        mem.forget(first.id, user_id="alice")
        assert all("dentist is Dr." not in m.content for m in mem.list(caller=main, include_superseded=True))


def test_a_conversation_with_one_agent_is_not_another_agents_to_read(db_target):
    """What alice said to drjones stays drjones's: its messages are read by no other agent, whatever
    level the rows had when they were stored (a store from before the household keeps them `shared`)."""
    with Memory.open(db_target, check_embedding=False) as mem:
        dj, bob = Caller("alice", "drjones", "s-dj"), Caller("alice", "bob", "s-bob")
        mem.conversations.log([{"role": "user", "content": "My blood test came back fine"}], caller=dj)
        query = "blood test came back"
        assert [h.memory.content for h in mem.search(query, caller=dj, sources=["message"], min_score=0)] == [
            "My blood test came back fine"]
        assert not mem.search(query, caller=bob, sources=["message"], min_score=0)
        assert "blood test" not in str(before_prompt_build(mem, {"prompt": "How was my blood test?"}, bob))
        # nor through the record's own reads: its sessions, a session by id, segments, export
        assert [c.session_id for c in mem.conversations.sessions(caller=dj)] == ["s-dj"]
        assert mem.conversations.sessions(caller=bob) == []
        with pytest.raises(NotFoundError):
            mem.conversations.show("s-dj", caller=bob)
        with pytest.raises(NotFoundError):
            mem.conversations.segments(caller=bob, session_id="s-dj")
        exported = io.StringIO()
        assert mem.conversations.export(exported, caller=bob) == 0 and "blood" not in exported.getvalue()
        assert [m.content for m in mem.conversations.show("s-dj", caller=Caller("alice"))] == ["My blood test came back fine"]
