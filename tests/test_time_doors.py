"""Superseding and `as_of` at every door, on both backends: the CLI (`supersede`, `versions`, `--as-of`,
`--all-versions`), REST (`/supersede`, `/versions`, `as_of`) and the tools MCP serves (memory_recall's
`as_of`, memory_search's `asOf`)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from click.testing import CliRunner
from fastapi.testclient import TestClient

from clawrecall import Caller, Memory
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.server import create_app
from clawrecall.tools import find_tool

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
BETWEEN, AFTER = (T0 + timedelta(days=5)).isoformat(), (T0 + timedelta(days=15)).isoformat()


def _cli(db: str, *args: str) -> object:
    result = CliRunner().invoke(cli, ["--db", db, *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_cli_supersedes_by_hand_and_reads_as_of(db_target):
    old = _cli(db_target, "add", "Alice's cycling FTP is 250 W", "--user", "alice", "--created-at", T0.isoformat())["id"]
    new = _cli(db_target, "supersede", old[:8], "Alice's cycling FTP is 260 W", "--user", "alice",
               "--valid-from", (T0 + timedelta(days=10)).isoformat())
    assert new["supersedes"] == old and new["valid_from"].startswith("2026-03-11")

    now = [h["memory"]["id"] for h in _cli(db_target, "search", "cycling FTP", "--user", "alice")]
    then = [h["memory"]["id"] for h in _cli(db_target, "search", "cycling FTP", "--user", "alice", "--as-of", BETWEEN)]
    assert (now, then) == ([new["id"]], [old])
    assert [m["id"] for m in _cli(db_target, "list", "--user", "alice")] == [new["id"]]
    assert [m["id"] for m in _cli(db_target, "list", "--user", "alice", "--as-of", BETWEEN)] == [old]
    assert {m["id"] for m in _cli(db_target, "list", "--user", "alice", "--all-versions")} == {old, new["id"]}
    assert [m["id"] for m in _cli(db_target, "versions", new["id"][:8], "--user", "alice")] == [old, new["id"]]
    assert [h["action"] for h in _cli(db_target, "history", old, "--user", "alice")] == ["add", "supersede"]

    text = CliRunner().invoke(cli, ["--db", db_target, "history", new["id"], "--user", "alice"]).output
    assert f"(supersedes {old[:8]})" in text
    shown = CliRunner().invoke(cli, ["--db", db_target, "get", old, "--user", "alice"]).output
    assert "2026-03-11" in shown and new["id"] in shown  # valid until, superseded by

    again = CliRunner().invoke(cli, ["--db", db_target, "supersede", old, "Alice's FTP is 255 W", "--user", "alice"])
    assert again.exit_code != 0 and "already superseded" in again.output


def test_rest_supersedes_and_reads_as_of(db_target):
    with Memory.open(db_target) as mem:
        app = create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True)
        http = TestClient(app, base_url="http://127.0.0.1:8765", headers={"X-Clawrecall-User": "alice"})
        old = http.post("/v1/memories", json={"content": "Alice's cycling FTP is 250 W", "created_at": T0.isoformat()}).json()["id"]
        made = http.post(f"/v1/memories/{old}/supersede",
                         json={"content": "Alice's cycling FTP is 260 W", "valid_from": (T0 + timedelta(days=10)).isoformat()})
        assert made.status_code == 201, made.text
        new = made.json()["id"]
        assert made.json()["supersedes"] == old and http.get(f"/v1/memories/{old}").json()["superseded_by"] == new

        def found(**extra: str) -> list[str]:
            return [h["memory"]["id"] for h in http.post("/v1/search", json={"query": "cycling FTP", **extra}).json()["results"]]

        assert (found(), found(as_of=BETWEEN), found(as_of=AFTER)) == ([new], [old], [new])
        listed = http.get("/v1/memories", params={"as_of": BETWEEN}).json()["memories"]
        assert [m["id"] for m in listed] == [old]
        every = http.get("/v1/memories", params={"include_superseded": "true"}).json()["memories"]
        assert {m["id"] for m in every} == {old, new}
        assert [v["id"] for v in http.get(f"/v1/memories/{new}/versions").json()["versions"]] == [old, new]
        assert [h["action"] for h in http.get(f"/v1/memories/{old}/history").json()["history"]] == ["add", "supersede"]

        twice = http.post(f"/v1/memories/{old}/supersede", json={"content": "Alice's FTP is 255 W"})
        assert twice.status_code == 400 and "already superseded" in twice.text
        assert http.post("/v1/search", json={"query": "FTP", "as_of": "not a date"}).status_code == 422


def test_the_tools_mcp_serves_recall_and_search_as_of(mem):
    alice = Caller("alice", "main")
    old = mem.add("Alice's cycling FTP is 250 W", caller=alice, created_at=T0).id
    new = mem.supersede(old, "Alice's cycling FTP is 260 W", caller=alice, valid_from=T0 + timedelta(days=10)).id
    recall, search = find_tool(mem, "memory_recall"), find_tool(mem, "memory_search")
    for tool, args in ((recall, {"query": "cycling FTP"}), (search, {"query": "cycling FTP"})):
        details = tool.invoke(mem, alice, args).details
        assert [r["id"] for r in details.get("memories", details.get("results"))] == [new]
    then = recall.invoke(mem, alice, {"query": "cycling FTP", "as_of": BETWEEN})
    assert [m["id"] for m in then.details["memories"]] == [old] and "250 W" in then.text
    assert [r["id"] for r in search.invoke(mem, alice, {"query": "cycling FTP", "asOf": BETWEEN}).details["results"]] == [old]
    assert "as_of" in recall.input_schema(mem.config.categories)["properties"]
    assert "asOf" in search.input_schema(mem.config.categories)["properties"]
    bad = recall.run(mem, alice, {"query": "cycling FTP", "as_of": "last tuesday"})
    assert bad.is_error and "as_of" in bad.text
