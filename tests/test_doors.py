"""One memory, every door: the same question asked through the Python API, the CLI, REST, MCP, the tool
functions and the OpenClaw plugin's tools (its own names and core's `memory_search`, as slot mode
serves it) finds what the recall block shows: a fact said in passing in an earlier session, a stored
memory and a file's chunk, each labelled by its source as recall labels it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from live_server import db, home, server  # noqa: F401  (fixtures)

from clawrecall import Caller, Memory
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.hooks import before_prompt_build
from clawrecall.tools import run_tool

PLUGIN = Path(__file__).resolve().parent.parent / "integrations" / "openclaw"
SAID = "Just so you know, my favourite tea is oolong."  # in passing: no capture rule keeps it as a memory
QUESTION = "which tea do I like, oolong?"
ALICE = Caller("alice", "main", "s2")  # a later session than the one it was said in
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}

# The plugin's real tools over the real server: its own names, and core's memory_search as slot mode serves it.
PLUGIN_SCRIPT = """
import { ClawrecallClient } from "./lib/client.js";
import { buildTools } from "./lib/tools.js";
import { resolveConfig } from "./index.js";

const [serverUrl, token, query] = process.argv.slice(1);
const config = resolveConfig({ serverUrl, token, mode: "slot" });
const client = new ClawrecallClient(config, { warn() {}, info() {}, debug() {} });
const ctx = { agentId: "main", sessionKey: "s2", requesterSenderId: "alice" };
const names = ["clawrecall_search", "clawrecall_recall", "memory_search"];
const out = {};
for (const tool of buildTools({ client, config, ctx, names })) {
  const result = await tool.execute("call-1", { query });
  out[tool.name] = { text: result.content[0].text, details: result.details };
}
process.stdout.write(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def tokens(db, tmp_path_factory):  # noqa: F811
    """Alice's token, and what she has: a message said in an earlier session (through the capture hook, which
    records it and keeps no memory of it), a memory and an ingested file."""
    notes = tmp_path_factory.mktemp("notes") / "tea.md"
    notes.write_text("# Tea\n\nThe oolong tin stays in the left kitchen cupboard.\n")
    from clawrecall.hooks import agent_end

    with Memory.open(db) as mem:
        answer = agent_end(mem, {"messages": [{"role": "user", "content": SAID},
                                              {"role": "assistant", "content": "Noted."}]}, Caller("alice", "main", "s1"))
        assert (answer["recorded"], answer["queued"]) == (2, 0)
        mem.add("Alice brews her oolong tea at 85 degrees", caller=Caller("alice", "main"), category="preference")
        mem.files.ingest(notes, caller=Caller("alice", "main"))
        mem.upkeep.backfill()
    store = TokenStore(db)
    token = store.create(user_id="alice", agent_id="main")[1]
    store.close()
    return {"alice": token}


def _ids(text: str) -> set[str]:
    """The short ids a tool's text names (`id 1a2b3c4d`)."""
    return set(re.findall(r"\bid ([0-9a-f]{8})\b", text))


def _node() -> str:
    node = shutil.which("node")
    assert node, "Node.js is needed to test the OpenClaw plugin"
    return node


def test_every_door_finds_what_recall_shows(server, tokens, db):  # noqa: F811
    with Memory.open(db) as mem:
        block = before_prompt_build(mem, {"prompt": QUESTION}, ALICE)
        recalled = {m["id"] for m in block["memories"]}
        shown = {line for line in (block["prependContext"] or "").splitlines() if line.startswith("- [")}
        # the recall block holds the fact said in passing, the memory and the file, each labelled by its source
        assert any(line.startswith("- [user said] " + SAID) for line in shown), shown
        assert any(line.startswith("- [preference] Alice brews") for line in shown), shown
        assert any(line.startswith("- [file] # Tea The oolong tin") for line in shown), shown
        assert len(recalled) == 3

        found: dict[str, set[str]] = {}
        labels: dict[str, dict[str, str]] = {}
        hits = mem.search(QUESTION, caller=ALICE)
        found["python"] = {h.id for h in hits}
        labels["python"] = {h.id: h.source for h in hits}
        for name in ("memory_search", "memory_recall", "search_context"):
            result = run_tool(mem, ALICE, name, {"query": QUESTION})
            found[f"tool {name}"] = {i for i in recalled if i[:8] in _ids(result.text)}
        details = run_tool(mem, ALICE, "memory_search", {"query": QUESTION}).details["results"]

    cli_out = CliRunner().invoke(cli, ["--db", str(db), "search", QUESTION, "--user", "alice", "--agent", "main",
                                       "--json"])
    assert cli_out.exit_code == 0, cli_out.output
    found["cli"] = {h["memory"]["id"] for h in json.loads(cli_out.output)}

    headers = {"Authorization": f"Bearer {tokens['alice']}", "x-clawrecall-session": "s2"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as rest:
        found["rest /v1/search"] = {h["memory"]["id"] for h in rest.post("/v1/search", json={"query": QUESTION}).json()["results"]}
        tool = rest.post("/v1/tools/memory_search", json={"query": QUESTION}).json()
        found["rest memory_search"] = {r["id"] for r in tool["details"]["results"]}
        called = rest.post("/mcp", headers=MCP_HEADERS, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "memory_search", "arguments": {"query": QUESTION}}})
        payload = json.loads(called.text.split("data:", 1)[1]) if called.text.startswith("event") else called.json()
        found["mcp memory_search"] = {r["id"] for r in payload["result"]["structuredContent"]["results"]}

    done = subprocess.run([_node(), "--input-type=module", "-e", PLUGIN_SCRIPT, server.url, tokens["alice"], QUESTION],
                          cwd=PLUGIN, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    plugin = json.loads(done.stdout)
    found["plugin clawrecall_search"] = {r["id"] for r in plugin["clawrecall_search"]["details"]["results"]}
    found["plugin clawrecall_recall"] = {m["id"] for m in plugin["clawrecall_recall"]["details"]["memories"]}
    found["plugin memory_search (slot)"] = {r["id"] for r in plugin["memory_search"]["details"]["results"]}

    missing = {door: sorted(recalled - ids) for door, ids in found.items() if not recalled <= ids}
    assert not missing, f"doors that do not find what recall showed: {missing}"

    # each door says where a hit came from, as recall does
    labels["memory_search"] = {r["id"]: (r["kind"], r["label"], r["source"]) for r in details}
    said = next(i for i, s in labels["python"].items() if s == "message")
    assert labels["memory_search"][said] == ("message", "user said", "sessions")  # OpenClaw's source for transcripts
    assert sorted(labels["python"][i] for i in recalled) == ["chunk", "memory", "message"]
    assert "[user said]" in plugin["clawrecall_search"]["text"] and "[file]" in plugin["clawrecall_search"]["text"]
    core = {r["id"]: r["source"] for r in plugin["memory_search"]["details"]["results"]}
    assert core[said] == "sessions"

    # narrowed on request: memories only
    with Memory.open(db) as mem:
        only = run_tool(mem, ALICE, "memory_search", {"query": QUESTION, "sources": ["memory"]}).details["results"]
        assert {r["kind"] for r in only} == {"memory"}
        assert {h.source for h in mem.search(QUESTION, caller=ALICE, category="preference")} == {"memory"}
