"""Erasing a person (GDPR) and soft-deleting by filter: in the engine on both backends, over REST and on the CLI."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from clawrecall import Caller, Memory, ScopeError, ValidationError, WritesDisabledError
from clawrecall._time import utcnow
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.cli.erasure import counts_text
from clawrecall.config import AccessConfig, ScopeAccess
from clawrecall.server import create_app

SECRET = "Alice's passport number is X4471-QZ"


def grant_global(mem: Memory, *members: str) -> None:
    """Let these callers write `global` (by default only the administrator may: docs/security.md)."""
    mem.config.access = AccessConfig(scopes={"global": ScopeAccess(write=list(members))})


def seed(mem: Memory) -> dict[str, str]:
    """Alice: two memories in her scope (one soft-deleted, one updated), one she wrote to global (a grant lets
    her), a startup entry, a change to a global memory of nobody's; bob: one memory and a startup entry."""
    grant_global(mem, "user:alice")
    alice = Caller("alice")
    ids = {
        "secret": mem.add(SECRET, caller=alice).id,
        "deleted": mem.add("Alice once lived in Lisbon", caller=alice).id,
        "global": mem.add("Alice says the wiki moved to Confluence", caller=alice, scope="global").id,
        "bob": mem.add("Bob plays the cello", user_id="bob").id,
        "shared": mem.add("The office closes at six").id,
    }
    mem.update(ids["secret"], content=SECRET + " (renewed 2024)", caller=alice)
    mem.update(ids["shared"], title="Opening hours", caller=alice)  # a change alice signed on a memory not hers
    mem.delete(ids["deleted"], caller=alice)
    mem.startup.set("name", "The user is Alice", caller=alice)
    mem.startup.set("name", "The user is Bob", user_id="bob")
    return ids


def test_erase_a_user_counts_first_then_removes_memories_history_and_startup(db_target):
    with Memory.open(db_target) as mem:
        ids = seed(mem)
        # history: 3 adds, 1 update, 1 delete; signed by alice: those 5 and her change to the shared memory
        expected = {"memories": 3, "history": 5, "history_actor": 6, "occurrences": 0, "messages": 0, "segments": 0, "files": 0, "startup": 1, "jobs": 0, "searches": 0}
        assert mem.erase(user_id="alice", dry_run=True).erased == expected
        assert mem.count(include_deleted=True) == 5  # a dry run changes nothing

        assert mem.erase(user_id="alice").erased == expected
        assert {r.id for r in mem.list(include_deleted=True)} == {ids["bob"], ids["shared"]}
        assert [e.content for e in mem.startup.list()] == ["The user is Bob"]
        for key in ("secret", "deleted", "global"):
            trail = mem.history(ids[key])  # the administrator still sees that it was erased, by whom, when
            assert trail[-1].action == "forget" and trail[-1].actor == "local"
            assert all(e.before is None and e.after is None for e in trail)
            assert {e.actor for e in trail[:-1]} == {"user:(erased)"}
        shared = mem.history(ids["shared"])
        assert [(e.action, e.actor, e.after) for e in shared[1:]] == [("update", "user:(erased)", {"title": "Opening hours"})]
        assert {h.id for h in mem.search("passport number", min_score=0)} == {ids["bob"], ids["shared"]}
        assert mem.erase(user_id="alice").erased == {"memories": 0, "history": 0, "history_actor": 0, "occurrences": 0, "messages": 0, "segments": 0, "files": 0, "startup": 0, "jobs": 0, "searches": 0}
        if mem._store.backend == "sqlite":
            mem.close()
            raw = b"".join(p.read_bytes() for p in Path(db_target).parent.glob(Path(db_target).name + "*"))
            assert b"X4471-QZ" not in raw and b"Lisbon" not in raw  # nor in the WAL: it was checkpointed


