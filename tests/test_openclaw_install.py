"""`clawrecall openclaw install` (JSON5 edits that keep a hand-written openclaw.json intact) and the
Markdown import the plugin calls (`/v1/import/markdown`), on real files and a real SQLite store."""

from __future__ import annotations

import json
import re
import stat
import textwrap
from pathlib import Path

import json5
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from clawrecall import Caller, Memory
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.errors import ScopeError, ValidationError
from clawrecall.openclaw import MarkdownFile, import_markdown, sections
from clawrecall.openclaw.sections import MAX_SECTION_CHARS
from clawrecall.openclaw import templates
from clawrecall.openclaw.install import install_entries
from clawrecall.server.app import create_app

HAND_WRITTEN = textwrap.dedent("""\
    // my OpenClaw config: keep these comments
    {
      models: { mode: "merge" }, // merge with the catalog
      plugins: {
        /* memory-core on purpose */
        entries: {
          'memory-core': { enabled: true },
        },
        allow: ["telegram"],
      },
      tools: {
        profile: "minimal",
      },
    }
    """)


def _install(path: Path, mode: str = "beside", **extra):
    return install_entries(path, mode=mode, plugin_dir=path.parent, plugin_config=extra.get("config"),
                           dry_run=extra.get("dry_run", False))


def test_install_keeps_comments_and_layout_and_adds_only_our_entries(tmp_path):
    path = tmp_path / "openclaw.json"
    path.write_text(HAND_WRITTEN)
    changes = _install(path, "slot", config={"serverUrl": "http://127.0.0.1:9000", "user": "alice"})
    text = path.read_text()
    for comment in ("// my OpenClaw config: keep these comments", "// merge with the catalog", "/* memory-core on purpose */"):
        assert comment in text
    assert text.startswith(HAND_WRITTEN.splitlines()[0])
    data = json5.loads(text)
    assert data["models"] == {"mode": "merge"}
    plugins = data["plugins"]
    assert plugins["slots"] == {"memory": "clawrecall"}
    assert plugins["entries"]["memory-core"] == {"enabled": False}
    assert plugins["entries"]["clawrecall"] == {
        "enabled": True, "hooks": {"allowConversationAccess": True},
        "config": {"mode": "slot", "serverUrl": "http://127.0.0.1:9000", "user": "alice"},
    }
    assert plugins["load"]["paths"] == [str(tmp_path.resolve())]
    assert plugins["allow"] == ["telegram", "clawrecall"]  # an allowlist would otherwise keep us out
    assert data["tools"] == {"profile": "minimal", "alsoAllow": ["clawrecall"]}  # minimal hides plugin tools
    assert [c.path for c in changes] == [
        "plugins.slots.memory", "plugins.entries.clawrecall.enabled",
        "plugins.entries.clawrecall.hooks.allowConversationAccess", "plugins.entries.clawrecall.config.mode",
        "plugins.entries.clawrecall.config.serverUrl", "plugins.entries.clawrecall.config.user",
        "plugins.entries.memory-core.enabled", "plugins.load.paths", "plugins.allow", "tools.alsoAllow",
    ]
    assert _install(path, "slot", config={"serverUrl": "http://127.0.0.1:9000", "user": "alice"}) == []  # idempotent


def test_every_agent_of_the_roster_gets_the_plugins_tools_and_is_named(tmp_path):
    """An agent's own tool policy would hide the plugin's tools from it: an allowlist names the plugin,
    the minimal profile gets alsoAllow (OpenClaw refuses both in one policy); the roster is reported."""
    from clawrecall.openclaw.install import roster

    path = tmp_path / "openclaw.json"
    path.write_text(textwrap.dedent("""\
        {
          agents: {
            list: [
              { id: "main" },
              { id: "drjones", tools: { allow: ["read"] } }, // the doctor reads only
              { id: "bob", tools: { profile: "minimal" } },
            ],
          },
        }
        """))
    changes = _install(path)
    data = json5.loads(path.read_text())
    assert [a.get("tools") for a in data["agents"]["list"]] == [
        None, {"allow": ["read", "clawrecall"]}, {"profile": "minimal", "alsoAllow": ["clawrecall"]}]
    assert {"agents.list.1.tools.allow", "agents.list.2.tools.alsoAllow"} <= {c.path for c in changes}
    assert "// the doctor reads only" in path.read_text()
    assert _install(path) == []  # idempotent
    assert roster(path) == ["main", "drjones", "bob"]
    assert roster(tmp_path / "missing.json") == ["main"]


