"""`export --journal`: one Markdown file per scope and day, by kind, with what changed; the same
store gives the same files; deleted and secret memories stay out; and reading the files back as
OpenClaw Markdown memory finds every memory."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from click.testing import CliRunner

from clawrecall import Memory
from clawrecall.cli import cli
from clawrecall.openclaw import MarkdownFile, import_markdown
from clawrecall.scopes import Caller


def _day(d: int) -> datetime:
    return datetime(2026, 3, d, 9, 0, tzinfo=timezone.utc)


def test_journal_writes_a_file_per_scope_and_day_and_reads_back(db_target, tmp_path):
    mem = Memory.open(db_target)
    ftp = mem.add("User's FTP is 250W", category="preference", agent_id="main", created_at=_day(2))
    mem.add("Deploys happen on Tuesdays", category="decision", agent_id="main", created_at=_day(2))
    mem.add("The repo uses pnpm workspaces\nwith three packages", category="fact", agent_id="main", created_at=_day(2))
    mem.add("Standup is at 9:30", created_at=_day(3))
    gone = mem.add("An address that was wrong", agent_id="main", created_at=_day(3))
    mem.delete(gone.id, agent_id="main")
    mem.add("Bank PIN is 4821", agent_id="main", visibility="secret", created_at=_day(3))
    mem.supersede(ftp.id, "User's FTP is 262W", agent_id="main", valid_from=_day(5))
    mem.close()

    folder = tmp_path / "journal"
    result = CliRunner().invoke(cli, ["--db", db_target, "export", "--journal", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["files"] == 3
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.md"))
    today = datetime.now(timezone.utc).date().isoformat()  # a supersede is recorded when it is made
    assert files == sorted(["agent-main/memory/2026-03-02.md", "global/memory/2026-03-03.md",
                            f"agent-main/memory/{today}.md"])
    first = (folder / "agent-main/memory/2026-03-02.md").read_text()
    assert first == (
        "# 2026-03-02 · agent:main\n\n"
        "## Decisions\n\n- Deploys happen on Tuesdays\n\n"
        "## Preferences\n\n- User's FTP is 250W\n  (replaced 2026-03-05)\n\n"
        "## Facts\n\n- The repo uses pnpm workspaces\n  with three packages\n"
    )
    changed = (folder / f"agent-main/memory/{today}.md").read_text()
    assert "## What changed\n\n- User's FTP is 262W\n  (replaces: User's FTP is 250W)" in changed
    text = "".join(p.read_text() for p in folder.rglob("*.md"))
    assert "wrong" not in text and "4821" not in text  # deleted and secret memories stay out

    again = tmp_path / "again"
    CliRunner().invoke(cli, ["--db", db_target, "export", "--journal", str(again)])
    assert all((again / f).read_text() == (folder / f).read_text() for f in files)  # diffable: same in, same out

    # read back as the OpenClaw plugin imports an agent's Markdown memory: every memory is found
    back = Memory.open(tmp_path / "back.db")
    workspace = folder / "agent-main"
    import_markdown(back, Caller(agent_id="main"), [
        MarkdownFile(str(p.relative_to(workspace)), p.read_text()) for p in sorted(workspace.rglob("*.md"))])
    contents = [r.content for r in back.list(agent_id="main", limit=100)]
    for fact in ("User's FTP is 262W", "Deploys happen on Tuesdays", "User's FTP is 250W",
                 "The repo uses pnpm workspaces\nwith three packages"):
        assert any(fact in c for c in contents), (fact, contents)
    back.close()


def test_journal_and_output_are_one_or_the_other(db_path, tmp_path):
    Memory.open(db_path).close()
    result = CliRunner().invoke(cli, ["--db", str(db_path), "export", "--journal", str(tmp_path / "j"), "-o", "x.jsonl"])
    assert result.exit_code == 2 and "--journal" in result.output