def test_erase_an_agent_takes_its_scope_and_what_it_owns(db_target):
    with Memory.open(db_target) as mem:
        grant_global(mem, "agent:deploy")
        mem.add("Deploy bot's runbook lives in ops/", agent_id="deploy")
        mem.add("Alice asked the deploy bot for a rollback", caller=Caller("alice", "deploy"))
        other = mem.add("Review bot checks style", agent_id="review").id
        shared = mem.add("The style guide lives in docs/").id
        mem.update(shared, title="style", caller=Caller("alice", "deploy"))
        assert mem.erase(agent_id="deploy").erased == {"memories": 2, "history": 2, "history_actor": 3, "occurrences": 0, "messages": 0, "segments": 0, "files": 0, "startup": 0, "jobs": 0, "searches": 0}
        assert {r.id for r in mem.list(include_deleted=True)} == {other, shared}
        assert [e.actor for e in mem.history(shared)] == ["local", "user:alice agent:(erased)"]


def test_only_the_administrator_or_the_person_may_erase(db_target):
    with Memory.open(db_target) as mem:
        seed(mem)
        with pytest.raises(ScopeError, match="user:alice"):
            mem.erase(user_id="alice", caller=Caller("bob"))
        with pytest.raises(ScopeError):  # a token that does not list the person's scope
            mem.erase(user_id="alice", caller=Caller("alice", scopes=("global",)))
        assert mem.count(include_deleted=True) == 5
        assert mem.erase(user_id="alice", caller=Caller("alice", scopes=("global", "user:alice"))).erased["memories"] == 3
        assert "user:alice" not in mem._store.history.actors() and "user:(erased)" in mem._store.history.actors()
        assert mem.history(mem.list(scope="user:bob")[0].id)[-1].action == "add"


def test_an_agent_acting_for_a_user_may_not_erase_the_agent_and_the_agent_not_the_users_record(db_target):
    with Memory.open(db_target) as mem:
        mem.config.access = AccessConfig(scopes={"global": ScopeAccess(write=["user:alice"]),
                                                 "project:atlas": ScopeAccess(read=["agent:planner"], write=["user:alice"])})
        through = Caller("alice", "planner")
        alices = {mem.add("Alice's rollback plan", caller=through).id,
                  mem.add("The wiki moved to Confluence", caller=through, scope="global").id,
                  mem.add("Atlas ships in May", caller=through, scope="project:atlas").id}
        mem.conversations.log([{"role": "user", "content": "roll back the deploy"}], caller=Caller("alice", "planner", "s1"))
        mem.add("The planner's runbook lives in ops/", agent_id="planner")
        with pytest.raises(ScopeError, match="only the administrator or agent 'planner' itself"):
            mem.erase(agent_id="planner", caller=Caller("bob", "planner"), dry_run=True)
        # the agent itself takes its own scope, not what alice said through it, even where the agent reads
        counts = mem.erase(agent_id="planner", caller=Caller(None, "planner")).erased
        assert (counts["memories"], counts["messages"], counts["segments"]) == (1, 0, 0)
        assert {r.id for r in mem.list(scope="*")} == alices and mem.conversations.show("s1", caller=Caller("alice"))
        counts = mem.erase(agent_id="planner").erased  # the administrator: everything the agent did, for anyone
        assert (counts["memories"], counts["messages"], counts["segments"]) == (3, 1, 1)


def test_a_self_erasure_stays_inside_the_tokens_list(db_target):
    with Memory.open(db_target) as mem:
        mem.config.access = AccessConfig(scopes={"project:atlas": ScopeAccess(write=["user:alice"])})
        atlas = mem.add("Alice's estimate for Atlas: six weeks", caller=Caller("alice"), scope="project:atlas").id
        mem.add("Alice's own note", caller=Caller("alice"))
        assert mem.erase(user_id="alice", caller=Caller("alice", scopes=("global", "user:alice"))).erased["memories"] == 1
        assert mem.get(atlas).id == atlas  # the token does not reach project:atlas
        assert mem.erase(user_id="alice", caller=Caller("alice")).erased["memories"] == 1  # without the token, she does