def test_switching_mode_changes_only_the_mode_and_memory_core(tmp_path):
    path = tmp_path / "openclaw.json"
    path.write_text(HAND_WRITTEN)
    _install(path, "slot")
    before = path.read_text()
    changes = _install(path, "beside")
    assert [(c.path, c.old, c.new) for c in changes] == [
        ("plugins.entries.clawrecall.config.mode", "slot", "beside"),
        ("plugins.entries.memory-core.enabled", False, True),
    ]
    after = path.read_text()
    assert after.replace('"beside"', '"slot"').replace("enabled: true }", "enabled: false }") == before


def test_dry_run_writes_nothing_and_a_missing_file_is_created(tmp_path):
    path = tmp_path / "state" / "openclaw.json"
    assert _install(path, dry_run=True)
    assert not path.exists()
    assert _install(path)
    data = json.loads(path.read_text())  # a new file is plain JSON
    assert data["plugins"]["entries"]["clawrecall"]["config"] == {"mode": "beside"}
    assert data["plugins"]["entries"]["memory-core"] == {"enabled": True}


@pytest.mark.parametrize("text, message", [
    ("{ plugins: ", "not valid JSON5"),
    ("[1, 2]", "must hold a JSON object"),
    ('{"plugins": {"slots": "memory-core"}}', "plugins.slots is not an object"),
    ('{"plugins": {"load": {"paths": "/x"}}}', "plugins.load.paths is not a list"),
])
def test_a_config_it_cannot_edit_is_one_clear_error_and_stays_untouched(tmp_path, text, message):
    path = tmp_path / "openclaw.json"
    path.write_text(text)
    with pytest.raises(ValidationError, match=message):
        _install(path)
    assert path.read_text() == text


def test_cli_prints_the_changes_and_dry_run_only_prints(tmp_path):
    path = tmp_path / "openclaw.json"
    path.write_text(HAND_WRITTEN)
    runner = CliRunner()
    dry = runner.invoke(cli, ["openclaw", "install", "--config", str(path), "--mode", "slot", "--dry-run",
                              "--server-url", "http://127.0.0.1:9000"])
    assert dry.exit_code == 0, dry.output
    assert "would change 9 setting(s)" in dry.output
    assert 'plugins.entries.clawrecall.config.serverUrl: set to "http://127.0.0.1:9000"' in dry.output
    assert path.read_text() == HAND_WRITTEN
    done = runner.invoke(cli, ["openclaw", "install", "--config", str(path), "--json"])
    assert done.exit_code == 0, done.output
    answer = json.loads(done.output)
    assert answer["dryRun"] is False and answer["mode"] == "beside"
    assert Path(answer["pluginDir"], "openclaw.plugin.json").exists()
    assert {"path": "plugins.slots.memory", "old": None, "new": "clawrecall", "append": False} in answer["changes"]
    again = runner.invoke(cli, ["openclaw", "install", "--config", str(path)])
    assert "already set up, nothing to change" in again.output
    bad = runner.invoke(cli, ["openclaw", "install", "--config", str(path), "--mode", "other"])
    assert bad.exit_code == 2 and "'other' is not one of 'beside', 'slot'" in bad.output


