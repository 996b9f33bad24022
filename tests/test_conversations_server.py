"""The conversation record through a real `clawrecall serve`: REST routes, the agent_end hook, the tools,
the CLI; one user's conversation is never another's; a kill -9 loses no acknowledged message."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx
import pytest
from click.testing import CliRunner
from live_server import db, home, server  # noqa: F401  (fixtures)

from clawrecall import Memory
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.server.spawn import spawn_server

SAID = "Just so you know, my favourite tea is oolong from Taiwan."


@pytest.fixture(scope="module")
def tokens(db):  # noqa: F811
    store = TokenStore(db)
    made = {"alice": store.create(user_id="alice", agent_id="main")[1], "bob": store.create(user_id="bob")[1]}
    store.close()
    return made


def client(server, token, session="s1"):  # noqa: F811
    return httpx.Client(base_url=server.url, timeout=60,
                        headers={"Authorization": f"Bearer {token}", "x-clawrecall-session": session})


@pytest.fixture(scope="module")
def recorded(server, tokens):  # noqa: F811
    with client(server, tokens["alice"]) as alice:
        out = alice.post("/v1/hooks/agent_end", json={"messages": [
            {"role": "user", "content": SAID, "timestamp": 1772442000000},
            {"role": "assistant", "content": "Noted, oolong it is.", "timestamp": 1772442001000},
        ], "channel": "telegram"})
        assert out.status_code == 200 and out.json()["recorded"] == 2, out.text
        logged = alice.post("/v1/conversations/messages", json={
            "session_id": "s2", "messages": [{"role": "user", "content": "The shed roof needs cedar shingles"}]})
        assert logged.status_code == 200 and logged.json()["stored"] == 1, logged.text
    deadline = time.monotonic() + 30  # the server embeds after answering
    while time.monotonic() < deadline:
        with client(server, tokens["alice"]) as alice:
            hits = alice.post("/v1/search", json={"query": "favourite tea oolong", "sources": ["message"],
                                                  "mode": "vector"}).json()["results"]
        if hits:
            break
        time.sleep(0.2)
    return True


def test_rest_routes_show_the_record(server, tokens, recorded):  # noqa: F811
    with client(server, tokens["alice"]) as alice:
        listed = alice.get("/v1/conversations").json()["conversations"]
        assert {c["session_id"] for c in listed} == {"s1", "s2"}
        shown = alice.get("/v1/conversations/s1").json()["messages"]
        assert [(m["role"], m["channel"]) for m in shown] == [("user", "telegram"), ("assistant", "telegram")]
        assert "dedup_key" not in shown[0]
        ended = alice.post("/v1/conversations/s1/end", json={"reason": "explicit"}).json()["closed"]
        assert ended["close_reason"] == "explicit" and ended["message_count"] == 2
        segments = alice.get("/v1/conversations/s1/segments").json()["segments"]
        assert [s["id"] for s in segments] == [ended["id"]]
        lines = alice.get("/v1/conversations/s1/export").text.splitlines()
        assert [json.loads(line)["content"] for line in lines] == [SAID, "Noted, oolong it is."]
        stats = alice.get("/v1/conversations/stats", params={"by": "session"}).json()["groups"]
        assert {g["key"]: g["messages"] for g in stats} == {"s1": 2, "s2": 1}
        assert alice.get("/v1/conversations/nope").status_code == 404
        assert alice.post("/v1/conversations/messages", json={"messages": [{"role": "x", "content": "y"}]}).status_code == 400
        paths = alice.get("/openapi.json").json()["paths"]
        assert {"/v1/conversations", "/v1/conversations/messages", "/v1/conversations/{session_id}/end"} <= set(paths)


def test_search_context_labels_sources_and_recall_reaches_an_earlier_session(server, tokens, recorded):  # noqa: F811
    with client(server, tokens["alice"], session="s3") as alice:
        context = alice.post("/v1/context", json={"query": "favourite tea oolong"}).json()
        top = context["results"][0]
        assert top["source"] == "request" and top["origin"]["session_id"] == "s1" and top["origin"]["role"] == "user"
        recall = alice.post("/v1/tools/memory_recall", json={"query": "favourite tea oolong"}).json()
        assert "oolong" in recall["content"][0]["text"] and "[user said]" in recall["content"][0]["text"]
        hook = alice.post("/v1/hooks/before_prompt_build", json={"prompt": "which tea do I like, oolong?"}).json()
        assert "favourite tea is oolong" in hook["prependContext"]


def test_another_user_never_reaches_the_record_through_any_door(server, tokens, recorded, db):  # noqa: F811
    with client(server, tokens["bob"]) as bob:
        assert bob.get("/v1/conversations").json()["conversations"] == []
        for path in ("s1", "s1/segments", "s1/export"):  # as for a session that does not exist
            assert bob.get(f"/v1/conversations/{path}").status_code == 404
        assert bob.get("/v1/conversations/stats").json()["groups"] == []
        assert bob.post("/v1/search", json={"query": "oolong tea", "sources": ["memory", "message", "chunk"]}).json()["results"] == []
        assert bob.post("/v1/context", json={"query": "oolong tea"}).json()["results"] == []
        assert "oolong" not in bob.post("/v1/tools/search_context", json={"query": "oolong tea"}).text
        assert bob.post("/v1/conversations/s1/end").status_code == 404
        assert "oolong" not in bob.post("/mcp", json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "search_context", "arguments": {"query": "oolong tea"}}},
            headers={"Accept": "application/json, text/event-stream"}).text
    runner = CliRunner()
    for args in (["conversations", "list", "--user", "bob"], ["conversations", "export", "--user", "bob"],
                 ["search", "oolong tea", "--user", "bob", "--sources", "memory,message"]):
        result = runner.invoke(cli, ["--db", str(db), *args])
        assert result.exit_code == 0 and "oolong" not in result.output, (args, result.output)
    shown = runner.invoke(cli, ["--db", str(db), "conversations", "show", "s1", "--user", "bob"])
    assert shown.exit_code == 1 and "no conversation" in shown.output


@pytest.mark.parametrize("round_", range(3))
def test_kill_9_during_a_stream_of_hook_calls_loses_no_acknowledged_message(db_target, tmp_path, round_):
    """Each agent_end answer means its messages are in the database: a server killed at any point
    keeps every message of every answered call (and the store opens and serves). Both backends."""
    path = db_target
    acknowledged: list[str] = []
    stop = threading.Event()
    with spawn_server(path, log_path=tmp_path / "serve.log") as running:
        def stream() -> None:
            transcript: list[dict] = []
            with httpx.Client(base_url=running.url, timeout=60, headers={"x-clawrecall-user": "alice",
                                                                         "x-clawrecall-session": "k"}) as c:
                n = 0
                while not stop.is_set():
                    transcript += [{"role": "user", "content": f"turn {n} question {round_}"},
                                   {"role": "assistant", "content": f"turn {n} answer {round_}"}]
                    try:
                        r = c.post("/v1/hooks/agent_end", json={"messages": transcript})
                    except httpx.HTTPError:
                        return
                    if r.status_code == 200:
                        acknowledged[:] = [m["content"] for m in transcript]
                    n += 1

        writer = threading.Thread(target=stream)
        writer.start()
        deadline = time.monotonic() + 60  # killed after 5, 10 or 15 answered calls, as the next one is under way
        while len(acknowledged) < 10 * (round_ + 1) and writer.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(running.process.pid, signal.SIGKILL)
        running.process.wait()
        stop.set()
        writer.join(15)
    assert len(acknowledged) >= 4
    with Memory.open(path) as mem:
        from clawrecall.scopes import Caller

        kept = [m.content for m in mem.conversations.show("k", caller=Caller("alice"), limit=100_000)]
        assert kept[: len(acknowledged)] == acknowledged
        assert mem._store.integrity_problems() == []
        mem.upkeep.sweep()
        assert mem.search(f"turn 0 question {round_}", caller=Caller("alice"), sources=["message"], mode="bm25")


def test_a_session_id_with_a_slash_is_reached_by_every_route(server, tokens, recorded):  # noqa: F811
    with client(server, tokens["alice"]) as alice:
        logged = alice.post("/v1/conversations/messages", json={
            "session_id": "telegram/123", "messages": [{"role": "user", "content": "Pick up the cedar shingles"}]})
        assert logged.status_code == 200 and logged.json()["stored"] == 1, logged.text
        for path in ("telegram/123", "telegram%2F123"):
            assert alice.get(f"/v1/conversations/{path}").json()["messages"][0]["content"] == "Pick up the cedar shingles"
            assert len(alice.get(f"/v1/conversations/{path}/segments").json()["segments"]) == 1
            assert "cedar shingles" in alice.get(f"/v1/conversations/{path}/export").text
        assert alice.post("/v1/conversations/telegram/123/end").json()["closed"]["session_id"] == "telegram/123"
        assert alice.post("/v1/conversations/telegram/123/end").json()["closed"] is None  # nothing open any more
        for path in ("telegram/124", "telegram/124/segments", "telegram/124/export"):
            assert alice.get(f"/v1/conversations/{path}").status_code == 404
        assert alice.get("/v1/conversations/").status_code == 400  # no session id, not the list
        too_long = alice.post("/v1/conversations/messages", json={"session_id": "s" * 201, "messages": [
            {"role": "user", "content": "hi"}]})
        assert too_long.status_code == 400 and "1 to 200 characters" in too_long.text
        no_source = alice.post("/v1/search", json={"query": "cedar", "sources": []})
        assert no_source.status_code == 400 and "no source given" in no_source.text


def test_a_conversation_is_deleted_by_its_owner_through_rest_and_the_cli(server, tokens, recorded, db):  # noqa: F811
    with client(server, tokens["alice"]) as alice, client(server, tokens["bob"]) as bob:
        for session in ("old/1", "old-2"):
            logged = alice.post("/v1/conversations/messages", json={
                "session_id": session, "messages": [{"role": "user", "content": "My old locker code was 1234"}]})
            assert logged.status_code == 200 and logged.json()["stored"] == 1, logged.text
        assert bob.delete("/v1/conversations/old/1").status_code == 404  # as if there were none
        dry = alice.delete("/v1/conversations/old/1", params={"dry_run": "true"})
        assert dry.json() == {"session_id": "old/1", "scope": "user:alice", "dry_run": True,
                              "deleted": {"messages": 1, "segments": 1, "occurrences": 0, "jobs": 0}}
        assert bob.delete("/v1/conversations/old/1", params={"scope": "user:alice"}).status_code == 403
        assert alice.get("/v1/conversations/old/1").status_code == 200
        done = alice.delete("/v1/conversations/old/1")
        assert done.status_code == 200 and done.json()["dry_run"] is False and done.json()["deleted"]["messages"] == 1
        assert alice.get("/v1/conversations/old/1").status_code == 404
        assert alice.delete("/v1/conversations/old/1").status_code == 404
    runner = CliRunner()
    refused = runner.invoke(cli, ["--db", str(db), "conversations", "delete", "old-2", "--user", "alice"])
    assert refused.exit_code == 2 and "needs confirmation" in refused.output  # no terminal to ask on
    result = runner.invoke(cli, ["--db", str(db), "conversations", "delete", "old-2", "--user", "alice", "--yes", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["deleted"] == {"messages": 1, "segments": 1, "occurrences": 0, "jobs": 0}
    with client(server, tokens["alice"]) as alice:
        assert alice.get("/v1/conversations/old-2").status_code == 404
        assert alice.get("/v1/conversations/s1").status_code == 200  # the others stay
        # a scope picks one conversation of a session id; one the caller may not read is refused
        assert len(alice.get("/v1/conversations/s1", params={"scope": "user:alice"}).json()["messages"]) == 2
        assert alice.get("/v1/conversations/s1", params={"scope": "user:bob"}).status_code == 403
        assert alice.get("/v1/conversations", params={"scope": "user:alice"}).json()["conversations"]
        assert alice.get("/v1/conversations/s1/segments", params={"scope": "user:alice"}).json()["segments"]
        assert "oolong" in alice.get("/v1/conversations/s1/export", params={"scope": "user:alice"}).text
    shown = runner.invoke(cli, ["--db", str(db), "conversations", "show", "s1", "--user", "alice", "--scope", "user:alice"])
    assert shown.exit_code == 0 and "oolong" in shown.output, shown.output