@pytest.mark.parametrize("kwargs, message", [
    ({}, "give user_id or agent_id"),
    ({"user_id": "a", "agent_id": "b"}, "give user_id or agent_id"),
    ({"user_id": "  "}, "non-empty"),
    ({"user_id": 7}, "non-empty string"),
    ({"agent_id": "x\x00y"}, "invalid agent_id"),
])
def test_erase_names_exactly_one_valid_person(tmp_path, kwargs, message):
    with Memory.open(tmp_path / "m.db") as mem:
        with pytest.raises(ValidationError, match=message):
            mem.erase(**kwargs)


def test_erasing_thousands_of_memories_is_one_statement_per_table(db_target):
    """`forget` cost ~0.37 s a memory (a full-text merge and a WAL checkpoint each): 12 minutes for 2,000."""
    with Memory.open(db_target) as mem:
        mem.add_many([{"content": f"Note {i} on topic {i * 31 % 97}"} for i in range(2000)], user_id="carol", dedup=False)
        mem.add("Dave's note", user_id="dave")
        started = time.perf_counter()
        counts = mem.erase(user_id="carol").erased
        took = time.perf_counter() - started
        assert counts == {"memories": 2000, "history": 2000, "history_actor": 2000, "occurrences": 0, "messages": 0, "segments": 0, "files": 0, "startup": 0, "jobs": 0, "searches": 0}
        assert took < 60, f"erasing 2,000 memories took {took:.2f} s"  # not one a memory: that took 12 minutes
        assert mem.count(include_deleted=True) == 1


def test_a_read_only_store_refuses_to_erase_but_answers_a_dry_run(tmp_path):
    with Memory.open(tmp_path / "m.db") as mem:
        mem.add("Erin likes tea", user_id="erin")
    with Memory.open(tmp_path / "m.db", writes={"enabled": False}) as mem:
        assert mem.erase(user_id="erin", dry_run=True).erased["memories"] == 1
        with pytest.raises(WritesDisabledError):
            mem.erase(user_id="erin")
        assert mem.count() == 1


# -- delete_bulk ---------------------------------------------------------------------------------
def test_delete_bulk_soft_deletes_what_matches_and_counts_first(db_target):
    old = utcnow() - timedelta(days=40)
    with Memory.open(db_target) as mem:
        made = mem.add_many([
            {"content": "Old sprint notes from March", "tags": ["sprint"], "created_at": old},
            {"content": "Sprint goal: ship search", "tags": ["sprint"], "category": "decision"},
            {"content": "Team lunch on Friday", "tags": ["social"]},
            {"content": "Alice's own sprint worries", "tags": ["sprint"], "user_id": "alice"},
        ], dedup=False)
        ids = [r.id for r in made]
        assert mem.delete_bulk(tags=["sprint"], scope="global", dry_run=True) == 2
        assert mem.count() == 4
        assert mem.delete_bulk(until=utcnow() - timedelta(days=30)) == 1  # older than 30 days
        assert mem.get(ids[0]).deleted_at is not None
        assert mem.history(ids[0])[-1].action == "delete"
        assert mem.delete_bulk(tags=["sprint"], category="decision") == 1
        assert mem.delete_bulk(tags=["sprint"], category="decision") == 0  # deleted ones are not counted again
        # a user's bulk delete reaches only the scopes it reads: alice's own and global
        with pytest.raises(ScopeError):
            mem.delete_bulk(scope="user:alice", caller=Caller("bob"))
        assert mem.delete_bulk(tags=["sprint"], user_id="bob") == 0
        assert mem.delete_bulk(tags=["sprint"], user_id="alice") == 1
        assert [r.id for r in mem.list()] == [ids[2]]
        mem.undelete(ids[1])
        assert mem.count() == 2