def test_install_keeps_the_files_permissions_and_never_prints_the_token(tmp_path):
    path = tmp_path / "openclaw.json"
    path.write_text('{\n  // my gateway\n  "gateway": {"auth": {"token": "secret"}},\n}\n')
    path.chmod(0o600)
    token = "cr_abcdefghijklmnop_SECRET"
    runner = CliRunner()
    done = runner.invoke(cli, ["openclaw", "install", "--config", str(path), "--token", token])
    assert done.exit_code == 0, done.output
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json5.loads(path.read_text())["plugins"]["entries"]["clawrecall"]["config"]["token"] == token
    assert token not in done.output and "plugins.entries.clawrecall.config.token: set to \"cr_…CRET\"" in done.output
    path.chmod(0o640)
    shown = runner.invoke(cli, ["openclaw", "install", "--config", str(path), "--token", "cr_other-token-0000",
                                "--json"])
    assert shown.exit_code == 0, shown.output
    assert "cr_abcdefghijklmnop" not in shown.output and "cr_other-token" not in shown.output
    [change] = [c for c in json.loads(shown.output)["changes"] if c["path"].endswith(".token")]
    assert (change["old"], change["new"]) == ("cr_…CRET", "cr_…0000")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    new = tmp_path / "new" / "openclaw.json"
    assert _install(new)
    assert stat.S_IMODE(new.stat().st_mode) == 0o600  # a new config (it may come to hold tokens) is private


# -- the Markdown import -------------------------------------------------------------------------
MEMORY_MD = textwrap.dedent("""\
    # People

    - Alice is the product owner
      and signs off releases.
    - Bob runs the on-call rota.

    ## Decisions
    We moved billing to PostgreSQL in March.

    ```
    code stays with its paragraph
    ```
    """)


def test_sections_are_paragraphs_and_top_level_items_under_their_heading():
    found = [(s.heading, s.text) for s in sections(MEMORY_MD)]
    assert found == [
        ("People", "Alice is the product owner\nand signs off releases."),
        ("People", "Bob runs the on-call rota."),
        ("Decisions", "We moved billing to PostgreSQL in March."),
        ("Decisions", "```\ncode stays with its paragraph\n```"),
    ]


@pytest.fixture
def client(tmp_path):
    mem = Memory.open(tmp_path / "m.db")
    tokens = TokenStore(mem._store)
    _, token = tokens.create(kind="service")
    with TestClient(create_app(mem, tokens=tokens)) as c:
        c.headers["authorization"] = f"Bearer {token}"
        yield c, mem
    mem.close()


def test_markdown_import_goes_to_the_agents_scope_once(client):
    c, mem = client
    files = {"files": [{"path": "MEMORY.md", "content": MEMORY_MD},
                       {"path": "memory/2026-03-02.md", "content": "Standup moved to 9:30."}]}
    first = c.post("/v1/import/markdown", json=files, headers={"x-clawrecall-agent": "main"})
    assert first.status_code == 200, first.text
    assert first.json() == {"files": 2, "sections": 5, "created": 5, "duplicates": 0, "templates": 0,
                            "template_files": [], "scope": "agent:main"}
    again = c.post("/v1/import/markdown", json=files, headers={"x-clawrecall-agent": "main"})
    assert again.json() == {"files": 2, "sections": 5, "created": 0, "duplicates": 5, "templates": 0,
                            "template_files": [], "scope": "agent:main"}
    records = mem.list(scope="agent:main", limit=50)
    assert len(records) == 5 and {r.source_type for r in records} == {"openclaw-markdown"}
    daily = next(r for r in records if "Standup" in r.content)
    assert daily.created_at.date().isoformat() == "2026-03-02" and daily.metadata["path"] == "memory/2026-03-02.md"
    assert mem.list(agent_id="scout", scope="agent:scout") == []
    hits = c.post("/v1/tools/memory_recall", json={"query": "who signs off releases"},
                  headers={"x-clawrecall-agent": "scout"}).json()
    assert "Alice" not in hits["content"][0]["text"]  # another agent never sees main's workspace


def test_markdown_import_needs_an_agent_and_a_well_formed_body(client):
    c, _ = client
    body = {"files": [{"path": "MEMORY.md", "content": "Something worth keeping."}]}
    assert c.post("/v1/import/markdown", json=body).json()["error"]["code"] == "invalid_input"
    assert c.post("/v1/import/markdown", json={"files": [{"path": "x.md"}]},
                  headers={"x-clawrecall-agent": "main"}).status_code == 422


