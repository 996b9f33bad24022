"""What a newcomer meets first: help without a command, an interrupted import, a text too long
for a memory, the install script's extras. Real SQLite files; the `hash` embedder (conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawrecall.cli import cli
from clawrecall.engine._writes import Writes

ROOT = Path(__file__).resolve().parents[1]


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


# -- a command without a subcommand ------------------------------------------------------------
@pytest.mark.parametrize("args", [[], ["jobs"], ["conversations"], ["token"]])
def test_a_group_alone_prints_its_help(args: list[str]) -> None:
    """`clawrecall` (or `clawrecall jobs`) asks what it can do: the help as click lays it out, exit 0."""
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Usage: clawrecall{''.join(' ' + a for a in args)} [OPTIONS] COMMAND")
    assert "Commands:" in lines  # a heading on a line of its own, not a help squashed into one error line
    assert len(lines) > 8


def test_a_group_alone_under_json_is_a_json_usage_error() -> None:
    result = invoke("--json", "jobs")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["code"] == "usage_error"
    assert result.stderr.strip() == "Error: no command given (see 'clawrecall jobs --help')"


# -- an interrupted import ---------------------------------------------------------------------
def test_an_interrupted_import_says_what_it_wrote_and_running_it_again_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "m.db"
    source = tmp_path / "notes.jsonl"
    source.write_text("".join(
        json.dumps({"content": f"note {n:04d} on {os.urandom(6).hex()} and {os.urandom(6).hex()}"}) + "\n"
        for n in range(600)
    ))
    real = Writes.add_records
    calls = []

    def interrupted_at_the_second_chunk(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the second chunk of 512 lines is written
        return real(self, *args, **kwargs)

    with monkeypatch.context() as mp:
        mp.setattr(Writes, "add_records", interrupted_at_the_second_chunk)
        result = invoke("--db", str(db), "import", str(source))
    assert result.exit_code == 1
    error = result.stderr.strip()
    assert error.startswith("Error: import interrupted: 512 of 600 lines to import from ")
    assert "run the same import again to finish it" in error
    assert json.loads(invoke("--db", str(db), "count", "--json").stdout)["count"] == 512

    again = invoke("--db", str(db), "import", str(source))
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("Imported 88 of 600 memories")
    assert json.loads(invoke("--db", str(db), "count", "--json").stdout)["count"] == 600


def test_an_import_interrupted_before_any_write_says_nothing_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = tmp_path / "notes.jsonl"
    source.write_text(json.dumps({"content": "Ivan takes the 8:15 train"}) + "\n")

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Writes, "add_records", interrupted)
    result = invoke("--db", str(tmp_path / "m.db"), "--json", "import", str(source), "--on-duplicate", "keep")
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "aborted"
    assert "no line was written" in error["message"]
    assert "only lines that carry an id" in error["message"]  # keep + no ids: running again would store twice


# -- a text too long for a memory ---------------------------------------------------------------
def test_a_text_too_long_for_a_memory_points_at_files_add(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    text = "The quarterly report says revenue grew in every region. " * 3_600  # ~200 KB
    result = invoke("--db", db, "add", "-", input=text)
    assert result.exit_code == 1
    assert "`clawrecall files add PATH`" in result.stderr
    # and the advice works: the same text, as a file, is stored and found
    path = tmp_path / "report.txt"
    path.write_text(text)
    assert invoke("--db", db, "files", "add", str(path)).exit_code == 0
    hits = json.loads(invoke("--db", db, "search", "quarterly report revenue", "--sources", "chunk", "--json").stdout)
    assert hits and hits[0]["memory"]["source_type"] == "file"


# -- the install script's extras ------------------------------------------------------------------
@pytest.fixture
def install_copy(tmp_path: Path) -> Path:
    """scripts/install.sh in a copy of the tree whose .venv is a fake python logging each call."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "install.sh", tmp_path / "scripts" / "install.sh")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    log = tmp_path / "calls.log"
    for name in ("python", "clawrecall"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
        (bin_dir / name).chmod(0o755)
    return tmp_path


def install(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(tree / "scripts" / "install.sh"), *args], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("args", [["--postgres", "--openai", "--anthropic"], ["--extras", "postgres,openai,anthropic"],
                                  ["--extras=postgres", "--extras=openai,anthropic"]])
def test_install_names_the_postgres_and_llm_extras(install_copy: Path, args: list[str]) -> None:
    done = install(install_copy, *args)
    assert done.returncode == 0, done.stderr
    calls = (install_copy / "calls.log").read_text().splitlines()
    assert "-m pip install --quiet -e .[postgres,openai,anthropic]" in calls


def test_install_refuses_an_unknown_extra(install_copy: Path) -> None:
    done = install(install_copy, "--extras", "postgres,pgvector")
    assert done.returncode == 2
    assert "unknown extra 'pgvector'" in done.stderr
    assert not (install_copy / "calls.log").exists()


def test_install_knows_every_extra_of_the_package(install_copy: Path) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name in extras:
        assert install(install_copy, f"--{name}").returncode == 0, name


# -- when a queued job runs next ----------------------------------------------------------------
def test_a_job_due_within_the_minute_says_so(tmp_path: Path) -> None:
    from datetime import timedelta

    from clawrecall import Memory
    from clawrecall._time import utcnow

    db = tmp_path / "m.db"
    with Memory.open(str(db)) as mem:
        mem.jobs.enqueue("extract", scope="user:alice", subject_id="soon", run_after=utcnow() + timedelta(seconds=45))
        mem.jobs.enqueue("extract", scope="user:alice", subject_id="later", run_after=utcnow() + timedelta(minutes=5))
    rows = {line.split()[0]: line for line in invoke("--db", str(db), "jobs", "list").stdout.splitlines()[1:]}
    assert [" in <1m" in line for line in rows.values()].count(True) == 1
    assert [" in 4m" in line or " in 5m" in line for line in rows.values()].count(True) == 1
    assert "just now  in just now" not in "".join(rows.values())


# -- an extra that is missing says how to install it -------------------------------------------------
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_llm_without_its_sdk_names_the_extra_and_the_script_flag(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from clawrecall.config import LLMConfig
    from clawrecall.errors import ConfigError
    from clawrecall.llm import create_llm

    monkeypatch.setitem(sys.modules, provider, None)  # as if the extra were not installed
    with pytest.raises(ConfigError) as caught:
        create_llm(LLMConfig(provider=provider, model="m", base_url="http://127.0.0.1:9/v1"))
    assert f"pip install 'clawrecall[{provider}]'" in str(caught.value)
    assert f"./scripts/install.sh --{provider}" in str(caught.value)


def test_a_postgresql_store_without_its_extra_names_it_and_the_script_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    result = invoke("--db", "postgresql://nobody@127.0.0.1:9/none", "count")
    assert result.exit_code == 1
    assert 'pip install "clawrecall[postgres]"' in result.stderr
    assert "./scripts/install.sh --postgres" in result.stderr


def test_an_import_with_a_deferred_index_interrupted_leaves_the_index_unbuilt(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C means stop: the index a --defer-index import dropped is not built on the way out
    (minutes on a large store); the message says how to build it."""
    from clawrecall import Memory

    with Memory.open(pg_url) as mem:
        mem.add("already stored")
        assert mem._store.has_vector_index()
    source = tmp_path / "notes.jsonl"
    source.write_text(json.dumps({"content": "Ivan takes the 8:15 train"}) + "\n")

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Writes, "add_records", interrupted)
    result = invoke("--db", pg_url, "import", str(source), "--defer-index")
    assert result.exit_code == 1
    assert "`clawrecall index build`" in result.stderr
    with Memory.open(pg_url) as mem:
        assert not mem._store.has_vector_index()