def test_delete_bulk_erases_only_what_the_caller_may_erase(db_target):
    """Reading a scope is not erasing in it: a reader's bulk delete takes its own words there, nothing else."""
    with Memory.open(db_target) as mem:
        mem.config.access = AccessConfig(scopes={"project:atlas": ScopeAccess(read=["user:bob"], write=["user:alice"])})
        shared = mem.add("The office closes at six").id
        proposed = mem.add_many([{"content": "Bob proposed demos on Fridays", "user_id": "bob", "scope": "global"}])[0].id
        atlas = mem.add("Atlas ships in May", caller=Caller("alice"), scope="project:atlas").id
        cello = mem.add("Bob plays the cello", caller=Caller("bob")).id
        bob = Caller("bob")
        assert mem.delete_bulk(scope="project:atlas", caller=bob, dry_run=True) == 0
        assert mem.delete_bulk(scope="project:atlas", caller=bob) == 0
        assert mem.delete_bulk(scope="global", caller=bob, dry_run=True) == 1
        assert mem.delete_bulk(until=utcnow() + timedelta(days=1), caller=bob) == 2
        assert {r.id for r in mem.list(include_deleted=True, scope="*") if r.deleted_at} == {proposed, cello}
        assert mem.get(shared).deleted_at is None and mem.get(atlas).deleted_at is None
        assert mem.delete_bulk(scope="project:atlas", caller=Caller("alice")) == 1  # a writer may


def test_undelete_and_visibility_in_bulk_change_each_as_their_verb_would(db_target):
    """Bob reads the atlas project but writes only his own words there: undelete needs write access, as
    `undelete` does; an agent changes only its own memories' level and never makes a secret readable."""
    with Memory.open(db_target) as mem:
        mem.config.access = AccessConfig(scopes={"project:atlas": ScopeAccess(read=["user:bob"], write=["user:alice"])})
        alice, bob = Caller("alice"), Caller("bob")
        atlas = mem.add("Atlas ships in May", caller=alice, scope="project:atlas", tags=["atlas"]).id
        proposed = mem.add_many([{"content": "Bob proposed an Atlas demo", "user_id": "bob", "scope": "project:atlas",
                                  "tags": ["atlas"]}])[0].id
        assert mem.delete_bulk(tags=["atlas"], caller=alice) == 2
        assert mem.undelete_bulk(tags=["atlas"], caller=bob, dry_run=True) == 0  # he wrote one, but may not write there
        assert mem.undelete_bulk(tags=["atlas"], caller=bob) == 0
        assert mem.undelete_bulk(tags=["atlas"], caller=alice, dry_run=True) == 2
        assert mem.get(atlas).deleted_at is not None  # a dry run changes nothing
        assert mem.undelete_bulk(tags=["atlas"], caller=alice) == 2
        assert mem.get(atlas).deleted_at is None and mem.get(proposed).deleted_at is None
        assert mem.history(atlas)[-1].action == "undelete"
        assert mem.set_visibility_bulk("private", tags=["atlas"], caller=bob) == 0
        scout, other = Caller("alice", "scout"), Caller("alice", "other")
        mine = mem.add("Scout's trail notes", caller=scout, tags=["trail"]).id
        theirs = mem.add("Other's trail notes", caller=other, tags=["trail"]).id
        assert mem.set_visibility_bulk("secret", tags=["trail"], caller=scout) == 1
        assert mem.get(mine).visibility == "secret" and mem.get(theirs).visibility == "shared"
        assert mem.set_visibility_bulk("shared", tags=["trail"], caller=scout) == 0  # an agent may not open a secret
        assert mem.set_visibility_bulk("shared", tags=["trail"], caller=alice) == 1  # its user may
        opened = mem.get(mine)
        assert (opened.visibility, opened.content) == ("shared", "Scout's trail notes")
        with pytest.raises(ValidationError, match="unknown visibility"):
            mem.set_visibility_bulk("public", tags=["trail"], caller=alice)
        with pytest.raises(ValidationError, match="needs a filter"):
            mem.undelete_bulk(caller=alice)


def test_delete_bulk_needs_a_filter(tmp_path):
    with Memory.open(tmp_path / "m.db") as mem:
        mem.add("Keep me")
        with pytest.raises(ValidationError, match="needs a filter"):
            mem.delete_bulk()
        assert mem.count() == 1