def test_a_daily_note_named_by_no_real_date_is_imported_undated(client):
    c, mem = client
    body = {"files": [{"path": "memory/2026-13-45.md", "content": "Shipped the billing migration."}]}
    answer = c.post("/v1/import/markdown", json=body, headers={"x-clawrecall-agent": "main"})
    assert answer.status_code == 200, answer.text
    [record] = mem.list(scope="agent:main")
    assert record.metadata["path"] == "memory/2026-13-45.md"
    assert abs((record.created_at - record.updated_at).total_seconds()) < 60  # dated when stored, like any undated file


def test_markdown_import_is_idempotent_by_identity_on_both_backends(mem):
    main = Caller(agent_id="main")
    notes = ("- The deploy key is in vault A.\n- The deploy key is in vault B.\n"
             "- The release checklist is in the blue binder.\n")
    files = [MarkdownFile("MEMORY.md", notes)]
    first = import_markdown(mem, main, files)
    assert (first["sections"], first["created"], first["duplicates"]) == (3, 3, 0)  # similar lines stay distinct
    binder = next(r for r in mem.list(caller=main) if "binder" in r.content)
    assert binder.source_type == "openclaw-markdown" and binder.source_id.startswith("MEMORY.md#")
    mem.delete(binder.id, caller=main)
    again = import_markdown(mem, main, files)
    assert (again["created"], again["duplicates"]) == (0, 3)
    assert all("binder" not in r.content for r in mem.list(caller=main))  # what the user deleted stays deleted
    changed = import_markdown(mem, main, [MarkdownFile("MEMORY.md", notes + "- Standups are at 9:30.\n")])
    assert (changed["created"], changed["duplicates"]) == (1, 3)
    other = import_markdown(mem, Caller(agent_id="scout"), files)  # identity is per agent scope
    assert other["created"] == 3
    with pytest.raises(ScopeError):  # a token limited to other scopes cannot look into agent:main either
        import_markdown(mem, Caller(agent_id="main", scopes=("global",)), files)


def _shipped_templates() -> dict[str, str]:
    """OpenClaw's workspace templates as it writes them into a new workspace (front matter removed), read from
    the real package the end-to-end tests install."""
    from openclaw_harness import ensure_openclaw

    cli = ensure_openclaw()["cli"]
    folder = templates.template_dir(str(cli))
    assert folder is not None, f"no docs/reference/templates under {cli}"
    return {p.name: re.sub(r"\A---\n.*?\n---\n\s*", "", p.read_text(), count=1, flags=re.S)
            for p in sorted(folder.glob("*.md"))}


def test_the_shipped_fingerprints_are_those_of_the_installed_openclaws_templates():
    shipped = _shipped_templates()
    assert templates.fingerprints(shipped.values()) == templates.SHIPPED


def test_an_untouched_user_md_is_left_out_and_a_filled_in_one_keeps_only_what_the_user_wrote(mem, monkeypatch, request):
    user_md = _shipped_templates()["USER.md"]
    monkeypatch.setenv("PATH", "/nonexistent")  # no OpenClaw here: the shipped fingerprints alone recognise them
    templates.known.cache_clear()
    request.addfinalizer(templates.known.cache_clear)
    main = Caller(agent_id="main")
    untouched = import_markdown(mem, main, [MarkdownFile("USER.md", user_md), MarkdownFile("MEMORY.md", "")])
    assert (untouched["created"], untouched["templates"], untouched["template_files"]) == (0, untouched["sections"],
                                                                                           ["USER.md"])
    assert untouched["sections"] >= 8 and mem.list(caller=main) == []

    filled = user_md.replace("<!-- observed: YYYY-MM-DD | status: active -->\n\n- Prefer ...",
                             "<!-- observed: 2026-03-02 | status: active -->\n\n- Prefer tea over coffee in the morning.")
    assert filled != user_md
    answer = import_markdown(mem, main, [MarkdownFile("USER.md", filled)])
    assert [r.content for r in mem.list(caller=main)] == ["Prefer tea over coffee in the morning."]
    assert (answer["created"], answer["template_files"]) == (1, [])


