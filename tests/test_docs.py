"""The docs tell the truth about the code: generated samples are current, every command is in the
reference, the README stays a front door, and links lead somewhere."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import cogdocs

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def cog(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWRECALL_")}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "cogdocs.py"), *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=False)


@pytest.mark.model  # the samples embed with the bundled model, as a user's commands do
def test_every_generated_block_is_current() -> None:
    done = cog("--check")
    assert done.returncode == 0, f"stale samples: run `python scripts/cogdocs.py`\n{done.stdout}{done.stderr}"


@pytest.mark.model
def test_a_stale_sample_is_caught(tmp_path: Path) -> None:
    """The check compares with what the commands print now: an edited output line fails it."""
    from cogapp import Cog

    readme = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text()
    assert "No relevant memories." in text
    readme.write_text(text.replace("No relevant memories.", "No memories at all."))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWRECALL_")}
    done = subprocess.run([sys.executable, "-c", "import sys; from cogapp import Cog; sys.exit(Cog().main(sys.argv))",
                           "-I", str(ROOT / "scripts"), "--check", str(readme)], capture_output=True, text=True, env=env, check=False)
    assert done.returncode != 0 and "changed" in done.stdout + done.stderr
    assert Cog  # the dev extra installs cogapp


def test_every_command_is_in_the_reference() -> None:
    reference = (ROOT / "docs" / "cli.md").read_text()
    headings = set(re.findall(r"^#{2,4} `(clawrecall[^`]*)`$", reference, re.MULTILINE))
    missing = [path for path, _ in cogdocs.commands() if path not in headings]
    assert not missing, f"not in docs/cli.md (run `python scripts/cogdocs.py`): {missing}"
    assert len(headings) > 40


def test_the_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "./scripts/install.sh --dev && .venv/bin/pytest" in readme  # what CI runs
    for extra in ("postgres", "openai", "anthropic"):  # what "facts from conversations" and PostgreSQL need
        assert f"`{extra}`" in readme
    assert "[[[cog" in readme  # its samples are generated


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_between_files_lead_somewhere(doc: Path) -> None:
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.DOTALL)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#")[0]
        if not (doc.parent / path).exists():
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)} links to missing files: {broken}"
