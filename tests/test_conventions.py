"""Conventions users bring from other tools: mem0's Python API, sqlite-utils' output formats, relative
times, `--db` anywhere, imports that can run twice, and tables that stay aligned in any script."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawrecall import Memory, ValidationError
from clawrecall._time import parse_when_or_ago, utcnow
from clawrecall.cli import cli, output
from clawrecall.config import default_db_path


def run(*args: str, code: int = 0, input: str | None = None) -> str:
    result = CliRunner().invoke(cli, list(args), input=input)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result.stdout if code == 0 else result.stderr


# -- Python API as mem0 users write it ----------------------------------------------------------
def test_memory_with_no_arguments_opens_the_default_store():
    with Memory() as mem:
        assert mem._store.location == str(default_db_path())
        mem.add("Frank drinks his coffee black", user_id="frank")
    with Memory.open() as again:
        assert [r.content for r in again.list(user_id="frank")] == ["Frank drinks his coffee black"]
    with Memory.open() as opened, pytest.raises(ValidationError, match="needs its config"):
        Memory(opened._store)


def test_add_takes_a_chat_and_stores_each_user_and_assistant_turn(db_target):
    chat = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "I'm vegetarian and allergic to peanuts"},
        {"role": "assistant", "content": "Noted: vegetarian dishes without peanuts"},
    ]
    with Memory.open(db_target) as mem:
        results = mem.add(chat, user_id="gina", session_id="s1", tags=["diet"])
        assert [r.action for r in results] == ["created", "created"]
        stored = mem.list(user_id="gina", order="oldest")
        assert [(r.content, r.metadata, r.session_id, r.tags) for r in stored] == [
            (chat[1]["content"], {"role": "user"}, "s1", ["diet"]),
            (chat[2]["content"], {"role": "assistant"}, "s1", ["diet"]),
        ]
        assert [r.action for r in mem.add(chat[1:2], user_id="gina")] == ["duplicate"]
        assert mem.add([], user_id="gina") == []
        for bad, message in [
            ([{"role": "robot", "content": "beep"}], "message 1: role must be one of user, assistant, system"),
            ([{"role": "user", "content": "ok"}, {"role": "user"}], "message 2: content must be text"),
            ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "content must be text, got list"),
            ([{"role": "user", "content": "hi", "promt": "x"}], "unknown field"),
            (["just a string"], "message 1: expected an object"),
            ({"role": "user", "content": "hi"}, "content: Input should be a valid string"),
        ]:
            with pytest.raises(ValidationError, match=message):
                mem.add(bad, user_id="gina")
        assert mem.count(user_id="gina") == 2


def test_search_threshold_is_min_score_under_mem0s_name(db_target):
    with Memory.open(db_target) as mem:
        mem.add("Hana's cat is called Miso")
        everything = mem.search("Hana's cat Miso", threshold=0)
        assert everything and everything == mem.search("Hana's cat Miso", min_score=0)
        assert mem.search("Hana's cat Miso", threshold=1) == mem.search("Hana's cat Miso", min_score=1) == []
        assert mem.search("cat", threshold=0.3, min_score=0.3) == mem.search("cat", min_score=0.3)
        with pytest.raises(ValidationError, match="not both"):
            mem.search("cat", threshold=0.2, min_score=0.5)
        with pytest.raises(ValidationError, match="min_score"):
            mem.search("cat", threshold=1.5)


# -- import: twice is once ----------------------------------------------------------------------
LINES = [
    json.dumps({"content": "Ivan takes the 8:15 train to work"}),
    json.dumps({"content": "Ivan's sister lives in Porto"}),
    json.dumps({"content": "Ivan takes the 8:15 train to work"}),  # the same again, without an id
]


def test_an_import_without_ids_run_twice_adds_nothing_the_second_time(db_target):
    with Memory.open(db_target) as mem:
        dry = mem.import_jsonl(LINES, dry_run=True)
        assert mem.count() == 0
        first = mem.import_jsonl(LINES)
        for result in (dry, first):
            assert (result.read, result.created, result.duplicates, result.skipped) == (3, 2, 1, 0)
            assert [(d["line"], d["reason"], d["existing_line"], d["similarity"]) for d in result.left_out] == [
                (3, "duplicate", 1, 1.0)]
        assert dry.dry_run and not first.dry_run
        again = mem.import_jsonl(LINES)
        assert (again.created, again.duplicates) == (0, 3)
        assert {d["existing_id"] for d in again.left_out} == {r.id for r in mem.list()}
        assert {d["existing_line"] for d in again.left_out} == {None}  # stored before: named by id
        kept = mem.import_jsonl(LINES, on_duplicate="keep")
        assert kept.created == 3 and mem.count() == 5
        with pytest.raises(ValidationError, match="on_duplicate must be skip or keep"):
            mem.import_jsonl(LINES, on_duplicate="merge")


def test_cli_import_dry_run_and_summary_say_what_was_left_out_and_why(tmp_path):
    db, source = str(tmp_path / "m.db"), tmp_path / "notes.jsonl"
    source.write_text("\n".join(LINES) + "\n")
    Memory.open(db).close()
    dry = run("import", str(source), "--dry-run", "--db", db)
    assert dry == (f"Would import 2 of 3 memories from {source}; left out: 1 near-duplicate.\n"
                   "  line 3: nearly identical to line 1 (similarity 100%)\n"
                   "Near-duplicates are stored with --on-duplicate keep.\nNothing was written (dry run).\n")
    with Memory.open(db) as mem:
        assert mem.count() == 0
    assert run("import", str(source), "--db", db).startswith(f"Imported 2 of 3 memories from {source}; left out: 1 near-duplicate.")
    assert run("import", str(source), "--db", db).startswith(f"Imported 0 of 3 memories from {source}; left out: 3 near-duplicates.")
    export = tmp_path / "export.jsonl"
    run("export", "-o", str(export), "--db", db)
    summary = json.loads(run("import", str(export), "--json", "--db", db))
    assert (summary["created"], summary["skipped"]) == (0, 2)
    assert [d["reason"] for d in summary["left_out"]] == ["id_exists", "id_exists"]
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"content": "Ivan keeps bees"}) + "\n")
    assert run("import", str(one), "--on-duplicate", "keep", "--db", db) == f"Imported 1 of 1 memory from {one}.\n"


# -- the command line --------------------------------------------------------------------------
@pytest.fixture
def store(tmp_path: Path) -> str:
    db = str(tmp_path / "cli.db")
    with Memory.open(db) as mem:
        mem.add("Yamada-san drinks green tea every morning", user_id="山田", tags=["drinks", "morning"],
                created_at=utcnow() - timedelta(hours=3))
        mem.add("山田さんは毎朝コーヒーを飲みます", user_id="山田", metadata={"lang": "ja"})
        mem.add("Deploys happen on Tuesdays", created_at=utcnow() - timedelta(days=2))
    return db


def test_db_and_config_work_after_the_command_too(store: str, tmp_path: Path):
    assert run("count", "--db", store) == run("--db", store, "count") == "Total memories: 3\n"
    assert json.loads(run("count", "--user", "山田", "--db", store, "--json")) == {"count": 3}
    assert json.loads(run("token", "list", "--db", store, "--json")) == []
    config = tmp_path / "bad.toml"
    config.write_text("[embedding]\nprovider = 'nope'\n")
    assert "nope" in run("count", "--db", store, "--config", str(config), code=1)


def test_list_like_commands_print_nl_and_csv(store: str):
    records = json.loads(run("list", "--user", "山田", "--json", "--db", store))
    lines = run("list", "--user", "山田", "--nl", "--db", store).splitlines()
    assert [json.loads(line) for line in lines] == records
    rows = list(csv.DictReader(io.StringIO(run("list", "--user", "山田", "--csv", "--db", store))))
    assert [r["id"] for r in rows] == [r["id"] for r in records]
    assert rows[1]["content"] == "Yamada-san drinks green tea every morning"
    assert json.loads(rows[1]["tags"]) == ["drinks", "morning"] and json.loads(rows[0]["metadata"]) == {"lang": "ja"}
    assert rows[0]["deleted_at"] == "" and rows[0]["created_at"] == records[0]["created_at"]
    hits = list(csv.DictReader(io.StringIO(run("search", "green tea", "--user", "山田", "--csv", "--db", store))))
    assert hits[0]["memory.content"].startswith("Yamada-san") and float(hits[0]["score"]) > 0
    assert list(hits[0])[:3] == ["memory.id", "memory.content", "memory.title"]
    history = run("history", records[0]["id"], "--user", "山田", "--nl", "--db", store).splitlines()
    assert [json.loads(line)["action"] for line in history] == ["add"]
    assert "give one output format" in run("list", "--nl", "--csv", "--db", store, code=2)


def test_times_may_be_relative(store: str):
    def contents(*args: str) -> list[str]:
        return [r["content"] for r in json.loads(run("list", "--user", "山田", "--json", "--db", store, *args))]

    assert contents("--since", "2h") == ["山田さんは毎朝コーヒーを飲みます"]
    assert contents("--since", "1d", "--until", "1h") == ["Yamada-san drinks green tea every morning"]
    assert contents("--since", "yesterday") == contents("--since", "30h ago")[:2]
    assert contents("--until", "1d") == ["Deploys happen on Tuesdays"]
    assert "nor an age like 7d" in run("list", "--since", "last week", "--db", store, code=2)
    now = datetime(2026, 3, 10, 15, 30, tzinfo=timezone.utc)
    assert parse_when_or_ago("yesterday", now) == datetime(2026, 3, 9, tzinfo=timezone.utc)
    assert parse_when_or_ago("today", now) == datetime(2026, 3, 10, tzinfo=timezone.utc)
    assert parse_when_or_ago("90m", now) == datetime(2026, 3, 10, 14, tzinfo=timezone.utc)
    assert parse_when_or_ago("2w ago", now) == now - timedelta(weeks=2)
    assert parse_when_or_ago("2026-03-01", now) == datetime(2026, 3, 1, tzinfo=timezone.utc)


def test_tables_are_aligned_in_display_columns(store: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "60")
    lines = run("list", "--user", "山田", "--db", store).splitlines()
    content_at = {output.display_width(line[: line.index(c)]) for line, c in zip(lines, ["CONTENT", "山田さん", "Yamada", "Deploys"])}
    assert len(content_at) == 1, lines  # every row's content starts in the same terminal column
    scope_at = {output.display_width(line[: line.index(word)]) for line, word in zip(lines, ["CATEGORY", "other", "other", "other"])}
    assert len(scope_at) == 1, lines
    assert all(output.display_width(line) <= 60 for line in lines), lines
    assert output.display_width("user:山田") == 9 and output.display_width("é") == 1
    assert output.truncate("山田さんは毎朝", 6) == "山田…" and output.display_width(output.truncate("山田さんは毎朝", 7)) <= 7


def test_counts_take_the_right_noun(tmp_path: Path):
    db = str(tmp_path / "one.db")
    run("add", "Just one memory here", "--db", db)
    assert run("export", "-o", str(tmp_path / "x.jsonl"), "--db", db) == f"Exported 1 memory to {tmp_path / 'x.jsonl'}.\n"
    assert output.plural(1, "memory", "memories") == "1 memory" and output.plural(0, "memory", "memories") == "0 memories"
    assert output.plural(2, "near-duplicate") == "2 near-duplicates"