@pytest.mark.parametrize("text", ["Prefer ...", "- Always …", "<!-- observed: YYYY-MM-DD | status: active -->",
                                  "Name: {{name}}", "Email: [your email]"])
def test_placeholders_are_never_imported(mem, text):
    answer = import_markdown(mem, Caller(agent_id="main"), [MarkdownFile("MEMORY.md", f"# Notes\n\n{text}\n\nReal note.\n")])
    assert (answer["created"], answer["templates"]) == (1, 1)
    assert [r.content for r in mem.list(caller=Caller(agent_id="main"))] == ["Real note."]


def test_a_section_over_the_limit_is_split_between_lines_never_cut(client):
    c, mem = client
    lines = [f"Line {i}: the quarterly report covers region {i} in detail." for i in range(200)]
    body = {"files": [{"path": "USER.md", "content": "# Regions\n" + "\n".join(lines)}]}
    answer = c.post("/v1/import/markdown", json=body, headers={"x-clawrecall-agent": "main"}).json()
    assert answer["sections"] == answer["created"] > 1
    stored = mem.list(scope="agent:main", limit=50, order="oldest")
    assert all(len(r.content) <= MAX_SECTION_CHARS and r.title == "Regions" for r in stored)
    assert "\n".join(r.content for r in stored) == "\n".join(lines)  # every line, whole, in order
    one_word = "x" * (MAX_SECTION_CHARS * 2 + 5)
    assert [len(s.text) for s in sections(one_word)] == [MAX_SECTION_CHARS, MAX_SECTION_CHARS, 5]


# -- the plugin's own rules (JavaScript, run by Node) ------------------------------------------------
PLUGIN = Path(__file__).resolve().parent.parent / "integrations" / "openclaw"
PROBE = """
import { versionProblem, configWarnings } from "./lib/checks.js";
import { identityOf, plainMessages } from "./lib/hooks.js";
import { agentWorkspaces } from "./lib/cli.js";
import { ClawrecallClient } from "./lib/client.js";
const good = { plugins: { slots: { memory: "clawrecall" },
  entries: { clawrecall: { hooks: { allowConversationAccess: true } }, "memory-core": { enabled: false } } },
  tools: { toolSearch: false } };
console.log(JSON.stringify({
  old: versionProblem("2026.8.21"), same: versionProblem("2026.9.6"), newer: versionProblem("2026.10.1-beta.1"),
  good: configWarnings(good, { mode: "slot" }, ["clawrecall_recall"]),
  bad: configWarnings({ tools: { profile: "minimal" } }, { mode: "slot" }, ["clawrecall_recall"]),
  identity: identityOf({ agentId: "main", sessionKey: "agent:main:s1", senderId: "42" }, { user: "owner" }),
  headers: new ClawrecallClient({ serverUrl: "http://127.0.0.1:1", token: "t" }, console).headers({ user: "山田", agent: "main", session: "a b" }),
  fallback: identityOf({ agentId: "main" }, { user: "owner" }),
  messages: plainMessages([{ role: "user", content: [{ type: "text", text: "hi" }, { type: "toolCall" }] },
                           { role: "toolResult", content: "x" }, { role: "assistant", content: "yo" }]),
  workspaces: agentWorkspaces({ agents: { defaults: { workspace: "/w" }, entries: { main: {}, ops: {}, x: { workspace: "/x" } } } },
                              { HOME: "/h" }),
}));
"""