# -- REST ----------------------------------------------------------------------------------------
def test_rest_erase_is_the_administrators_or_the_users_own(tmp_path):
    with Memory.open(tmp_path / "rest.db", check_embedding=False) as mem:
        seed(mem)
        tokens = TokenStore.for_memory(mem)
        alice = tokens.create(user_id="alice")[1]
        bob = tokens.create(user_id="bob")[1]
        app = TestClient(create_app(mem, tokens=tokens), base_url="http://127.0.0.1:8765")

        def post(token: str, path: str, body: dict):
            return app.post(path, json=body, headers={"Authorization": f"Bearer {token}"})

        denied = post(bob, "/v1/erase", {"user_id": "alice"})
        assert denied.status_code == 403 and denied.json()["error"]["code"] == "scope_denied"
        both = post(alice, "/v1/erase", {"user_id": "alice", "agent_id": "x"})
        assert both.status_code == 422
        dry = post(alice, "/v1/erase", {"user_id": "alice", "dry_run": True})
        assert dry.json() == {"erased": {"memories": 3, "history": 5, "history_actor": 6, "occurrences": 0, "messages": 0, "segments": 0, "files": 0, "startup": 1, "jobs": 0, "searches": 0}, "dry_run": True}
        done = post(alice, "/v1/erase", {"user_id": "alice"})
        assert done.status_code == 200 and done.json()["erased"]["memories"] == 3
        assert mem.count(include_deleted=True) == 2

        bulk = post(bob, "/v1/memories/delete-bulk", {"scope": ["user:bob"], "dry_run": True})
        assert bulk.json() == {"matched": 1, "deleted": 0, "dry_run": True}
        assert post(bob, "/v1/memories/delete-bulk", {"scope": "user:bob", "dry_run": True}).json()["matched"] == 1  # one scope
        assert post(bob, "/v1/memories/delete-bulk", {"scope": ["user:bob"]}).json()["deleted"] == 1
        unfiltered = post(bob, "/v1/memories/delete-bulk", {"dry_run": True})  # named as REST names them
        assert unfiltered.status_code == 422 and "needs a filter: scope, category, tags, session, since or until" in unfiltered.text
        tokens.close()


def test_rest_startup_entries(tmp_path):
    with Memory.open(tmp_path / "startup.db", check_embedding=False) as mem:
        tokens = TokenStore.for_memory(mem)
        auth = {"Authorization": f"Bearer {tokens.create(user_id='alice')[1]}"}
        app = TestClient(create_app(mem, tokens=tokens), base_url="http://127.0.0.1:8765")
        put = app.put("/v1/startup/name", json={"content": "The user is Alice", "priority": 0}, headers=auth)
        assert put.status_code == 200 and put.json()["scope"] == "user:alice"
        assert [e["key"] for e in app.get("/v1/startup", headers=auth).json()["entries"]] == ["name"]
        assert app.put("/v1/startup/x", json={"content": "y", "scope": "user:bob"}, headers=auth).status_code == 403
        assert app.delete("/v1/startup/name", headers=auth).status_code == 204
        assert app.delete("/v1/startup/name", headers=auth).status_code == 404
        assert mem.startup.list() == []
        tokens.close()


# -- CLI -----------------------------------------------------------------------------------------
def run(*args: str, code: int = 0, input: str | None = None):
    result = CliRunner().invoke(cli, list(args), input=input)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def test_cli_erase_shows_the_count_asks_and_erases(tmp_path):
    db = str(tmp_path / "cli.db")
    with Memory.open(db) as mem:
        seed(mem)
    dry = run("--db", db, "erase", "--user", "alice", "--dry-run")
    assert dry.stdout == ("Would erase user alice: 3 memories, 5 history entries, 6 changes signed by them, "
                          "0 fact occurrences, 0 messages, 0 segments, 0 files, 1 startup entry, 0 jobs, 0 logged searches. Nothing changed (dry run).\n")
    refused = run("erase", "--user", "alice", "--db", db, code=2)  # no terminal to confirm on
    assert "pass --yes" in refused.stderr
    done = json.loads(run("erase", "--user", "alice", "--yes", "--json", "--db", db).stdout)
    assert done == {"erased": {"memories": 3, "history": 5, "history_actor": 6, "occurrences": 0, "messages": 0, "segments": 0, "files": 0, "startup": 1, "jobs": 0, "searches": 0}, "dry_run": False,
                    "user_id": "alice",
                    "agent_id": None}
    assert run("erase", "--db", db, code=2).stderr.startswith("Error: name one person")
    assert run("erase", "--agent", "nobody", "--db", db).stdout == (
        "Erased agent nobody: 0 memories, 0 history entries, 0 changes signed by them, 0 fact occurrences, 0 messages, 0 segments, "
        "0 files, 0 startup entries, 0 jobs, 0 logged searches.\n")


