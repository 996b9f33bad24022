"""The `clawrecall` command line, against real SQLite files (embedding with the `hash` provider; see conftest.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import clawrecall.embeddings
from clawrecall.cli import cli, output
from clawrecall.config import Config, load_config

RUNNER = CliRunner()

PREF = "Alice prefers dark mode in every code editor she uses"
DEPLOY = "The production API is deployed on a Kubernetes cluster in Frankfurt"
PYTHON = "Bob writes his scripts in Python 3.12 and lints them with ruff"


# -- fixtures and helpers ----------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory):
    """No test reads the developer's clawrecall settings or writes to their data directory."""
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("CLAWRECALL_") and name != "CLAWRECALL_CONFIG":  # conftest's choice of embedding
                mp.delenv(name)
        mp.setenv("CLAWRECALL_HOME", str(tmp_path_factory.mktemp("home")))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("COLUMNS", "100")
        yield


@pytest.fixture(scope="module", autouse=True)
def shared_embedder():
    """Each CLI call builds its embedder anew; in one test process, reuse the model loaded for a config.

    The model is still the real one; this only saves reloading it (~0.6 s) on every command.
    Subprocess tests load it the normal way.
    """
    real = clawrecall.embeddings.create_embedder
    cache: dict[str, object] = {}

    def cached(cfg):
        key = cfg.model_dump_json()
        if key not in cache:
            cache[key] = real(cfg)
        return cache[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(clawrecall.embeddings, "create_embedder", cached)
        yield


def run(db: Path | None, *args: str, input: str | None = None, code: int = 0) -> Result:
    prefix = ["--db", str(db)] if db is not None else []
    result = RUNNER.invoke(cli, [*prefix, *args], input=input)
    assert result.exit_code == code, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def run_json(db: Path | None, *args: str, input: str | None = None, code: int = 0):
    return json.loads(run(db, *args, "--json", input=input, code=code).stdout)


def fails(db: Path | None, *args: str, code: int = 1, input: str | None = None) -> str:
    """Run a command that must fail with exactly one `Error:` line on stderr; return that line."""
    result = run(db, *args, input=input, code=code)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def active(db: Path, *args: str) -> int:
    return run_json(db, "count", "--include-deleted", *args)["count"]


def add(db: Path, content: str, *args: str) -> str:
    result = run_json(db, "add", content, *args)
    assert result["action"] == "created", result
    return result["id"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store shared by the read-mostly tests; tests that change memories use their own scope."""
    db = tmp_path_factory.mktemp("store") / "memory.db"
    add(db, PREF, "--user", "alice", "--category", "preference", "--tag", "ui", "--importance", "0.9")
    add(db, DEPLOY, "--category", "fact", "--tag", "infra", "--metadata", '{"source": "runbook"}')
    add(db, PYTHON, "--user", "bob", "--category", "preference", "--title", "Bob's tooling")
    return db


@pytest.fixture(scope="module")
def ids(store: Path) -> dict[str, str]:
    return {r["content"]: r["id"] for r in run_json(store, "list", "--limit", "100")}


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    return tmp_path / "fresh.db"


# -- add and search ----------------------------------------------------------------------------
def test_add_then_search_round_trip(store: Path, ids: dict[str, str]) -> None:
    hits = run_json(store, "search", "which editor theme does alice like", "--user", "alice")
    assert hits[0]["memory"]["id"] == ids[PREF]
    assert hits[0]["memory"]["tags"] == ["ui"] and hits[0]["memory"]["scope"] == "user:alice"
    assert 0 < hits[0]["score"] <= 1 and hits[0]["age"] == "just now"
    assert all(h["memory"]["scope"] in ("global", "user:alice") for h in hits)  # bob's memory is not alice's


def test_search_human_table_fits_the_terminal(store: Path, ids: dict[str, str]) -> None:
    text = run(store, "search", "where is the API deployed", "--limit", "3").stdout
    lines = text.splitlines()
    assert lines[0].split() == ["SCORE", "AGE", "ID", "CATEGORY", "CONTENT"]
    assert ids[DEPLOY][:8] in lines[1] and lines[1].lstrip()[0].isdigit() and "%" in lines[1]
    assert "just now" in lines[1] and "fact" in lines[1]
    assert all(len(line) <= 100 for line in lines)


def test_search_filters_explain_and_empty_result(store: Path, ids: dict[str, str]) -> None:
    hits = run_json(store, "search", "Kubernetes", "--mode", "bm25", "--tag", "infra", "--explain")
    assert [h["memory"]["id"] for h in hits] == [ids[DEPLOY]]
    assert "final" in hits[0]["explain"] and "bm25" in hits[0]["explain"]["legs"]
    assert run_json(store, "search", "Kubernetes", "--until", "2000-01-01") == []
    assert run(store, "search", "Kubernetes", "--since", "2999-01-01").stdout.strip() == "No relevant memories."
    assert "relevance: cosine" in run(store, "search", "Kubernetes", "--explain").stdout


def test_search_says_nothing_is_relevant_unless_asked_for_everything(store: Path, ids: dict[str, str]) -> None:
    nonsense = "quantum chromodynamics lattice gauge"
    assert run(store, "search", nonsense).stdout.strip() == "No relevant memories."
    everything = run_json(store, "search", nonsense, "--min-score", "0")
    assert everything and all(h["score"] < 0.1 for h in everything)
    run(store, "search", "Kubernetes", "--min-score", "1.5", code=2)


def test_add_from_stdin_and_duplicates(fresh: Path) -> None:
    first = run_json(fresh, "add", "-", input="The team retro is every second Friday\n")
    assert first["memory"]["content"] == "The team retro is every second Friday"
    again = run_json(fresh, "add", "The team retro is every second Friday")
    assert again["action"] == "duplicate" and again["existing_id"] == first["id"]
    assert "Not added" in run(fresh, "add", "The team retro is every second Friday").stdout
    assert run_json(fresh, "add", "The team retro is every second Friday", "--no-dedup")["action"] == "created"
    assert active(fresh) == 2


# -- reads -------------------------------------------------------------------------------------
def test_get_by_prefix(store: Path, ids: dict[str, str]) -> None:
    record = run_json(store, "get", ids[DEPLOY][:8])
    assert record["id"] == ids[DEPLOY] and record["metadata"] == {"source": "runbook"}
    text = run(store, "get", ids[PYTHON][:8]).stdout
    assert f"id:         {ids[PYTHON]}" in text and "title:      Bob's tooling" in text


def test_ambiguous_prefix_is_a_clear_error(fresh: Path, tmp_path: Path) -> None:
    export = tmp_path / "twins.jsonl"
    twins = [{"id": f"abcdef12-0000-4000-8000-00000000000{n}", "content": f"twin memory number {n}"} for n in (1, 2)]
    export.write_text("".join(json.dumps(t) + "\n" for t in twins))
    run(fresh, "import", str(export))
    line = fails(fresh, "get", "abcdef12")
    assert "ambiguous" in line and "matches 2 memories" in line
    assert run_json(fresh, "get", "abcdef12-0000-4000-8000-000000000002")["content"] == "twin memory number 2"
    error = run_json(fresh, "get", "abcdef12", code=1)["error"]
    assert error["code"] == "ambiguous_id"


def test_list_count_stats_shapes(store: Path) -> None:
    add(store, "Shapes one: the staging database is Postgres 16", "--scope", "project:shapes")
    add(store, "Shapes two: the CI runs on GitHub Actions", "--scope", "project:shapes", "--category", "fact")
    records = run_json(store, "list", "--scope", "project:shapes")
    assert [r["content"][:10] for r in records] == ["Shapes two", "Shapes one"]
    assert {"id", "content", "category", "tags", "scope", "created_at", "deleted_at"} <= set(records[0])
    assert run_json(store, "list", "--scope", "project:shapes", "--order", "oldest", "--limit", "1")[0]["content"][:10] == "Shapes one"
    assert run_json(store, "count", "--scope", "project:shapes") == {"count": 2}
    assert run_json(store, "count", "--scope", "project:shapes", "--category", "fact") == {"count": 1}
    assert run(store, "count", "--scope", "project:shapes").stdout.strip() == "Total memories: 2"
    stats = run_json(store, "stats")
    assert stats["by_scope"]["project:shapes"] == 2 and stats["total"] >= 5
    assert stats["embedding"] == {"provider": "hash", "model": "hashed-word-trigrams", "dimensions": 384}
    assert stats["schema_version"] >= 1 and stats["backend"] == "sqlite"
    text = run(store, "stats").stdout
    assert text.startswith("Memories:") and "Embedding:  hash/hashed-word-trigrams (384 dims)" in text


def test_user_sees_only_own_scopes(store: Path, ids: dict[str, str]) -> None:
    seen = {r["id"] for r in run_json(store, "list", "--user", "bob", "--limit", "100")}
    assert ids[PYTHON] in seen and ids[DEPLOY] in seen and ids[PREF] not in seen
    line = fails(store, "list", "--user", "bob", "--scope", "user:alice")
    assert "not accessible" in line
    fails(store, "get", ids[PREF], "--user", "bob")


# -- changes -----------------------------------------------------------------------------------
def test_update_reembeds_and_keeps_history(store: Path) -> None:
    memory_id = add(store, "The office coffee machine is on the third floor", "--scope", "project:update")
    updated = run_json(store, "update", memory_id[:8], "--content", "Team standup happens every weekday at 9:30 in room Rhine",
                       "--tag", "meetings", "--importance", "0.4")
    assert updated["tags"] == ["meetings"] and updated["importance"] == 0.4
    hits = run_json(store, "search", "when is the daily standup meeting", "--scope", "project:update", "--mode", "vector")
    assert hits[0]["memory"]["id"] == memory_id and "standup" in hits[0]["memory"]["content"]
    assert run_json(store, "search", "coffee machine", "--scope", "project:update", "--mode", "bm25") == []
    entries = run_json(store, "history", memory_id)
    assert [e["action"] for e in entries] == ["add", "update"]
    assert entries[1]["before"]["content"].startswith("The office coffee") and entries[1]["after"]["tags"] == ["meetings"]
    assert "nothing to update" in fails(store, "update", memory_id, code=2)


def test_every_field_of_a_memory_can_be_set_and_expired_ones_listed(store: Path) -> None:
    memory_id = add(store, "The temporary door code is 4411", "--scope", "project:fields", "--created-at", "2026-01-02T03:04:05Z",
                    "--source-type", "chat", "--source-id", "msg-17", "--expires", "2026-02-01")
    record = run_json(store, "get", memory_id)
    assert (record["created_at"], record["source_type"], record["source_id"], record["expires_at"]) == (
        "2026-01-02T03:04:05Z", "chat", "msg-17", "2026-02-01T00:00:00Z"
    )
    assert run_json(store, "list", "--scope", "project:fields") == []
    assert [r["id"] for r in run_json(store, "list", "--scope", "project:fields", "--include-expired")] == [memory_id]
    assert run_json(store, "count", "--scope", "project:fields") == {"count": 0}
    assert run_json(store, "count", "--scope", "project:fields", "--include-expired") == {"count": 1}
    assert run_json(store, "update", memory_id, "--expires", "2999-01-01")["expires_at"] == "2999-01-01T00:00:00Z"
    assert run_json(store, "count", "--scope", "project:fields") == {"count": 1}
    assert "'someday'" in fails(store, "add", "x y z", "--expires", "someday", code=2)


def test_delete_and_undelete(store: Path) -> None:
    memory_id = add(store, "The legacy billing service was retired in March", "--scope", "project:delete")
    deleted = run_json(store, "delete", memory_id)
    assert deleted["deleted_at"] is not None
    assert run_json(store, "count", "--scope", "project:delete") == {"count": 0}
    assert run_json(store, "search", "billing service", "--scope", "project:delete") == []
    assert [r["id"] for r in run_json(store, "list", "--scope", "project:delete", "--deleted")] == [memory_id]
    assert "[deleted]" in run(store, "list", "--scope", "project:delete", "--include-deleted").stdout
    short = memory_id[:8]
    assert run(store, "delete", memory_id).stdout == f"{short} was already deleted. Restore it with: clawrecall undelete {short}\n"
    assert run_json(store, "undelete", memory_id[:8])["deleted_at"] is None
    assert run(store, "undelete", memory_id).stdout == f"{short} is not deleted: nothing to restore.\n"
    assert run_json(store, "search", "billing service", "--scope", "project:delete")[0]["memory"]["id"] == memory_id
    assert [e["action"] for e in run_json(store, "history", memory_id)] == ["add", "delete", "undelete"]


def test_forget_needs_confirmation_then_erases(store: Path) -> None:
    memory_id = add(store, "Carol's home address is 12 Elm Street", "--scope", "project:forget")
    line = fails(store, "forget", memory_id, code=2)  # no terminal to ask on: refuse, don't hang
    assert "--yes" in line
    assert run_json(store, "get", memory_id)["id"] == memory_id
    assert run_json(store, "forget", memory_id[:8], "--yes") == {"forgotten": memory_id}
    assert "no memory" in fails(store, "get", memory_id)
    entries = run_json(store, "history", memory_id)
    assert entries[-1]["action"] == "forget"
    assert "Elm Street" not in json.dumps(entries)
    assert "content erased" in run(store, "history", memory_id).stdout


def test_purge(fresh: Path) -> None:
    keep = add(fresh, "Dave likes green tea")
    gone = add(fresh, "The old VPN endpoint is vpn1.example.org")
    run(fresh, "delete", gone)
    assert "--yes" in fails(fresh, "purge", code=2)
    assert run_json(fresh, "purge", "--yes") == {"purged": 0, "older_than_days": 30.0}  # deleted just now
    assert run_json(fresh, "purge", "--older-than", "2w", "--yes")["older_than_days"] == pytest.approx(14.0)  # an age
    assert "neither a number of days nor an age" in fails(fresh, "purge", "--older-than", "soon", "--yes", code=2)
    assert run_json(fresh, "purge", "--older-than", "0", "--yes") == {"purged": 1, "older_than_days": 0.0}
    fails(fresh, "get", gone)
    assert run_json(fresh, "get", keep)["deleted_at"] is None
    assert "Purged 0 memories" in run(fresh, "purge", "--older-than", "0", "-y").stdout
    fails(fresh, "purge", "--older-than", "-1", "--yes", code=2)


def test_history_human(store: Path, ids: dict[str, str]) -> None:
    lines = run(store, "history", ids[DEPLOY][:8]).stdout.splitlines()
    assert lines[0].split() == ["AT", "ACTION", "ACTOR", "CHANGE"]
    assert " add " in lines[1] and "Kubernetes" in lines[1]


# -- export and import -------------------------------------------------------------------------
def test_export_import_round_trip(store: Path, tmp_path: Path, fresh: Path) -> None:
    export = tmp_path / "backup.jsonl"
    summary = run_json(store, "export", "--output", str(export))
    original = [json.loads(line) for line in export.read_text().splitlines()]
    assert summary == {"exported": len(original), "output": str(export)} and len(original) >= 3
    streamed = run(store, "export").stdout.splitlines()
    assert [json.loads(line) for line in streamed] == original

    result = run_json(fresh, "import", str(export))
    assert result == {"read": len(original), "created": len(original), "duplicates": 0, "skipped": 0, "dry_run": False,
                      "left_out": [], "source": str(export)}
    copy = [json.loads(line) for line in run(fresh, "export").stdout.splitlines()]
    assert sorted(copy, key=lambda r: r["id"]) == sorted(original, key=lambda r: r["id"])
    again = run_json(fresh, "import", "-", input=export.read_text())
    assert again["skipped"] == len(original) and again["created"] == 0 and again["source"] == "stdin"


def test_a_failed_export_leaves_an_existing_file_as_it_was(store: Path, tmp_path: Path) -> None:
    kept = tmp_path / "keep.jsonl"
    kept.write_text("precious\n")
    assert "not accessible" in fails(store, "export", "--user", "hal", "--scope", "user:ivy", "-o", str(kept))
    assert "no conversation" in fails(store, "conversations", "export", "nosuch", "--user", "carol", "-o", str(kept))
    assert kept.read_text() == "precious\n" and [p.name for p in tmp_path.iterdir()] == ["keep.jsonl"]  # no temporary left
    assert run_json(store, "export", "-o", str(kept))["exported"] >= 3
    assert kept.read_text() != "precious\n" and [p.name for p in tmp_path.iterdir()] == ["keep.jsonl"]


def test_export_import_round_trip_of_content_with_unicode_line_breaks(fresh: Path, tmp_path: Path) -> None:
    content = "First line\u2028second line\u2029next paragraph\x85after NEL\x1c\x1d\x1e\x0b\x0c end"
    memory_id = add(fresh, content, "--no-dedup")
    export = tmp_path / "breaks.jsonl"
    run(fresh, "export", "--output", str(export))
    assert export.read_text(encoding="utf-8").count("\n") == 1
    copy = tmp_path / "copy.db"
    assert run_json(copy, "import", str(export))["created"] == 1
    assert run_json(copy, "get", memory_id)["content"] == content
    assert run_json(tmp_path / "stdin.db", "import", "-", input=export.read_text(encoding="utf-8"))["created"] == 1


def test_export_of_one_scope(store: Path) -> None:
    lines = run(store, "export", "--user", "alice", "--scope", "user:alice").stdout.splitlines()
    assert [json.loads(line)["content"] for line in lines] == [PREF]


def test_import_with_one_bad_line_writes_nothing(fresh: Path, tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    good = json.dumps({"content": "The wiki lives at wiki.example.org"})
    source.write_text(good + "\n" + json.dumps({"content": "Too important", "importance": 7}) + "\n")
    line = fails(fresh, "import", str(source))
    assert "line 2" in line and "importance" in line
    source.write_text(good + "\n{not json\n")
    assert "line 2" in fails(fresh, "import", str(source))
    assert active(fresh) == 0
    assert "No such file or directory" in fails(fresh, "import", str(tmp_path / "missing.jsonl"), code=2)


def test_import_as_an_identified_caller_refuses_lines_of_another_owner(db_target: str, tmp_path: Path) -> None:
    """A line naming another user or agent would plant a memory in their scope: refused, nothing written.
    The administrator (no --user/--agent) restores any owner, as from a backup."""
    source = tmp_path / "planted.jsonl"
    source.write_text(json.dumps({"content": "Alice's door code is 4711", "user_id": "alice"}) + "\n")
    line = fails(db_target, "import", str(source), "--agent", "evil")
    assert "line 1" in line and "user_id 'alice'" in line
    source.write_text(json.dumps({"content": "Victim agent's rule", "agent_id": "victim"}) + "\n")
    assert "agent_id 'victim'" in fails(db_target, "import", str(source), "--user", "bob")
    assert active(db_target) == 0
    source.write_text(json.dumps({"content": "Alice's door code is 4711", "user_id": "alice"}) + "\n")
    assert run_json(db_target, "import", str(source))["created"] == 1
    [stored] = run_json(db_target, "list", "--user", "alice")
    assert stored["scope"] == "user:alice" and stored["user_id"] == "alice"


def test_progress_bars_go_to_stderr(fresh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "_stderr_is_tty", lambda: True)
    source = tmp_path / "one.jsonl"
    source.write_text(json.dumps({"content": "Erin's favourite language is OCaml"}) + "\n")
    result = run(fresh, "import", str(source), "--json")
    assert "Importing" in result.stderr and json.loads(result.stdout)["created"] == 1
    result = run(fresh, "reembed", "--json")
    assert "Re-embedding" in result.stderr and json.loads(result.stdout)["reembedded"] == 1


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "stdin", "code", "message"),
    [
        (["add", ""], None, 1, "content must not be empty"),
        (["add", "   "], None, 1, "content must not be empty"),
        (["add", "-"], "", 1, "content must not be empty"),
        (["add", "Importance out of range", "--importance", "7"], None, 1, "between 0 and 1"),
        (["add", "Unknown category", "--category", "nonsense"], None, 1, "unknown category 'nonsense'"),
        (["add", "Bad scope", "--scope", "team:x"], None, 1, "invalid scope"),
        (["add", "Bad metadata", "--metadata", "{oops"], None, 2, "not valid JSON"),
        (["add", "Metadata list", "--metadata", "[1, 2]"], None, 2, "must be a JSON object"),
        (["add", "Bad visibility", "--visibility", "public"], None, 2, "'public' is not one of"),
        (["search", "anything", "--since", "last tuesday"], None, 2, "not an ISO-8601 date"),
        (["search", "   "], None, 1, "query must not be empty"),
        (["list", "--until", "2024-13-45"], None, 2, "not an ISO-8601 date"),
        (["get", "xyz"], None, 1, "invalid memory id"),
        (["get", "0123456789"], None, 1, "no memory with id"),
        (["frobnicate"], None, 2, "No such command"),
        # bytes that are not UTF-8 reach Python as lone surrogates
        (["add", "caf\udce9 au lait"], None, 1, "content is not valid Unicode text"),
        (["add", "Tagged", "--tag", "\udcff"], None, 1, "a tag is not valid Unicode text"),
        (["add", "Titled", "--title", "\udcff"], None, 1, "title is not valid Unicode text"),
        (["search", "caf\udce9"], None, 1, "query is not valid Unicode text"),
        (["list", "--since", "9999-12-31T23:59:59-12:00"], None, 2, "9999-12-31T23:59:59-12:00 is out of range in UTC"),
        (["search", "x", "--until", "0001-01-01T00:00:00+05:00"], None, 2, "is out of range in UTC"),
        (["list", "--user", ""], None, 1, "invalid user_id '': ids are strings of 1–200 characters"),
        (["count", "--user", ""], None, 1, "invalid user_id ''"),
        (["add", "Empty category", "--category", ""], None, 1, "unknown category ''"),
        (["add", "NaN metadata", "--metadata", '{"a": NaN}'], None, 1, "Out of range float values are not JSON compliant"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(store: Path, args, stdin, code, message) -> None:
    before = active(store)
    assert message in fails(store, *args, code=code, input=stdin)
    assert active(store) == before


@pytest.mark.parametrize("command", [
    ["count"], ["stats"], ["list"], ["search", "tea"], ["export"], ["get", "0123abcd"], ["history", "0123abcd"],
    ["update", "0123abcd", "--title", "t"], ["delete", "0123abcd"], ["undelete", "0123abcd"],
    ["forget", "0123abcd", "--yes"], ["purge", "--yes"], ["reembed"], ["index", "build"],
    ["migrate", "status"], ["migrate", "apply"], ["token", "list"], ["token", "revoke", "0123abcd"],
])
def test_a_command_that_puts_no_data_in_refuses_a_missing_store_and_creates_nothing(tmp_path: Path, command) -> None:
    typo = tmp_path / "missing" / "memroy.db"
    assert fails(typo, *command) == (
        f"Error: no clawrecall store at {typo}: `clawrecall init` or a first `add` creates one")
    assert not typo.parent.exists()


def test_doctor_fails_on_a_missing_store_and_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "missing" / "memroy.db"
    report = run_json(typo, "doctor", code=1)
    database = next(c for c in report["checks"] if c["name"] == "database")
    assert report["ok"] is False and database["status"] == "fail"
    assert database["detail"] == f"no clawrecall store at {typo}: `clawrecall init` or a first `add` creates one"
    assert not typo.parent.exists()


def test_token_create_creates_a_missing_store(tmp_path: Path) -> None:
    db = tmp_path / "new" / "memory.db"
    token = run_json(db, "token", "create", "--user", "alice")
    assert [t["id"] for t in run_json(db, "token", "list")] == [token["id"]]


def test_an_empty_db_option_is_an_error_not_the_default_store() -> None:
    assert fails(None, "--db", " ", "count") == (
        "Error: the database path is empty: give a SQLite file, sqlite:///path or postgresql://…")


def test_errors_as_json(store: Path) -> None:
    result = run(store, "get", "0123456789", "--json", code=1)
    assert json.loads(result.stdout) == {"error": {"code": "not_found", "message": "no memory with id '0123456789'"}}
    result = run(store, "--json", "add", "x", "--importance", "nope", code=2)
    assert json.loads(result.stdout)["error"]["code"] == "usage_error"
    assert result.stderr.startswith("Error: ")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("[embedding]\nprovider = \"local\"\nbogus_key = 1\n", "unknown keys: embedding.bogus_key"),
        ("[embedding]\napi_key = \"${CLAWRECALL_TEST_UNSET_VAR}\"\n", "CLAWRECALL_TEST_UNSET_VAR is not set"),
        ("[writes\n", "is not valid TOML"),
    ],
)
def test_bad_config_file(tmp_path: Path, config: str, message: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(config)
    db = tmp_path / "never.db"
    line = fails(db, "--config", str(path), "add", "A memory that must not be stored")
    assert message in line
    assert not db.exists()
    fails(db, "--config", str(tmp_path / "missing.toml"), "stats")


def test_config_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ro.toml"
    path.write_text("[writes]\nenabled = false\n")
    db = tmp_path / "env.db"
    monkeypatch.setenv("CLAWRECALL_CONFIG", str(path))
    monkeypatch.setenv("CLAWRECALL_DB", str(db))
    assert "writes are disabled" in fails(None, "add", "Read-only stores refuse writes")
    assert run_json(None, "stats")["location"] == str(db)


def test_a_relative_db_in_a_config_file_is_next_to_it_from_any_directory(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    config = folder / "config.toml"
    config.write_text('db = "team.db"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    run(None, "--config", str(config), "add", "Judy keeps the team store next to its config")
    assert not (elsewhere / "team.db").exists()
    monkeypatch.chdir(folder)
    stats = run_json(None, "--config", "config.toml", "stats")
    assert stats["location"] == str(folder / "team.db") and stats["total"] == 1
    monkeypatch.chdir(elsewhere)  # --db, like CLAWRECALL_DB, is the working directory's
    run(None, "--config", str(config), "--db", "own.db", "add", "Judy's own store is where she runs the command")
    assert (elsewhere / "own.db").exists() and not (folder / "own.db").exists()


# -- init and doctor ---------------------------------------------------------------------------
def test_init_creates_config_and_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "crhome"
    monkeypatch.setenv("CLAWRECALL_HOME", str(home))
    monkeypatch.delenv("CLAWRECALL_CONFIG")  # the config file's place in the data directory is the subject
    result = run_json(None, "init")
    assert result["config_created"] is True and result["schema_version"] >= 1 and result["memories"] == 0
    assert result["config"] == str(home / "config.toml") and result["db"] == str(home / "memory.db")
    assert (home / "memory.db").exists()
    text = (home / "config.toml").read_text()
    assert load_config(home / "config.toml", env={}) == Config()
    # Uncommented, every setting line is valid TOML and the whole a config equal to the defaults;
    # keys with no default are named without an assignment.
    settings = [line[2:] for line in text.splitlines() if re.match(r"^# (\[[\w.]+\]$|\w+ = )", line)]
    assert "# api_key: not set by default" in text.splitlines()
    live = tmp_path / "live.toml"
    live.write_text("\n".join(settings))
    assert load_config(live, env={}).model_dump(exclude={"db"}) == Config().model_dump(exclude={"db"})
    again = run(None, "init").stdout
    assert "already there" in again and (home / "config.toml").read_text() == text


def test_doctor_and_model_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "doctor.db"
    memory_id = add(db, "Frank deploys on Tuesdays")
    report = run_json(db, "doctor")
    assert report["ok"] is True and [c["status"] for c in report["checks"]] == ["ok"] * 9

    script = tmp_path / "embed.py"
    script.write_text(textwrap.dedent("""
        import hashlib, json, sys
        request = json.load(sys.stdin)
        def vec(text):
            v = [0.25] + [0.0] * 7
            for word in text.lower().split():
                h = int(hashlib.sha1(word.encode()).hexdigest(), 16)
                v[h % 8] += 1.0
            return v
        json.dump([vec(t) for t in request["texts"]], sys.stdout)
    """))
    config = tmp_path / "other-model.toml"
    config.write_text(f"[embedding]\nprovider = \"command\"\ncommand = {json.dumps([sys.executable, str(script)])}\n")
    report = run_json(db, "--config", str(config), "doctor", code=1)
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert report["ok"] is False and statuses == {
        "config": "ok", "database": "ok", "integrity": "ok", "embedding": "ok", "fingerprint": "fail", "vectors": "ok",
        "llm": "ok",
        "jobs": "ok", "upkeep": "ok"}
    assert "reembed" in next(c["detail"] for c in report["checks"] if c["name"] == "fingerprint")
    assert "[fail]" in run(db, "--config", str(config), "doctor", code=1).stdout

    # Reads that never embed still work; searching refuses to mix models until `reembed`.
    assert run_json(db, "--config", str(config), "stats")["embedding"]["provider"] == "hash"
    assert "reembed" in fails(db, "--config", str(config), "search", "deploys")
    assert run_json(db, "--config", str(config), "reembed")["reembedded"] == 1
    assert run_json(db, "--config", str(config), "doctor")["ok"] is True
    assert run_json(db, "--config", str(config), "search", "Frank deploys")[0]["memory"]["id"] == memory_id


def test_doctor_compares_the_configured_model_when_the_provider_is_down(tmp_path: Path) -> None:
    from clawrecall import Memory
    from clawrecall.models import EmbeddingFingerprint

    down = tmp_path / "down.toml"
    down.write_text('[embedding]\nprovider = "openai-compatible"\nmodel = "remote-model"\n'
                    'base_url = "http://127.0.0.1:9/v1"\ntimeout_s = 2\n')
    db = tmp_path / "local.db"
    add(db, "Ivan's vectors come from the local model")
    report = run_json(db, "--config", str(down), "doctor", code=1)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["embedding"]["status"] == "fail" and checks["fingerprint"]["status"] == "fail"
    assert f"Error: {checks['fingerprint']['detail']}" == fails(db, "--config", str(down), "search", "vectors")

    remote = tmp_path / "remote.db"
    with Memory.open(remote) as mem:
        mem._store.set_meta("embedding_fingerprint", EmbeddingFingerprint(
            provider="openai-compatible", model="remote-model", dimensions=8).model_dump_json())
    checks = {c["name"]: c for c in run_json(remote, "--config", str(down), "doctor", code=1)["checks"]}
    assert checks["embedding"]["status"] == "fail" and checks["fingerprint"] == {
        "name": "fingerprint", "status": "ok",
        "detail": "stored vectors match openai-compatible/remote-model (8 dims) as configured "
                  "(the model did not load to confirm it)"}


def test_doctor_reports_a_broken_config(tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text("nonsense = 1\n")
    report = run_json(tmp_path / "x.db", "--config", str(config), "doctor", code=1)
    assert [c["status"] for c in report["checks"]] == ["fail"] + ["skip"] * 8


def test_doctor_fails_on_a_damaged_store(damaged_db: Path) -> None:
    report = run_json(damaged_db, "doctor", code=1)
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert report["ok"] is False and statuses["database"] == "ok" and statuses["integrity"] == "fail"
    detail = next(c["detail"] for c in report["checks"] if c["name"] == "integrity")
    assert detail.startswith(f"{damaged_db}: quick_check: ") and "malformed" in detail
    assert re.search(r"^\[fail\]  integrity    ", run(damaged_db, "doctor", code=1).stdout, re.M)


# -- every command speaks JSON -----------------------------------------------------------------
def test_every_command_has_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWRECALL_HOME", str(tmp_path / "home"))
    db = tmp_path / "all.db"
    export = tmp_path / "all.jsonl"
    memory_id = add(db, "Grace reviews every pull request before lunch")
    said = tmp_path / "said.json"
    said.write_text(json.dumps([{"role": "user", "content": "Grace moved the review to the afternoon"}]))
    shadowdb = tmp_path / "shadowdb.json"
    shadowdb.write_text(json.dumps({"writes": {"retention": {"purgeAfterDays": 14}}}))
    steps = [
        ["init"], ["search", "pull request reviews"], ["get", memory_id[:8]], ["list"], ["update", memory_id, "--title", "reviews"],
        ["supersede", memory_id, "Grace reviews every pull request after lunch"], ["versions", memory_id],
        ["delete", memory_id], ["undelete", memory_id], ["history", memory_id], ["count"], ["stats"],
        ["export", "--output", str(export)], ["import", str(export)], ["reembed"], ["doctor"], ["purge", "--yes"],
        ["forget", memory_id, "--yes"], ["add", "Heidi's team owns the search service"], ["token", "list"],
        ["migrate", "status"], ["index", "build"], ["import", str(export), "--defer-index"],
        ["delete-bulk", "--tag", "none"], ["erase", "--user", "nobody", "--dry-run"], ["startup", "list"],
        ["openclaw", "install", "--config", str(tmp_path / "openclaw.json"), "--dry-run"],
        ["conversations", "log", str(said), "--session", "s1", "--user", "grace"], ["conversations", "list"],
        ["conversations", "show", "s1"], ["conversations", "segments"], ["conversations", "stats"],
        ["conversations", "export", "s1", "--output", str(tmp_path / "s1.jsonl")], ["conversations", "end", "s1", "--user", "grace"],
        ["conversations", "sweep"], ["files", "list"], ["jobs", "list"],
        ["config", "import", str(shadowdb), "--from", "shadowdb", "--write", str(tmp_path / "translated.toml")],
        ["insight", "searches"], ["insight", "popular"], ["insight", "unanswered"], ["insight", "recalled"],
        ["insight", "never-recalled"], ["insight", "recalls", memory_id[:8]], ["insight", "why", memory_id[:8]],
        ["insight", "coverage"], ["backup", str(tmp_path / "all.tar")],
        ["add", "Heidi's locker code is 4711", "--visibility", "secret"], ["secrets", "status"], ["secrets", "rotate"],
        ["secrets", "new-key"],
    ]
    seen = set()
    for step in steps:
        result = run(db, *step, "--json")
        json.loads(result.stdout)
        seen.add(step[0])
    for line in run(db, "export", "--json").stdout.splitlines():
        json.loads(line)
    json.loads(run(tmp_path / "restored.db", "restore", str(tmp_path / "all.tar"), "--json").stdout)
    seen.add("restore")
    assert [json.loads(line)["content"] for line in run(db, "conversations", "export").stdout.splitlines()] == [
        "Grace moved the review to the afternoon"
    ]
    # serve and mcp run until stopped: their JSON (health, tools) is tested in test_rest/test_mcp; worker runs the
    # handlers something registered: its JSON lines are tested in test_jobs
    assert seen | {"export", "serve", "mcp", "worker"} == set(cli.commands)


def test_a_conversation_needs_an_owner_and_an_unknown_session_is_not_found(tmp_path: Path) -> None:
    db = tmp_path / "said.db"
    said = '{"role": "user", "content": "My salary is 91000 euros"}'
    assert "a conversation is a user's or an agent's" in fails(db, "conversations", "log", "-", "--session", "s1", input=said)
    run(db, "conversations", "log", "-", "--session", "s1", "--user", "ann", input=said)
    for args in (["segments", "nope"], ["export", "nope"], ["end", "nope", "--user", "ann"], ["segments", "s1", "--user", "bob"]):
        assert "no conversation with session id" in fails(db, "conversations", *args)
    assert "[SESSION]" in run(db, "conversations", "segments", "--help").stdout
    assert "no messages given" in fails(db, "conversations", "log", "-", "--session", "s1", "--user", "ann", input="\n", code=2)
    pretty = json.dumps({"role": "assistant", "content": "Noted."}, indent=2)  # one object over several lines
    assert run_json(db, "conversations", "log", "-", "--session", "s1", "--user", "ann", input=pretty)["stored"] == 1
    assert "Records:   message 2\n" in run(db, "stats").stdout  # the user counted beside no memory is a message's


def test_command_groups_take_json_for_their_subcommands(tmp_path: Path) -> None:
    db = tmp_path / "groups.db"
    made = run_json(db, "token", "create", "--user", "ci")
    assert [t["id"] for t in json.loads(run(db, "token", "--json", "list").stdout)] == [made["id"]]
    assert json.loads(run(db, "index", "--json", "build").stdout) == {"built": True, "db": str(db)}
    error = json.loads(run(db, "token", "--json", "revoke", "0123abcd", code=1).stdout)["error"]
    assert error["code"] == "not_found"
    assert json.loads(run(db, "conversations", "--json", "list").stdout) == []


# -- speed: commands that do not embed stay light -----------------------------------------------
def cli_subprocess(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWRECALL_")}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("command", [["stats"], ["count"], ["list"], ["export"], ["get", "PREFIX"], ["history", "PREFIX"]])
def test_reads_do_not_import_the_ml_stack(store: Path, ids: dict[str, str], command: list[str]) -> None:
    args = [ids[DEPLOY][:8] if a == "PREFIX" else a for a in command]
    proc = cli_subprocess("-X", "importtime", "-m", "clawrecall.cli", "--db", str(store), *args, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "clawrecall.engine" in imported
    assert not {m for m in imported if m.split(".")[0] in ("torch", "sentence_transformers", "transformers", "openai", "anthropic")}
    if command[0] != "export":  # the only one of these that reads vectors
        assert "numpy" not in imported  # most of what is left of a read command's start-up


def test_explain_says_how_each_absolute_score_was_made(store: Path) -> None:
    hybrid = run(store, "search", "Kubernetes", "--explain").stdout
    assert "→ relevance: cosine " in hybrid and ", coverage " in hybrid
    keywords = run(store, "search", "Kubernetes", "--mode", "bm25", "--explain").stdout
    assert "relevance: the ranking score (a keyword-only search has no query vector)" in keywords


def test_forget_names_a_recorded_message_for_what_it_is(tmp_path):
    """`forget` takes a memory's id; a recorded message's id is refused before any confirmation, saying how
    it is erased."""
    from clawrecall import Caller, Memory

    db = tmp_path / "m.db"
    with Memory.open(db) as mem:
        mem.conversations.log([{"role": "user", "content": "My locker code is 4417."}], caller=Caller("alice", "main", "s0"))
        [said] = mem.conversations.show("s0", caller=Caller("alice", "main", "s0"))
    result = RUNNER.invoke(cli, ["--db", str(db), "forget", said.id, "--user", "alice"], input="y\n")
    assert result.exit_code != 0 and "recorded message" in result.output and "Erase" not in result.output