def test_plugin_rules_version_warnings_identity_and_workspaces():
    import shutil
    import subprocess

    node = shutil.which("node")
    assert node, "Node.js is needed to test the OpenClaw plugin"
    done = subprocess.run([node, "--input-type=module", "-e", PROBE], cwd=PLUGIN, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    assert "needs OpenClaw 2026.9.6 or newer; this is 2026.8.21" in r["old"]
    assert r["same"] is None and r["newer"] is None
    assert r["good"] == []
    bad = "\n".join(r["bad"])
    for trap in ("allowConversationAccess", '"minimal" tool profile', "tool search is on",
                 'plugins.slots.memory is "memory-core"', "memory-core is still enabled"):
        assert trap in bad
    assert r["identity"] == {"agent": "main", "session": "agent:main:s1", "user": "42"}
    assert r["fallback"] == {"agent": "main", "user": "owner"}
    assert {k: v for k, v in r["headers"].items() if k.startswith("x-")} == {
        "x-clawrecall-user": "%E5%B1%B1%E7%94%B0", "x-clawrecall-agent": "main", "x-clawrecall-session": "a%20b"}
    assert r["messages"] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert r["workspaces"] == [{"agent": "main", "workspace": "/w"}, {"agent": "ops", "workspace": "/w/ops"},
                               {"agent": "x", "workspace": "/x"}]


# -- provenance: OpenClaw's install record of the plugin's folder ---------------------------------
FAKE_OPENCLAW = """#!{python}
import json, os, sys
config = os.environ["OPENCLAW_CONFIG_PATH"]
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "config": config, "text": open(config).read(),
                          "mode": oct(os.stat(os.path.dirname(config)).st_mode & 0o777)}}) + "\\n")
open(config, "w").write("{{}}")  # as OpenClaw does: the file it is given comes back as plain JSON
print("Linked plugin path: " + sys.argv[4])
sys.exit({code})
"""


def _fake_openclaw(tmp_path: Path, code: int = 0) -> tuple[Path, Path]:
    import sys

    log = tmp_path / "calls.jsonl"
    script = tmp_path / "openclaw"
    script.write_text(FAKE_OPENCLAW.format(python=sys.executable, log=str(log), code=code))
    script.chmod(0o755)
    return script, log


def test_install_has_openclaw_record_the_plugin_folder_on_a_copy_of_the_config(tmp_path):
    path = tmp_path / "openclaw.json"
    path.write_text(HAND_WRITTEN)
    script, log = _fake_openclaw(tmp_path)
    done = CliRunner().invoke(cli, ["openclaw", "install", "--config", str(path), "--openclaw", str(script), "--json"])
    assert done.exit_code == 0, done.output
    answer = json.loads(done.output)
    assert answer["provenance"]["recorded"] is True
    [call] = [json.loads(line) for line in log.read_text().splitlines()]
    plugin_dir = str(Path(answer["pluginDir"]).resolve())
    assert call["argv"] == ["plugins", "install", "--link", plugin_dir, "--force", "--accept-capabilities"]
    assert call["config"] != str(path) and call["mode"] == "0o700"  # a private copy, gone after
    assert not Path(call["config"]).exists()
    assert call["text"] == path.read_text()  # the copy held our entries...
    text = path.read_text()  # ...and the user's file keeps its comments and its allowlist, extended
    assert "// my OpenClaw config: keep these comments" in text
    assert json5.loads(text)["plugins"]["allow"] == ["telegram", "clawrecall"]


def test_no_allowlist_is_made_and_a_missing_or_failing_openclaw_is_said_with_the_command(tmp_path):
    path = tmp_path / "openclaw.json"
    missing = CliRunner().invoke(cli, ["openclaw", "install", "--config", str(path), "--openclaw",
                                       str(tmp_path / "nowhere")])
    assert missing.exit_code == 0, missing.output
    assert "did not record the plugin's folder" in missing.output
    assert "openclaw plugins install --link" in missing.output and "--accept-capabilities" in missing.output
    # an allowlist would stop every plugin it does not name, the bundled model providers included
    assert "allow" not in json5.loads(path.read_text())["plugins"]
    script, _ = _fake_openclaw(tmp_path, code=3)
    failed = CliRunner().invoke(cli, ["openclaw", "install", "--config", str(path), "--openclaw", str(script), "--json"])
    assert failed.exit_code == 0, failed.output
    trust = json.loads(failed.output)["provenance"]
    assert trust["recorded"] is False and "exit 3" in trust["detail"]