def test_cli_delete_bulk_counts_unless_yes(tmp_path):
    db = str(tmp_path / "bulk.db")
    with Memory.open(db) as mem:
        mem.add_many([{"content": "Old", "created_at": utcnow() - timedelta(days=10)}, {"content": "New"}], dedup=False)
    assert run("delete-bulk", "--older-than", "7d", "--db", db).stdout == (
        "Would delete 1 memory. Run again with --yes to delete.\n")
    assert json.loads(run("delete-bulk", "--older-than", "7d", "--yes", "--json", "--db", db).stdout) == {
        "matched": 1, "deleted": 1, "dry_run": False}
    assert run("delete-bulk", "--newer-than", "yesterday", "--tag", "none", "--db", db).stdout == "No memories you may erase match.\n"
    assert "needs a filter: --scope, --category, --tag, --session, --older-than or --newer-than" in run(
        "delete-bulk", "--db", db, code=2).stderr
    with Memory.open(db) as mem:
        assert [r.content for r in mem.list()] == ["New"]


def test_cli_startup_set_list_delete(tmp_path):
    db = str(tmp_path / "startup.db")
    assert run("startup", "set", "name", "You are Claw", "--priority", "0", "--db", db).stdout == (
        "Set name in global (priority 0).\n")
    run("startup", "set", "tone", "Answer briefly", "--user", "alice", "--reinforce", "--db", db)
    listed = json.loads(run("startup", "list", "--user", "alice", "--json", "--db", db).stdout)
    assert [(e["key"], e["scope"], e["reinforce"]) for e in listed] == [("name", "global", False), ("tone", "user:alice", True)]
    assert [e["key"] for e in json.loads(run("startup", "list", "--user", "bob", "--json", "--db", db).stdout)] == ["name"]
    run("startup", "delete", "tone", "--user", "alice", "--db", db)
    assert "no startup entry 'tone'" in run("startup", "delete", "tone", "--user", "alice", "--db", db, code=1).stderr


def test_erasure_takes_the_persons_conversations_their_segments_and_jsonl_files(mem, tmp_path):
    from clawrecall.scopes import Caller

    mem.config.conversations.dir = str(tmp_path / "conversations")
    alice, bob = Caller("alice", "main", "s1"), Caller("bob", "main", "s2")
    said = [{"role": "user", "content": "My diagnosis qzxvwk is private"}, {"role": "assistant", "content": "Understood."}]
    mem.conversations.log(said, caller=alice)
    mem.conversations.log([{"role": "user", "content": "Bob's own words"}], caller=bob)
    closed = mem.conversations.end("s1", caller=alice)
    assert (tmp_path / "conversations" / closed.file).exists()
    notes = tmp_path / "notes.md"
    notes.write_text("# Health\n\nThe qzxvwk treatment starts in May.\n")
    mem.files.ingest(notes, caller=alice)
    dry = mem.erase(user_id="alice", dry_run=True).erased
    assert (dry["messages"], dry["segments"], dry["files"]) == (2, 1, 1) and (tmp_path / "conversations" / closed.file).exists()
    assert "2 messages, 1 segment, 1 file" in counts_text(dry)
    assert mem.erase(user_id="alice").erased == dry
    assert not (tmp_path / "conversations" / closed.file).exists()
    assert mem.conversations.sessions(caller=Caller()) == [
        s for s in mem.conversations.sessions(caller=Caller()) if s.user_id == "bob"
    ] and len(mem.conversations.sessions(caller=Caller())) == 1
    assert mem.search("qzxvwk diagnosis", sources=["message", "chunk"], mode="bm25") == []
    assert mem.files.list(caller=Caller()) == []
    assert [m.content for m in mem.conversations.show("s2", caller=bob)] == ["Bob's own words"]
