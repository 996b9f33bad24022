"""The generated parts of the docs: the CLI reference and every sample session, made by running the code.

README.md and docs/*.md hold cog blocks (`<!-- [[[cog … ]]] -->` … `<!-- [[[end]]] -->`) that call
this module, so a sample shows what the commands print today, not what they printed once:

    python scripts/cogdocs.py            # regenerate every block
    python scripts/cogdocs.py --check    # fail if a block is stale (tests/test_docs.py runs this)

A sample runs real `clawrecall` commands, in this process, on a store in a temporary directory
that nothing else reads. It is made reproducible, not edited: the random source the code draws
ids and token secrets from is seeded (and the host and process a worker is named after are fixed),
the clock stands still during a command and moves one second between commands, the terminal is
100 columns, and the temporary directories are shown as the default data directory and a home
folder. The settings are the defaults, so the embedding model is the bundled one (what a user gets):
its scores are the same run after run on one machine; on another CPU a number printed to four
decimals (`--explain`) may differ in its last digit, and regenerating is the answer.
"""

from __future__ import annotations

import atexit
import io
import os
import random
import re
import shlex
import shutil
import socket
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
START = datetime(2026, 3, 16, 9, 14, tzinfo=UTC)  # the clock of every sample
SHOWN_HOME = "~/.local/share/clawrecall"  # the default data directory, as a reader's would be
SHOWN_DIR = "/home/ada/work"  # the working directory, as long as the /tmp/cXXXXXXXX it stands for


def _out(text: str) -> None:
    import cog  # only importable while cog runs this module

    cog.outl(text)


class Session:
    """A shell session for one document: its store and clock last from block to block."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="c", dir="/tmp"))
        if len(str(self.dir)) != len(SHOWN_DIR):  # a path is shown in its place: tables stay aligned
            raise RuntimeError(f"{self.dir} is not as long as {SHOWN_DIR}, which stands for it")
        atexit.register(shutil.rmtree, self.dir, True)  # a document's blocks share it until cog is done
        self.home = self.dir / "home"
        self.home.mkdir()
        self.rng = random.Random(0)
        self.now = START
        self.ids: dict[str, str] = {}
        self.urls: dict[str, str] = {}  # a sample's PostgreSQL URL as shown -> the one it stands for

    def file(self, name: str, text: str, show: bool | str = True, command: str | None = None) -> None:
        """Write a file the next commands read (a name under SHOWN_HOME is in the data directory), and
        show it as `cat` would (in the block), or as the `command` that wrote it, or as a block of its
        own in the language `show` names (`show="toml"`), or not at all."""
        text = textwrap.dedent(text).lstrip("\n")
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace(SHOWN_DIR, str(self.dir)), encoding="utf-8")  # the folder it stands for
        if command:
            self._lines.append(f"$ {command}")
        elif isinstance(show, str):
            _out(f"```{show}\n{text.rstrip()}\n```")
        elif show:
            self._lines.append(f"$ cat {name}")
            self._lines.append(text.rstrip("\n"))

    def curl(self, path: str, body: dict | None = None, user: str | None = None) -> None:
        """A request to `clawrecall serve` on the session's store (its app, run in this process), shown as
        the `curl` that sends it, with the answer: a POST of `body` if given, else a GET."""
        import json

        from fastapi.testclient import TestClient

        from clawrecall import Memory
        from clawrecall.auth import TokenStore
        from clawrecall.server.app import create_app

        headers = {"X-Clawrecall-User": user} if user else {}
        shown = [f"curl -s localhost:8765{path}", *(f'-H "{k}: {v}"' for k, v in headers.items())]
        if body is not None:
            shown += ['-H "Content-Type: application/json"', f"-d '{json.dumps(body)}'"]
            body = json.loads(json.dumps(body).replace(SHOWN_DIR, str(self.dir)))
        with self._fixed_world(), Memory.open() as mem:
            client = TestClient(create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True),
                                base_url="http://127.0.0.1:8765")
            answer = client.get(path, headers=headers) if body is None else client.post(path, json=body, headers=headers)
        self._lines.append("$ " + " ".join(shown))
        self._lines.append(self._shown(answer.text))

    def postgres(self, shown: str) -> str:
        """A new PostgreSQL database with pgvector, for a sample that reads another system's: on a server this
        process starts once (`pgserver`, the tests' own), its URL written as `shown` in commands and output."""
        import psycopg

        server = _pg_server()
        name = f"sample_{len(self.urls)}"
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
        url = server.replace("/postgres?", f"/{name}?")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        self.urls[shown] = url
        return url

    def _path(self, name: str) -> Path:
        """Where a path a sample names is: one under SHOWN_HOME in the data directory, else in the session's."""
        return self.home / name[len(SHOWN_HOME) + 1:].rstrip("/") if name.startswith(SHOWN_HOME + "/") else self.dir / name

    def replace(self, name: str, old: str, new: str) -> None:
        """Change a file the session wrote, shown as the `sed -i` that would."""
        path = self.dir / name
        path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
        self._lines.append(f"$ sed -i 's/{old}/{new}/' {name}")

    @contextmanager
    def block(self) -> Iterator[Session]:
        """One fenced block of the document: the commands run in it and what they printed."""
        self._lines: list[str] = []
        yield self
        _out("```\n" + "\n".join(self._lines) + "\n```")

    def run(self, commands: str, keep: str | None = None) -> str:
        """Run each line (`clawrecall …`) and record it with its output; the output of the last one is returned.

        `{name}` in a line is an id an earlier command printed, kept by `keep="name"` (the first
        short id in its output) or `keep="name@text"` (the first on the line holding text), so a
        sample never spells out an id it cannot know."""
        output = ""
        for line in textwrap.dedent(commands).strip().splitlines():
            line = line.format(**self.ids)
            self._lines.append(f"$ {line}")
            output = self._run(self._real(line))
            if output:
                self._lines.append(output)
        if keep:
            keep, _, on = keep.partition("@")  # "name@text": the id on the line that holds text
            lines = [line for line in output.splitlines() if on in line]
            found = re.search(r"\b[0-9a-f]{8}\b", lines[0] if lines else "")
            if found is None:
                raise ValueError(f"no id to keep as {keep!r} in: {output}")
            self.ids[keep] = found.group()
        return output

    def show(self, commands: str, keep: str | None = None) -> None:
        """A block of its own holding these commands."""
        with self.block():
            self.run(commands, keep)

    def python(self, code: str, show: bool = True) -> None:
        """A Python block, run here on the session's store, then what it printed (`show=False`: a
        setup the page describes in words, run but not shown)."""
        code = textwrap.dedent(code).strip()
        printed = io.StringIO()
        with self._fixed_world(), redirect_stdout(printed):
            exec(compile(code, "<sample>", "exec"), {})  # noqa: S102 (the docs' own sample, as a reader would run it)
        if show:
            _out(f"```python\n{code}\n```\n\nprints\n\n```\n{self._shown(printed.getvalue())}\n```")

    def _run(self, line: str) -> str:
        """One `clawrecall …` line (after `NAME=value`s it is run with; or `ls FOLDER`), its output through `| head -N`, `| tail -N` or `| grep TEXT` if it ends so."""
        command, *filters = line.split(" | ")
        args = shlex.split(command)
        env = {}
        while "=" in args[0]:  # `NAME=value clawrecall …`: a variable set for this command
            name, _, value = args.pop(0).partition("=")
            env[name] = value
        if args[0] == "ls" and len(args) == 2:  # what the commands wrote into a folder
            return "\n".join(sorted(entry.name for entry in self._path(args[1]).iterdir()))
        if args[0] != "clawrecall":
            raise ValueError(f"a sample runs clawrecall commands and ls FOLDER only: {line}")
        from clawrecall.cli import cli

        with self._fixed_world():
            result = CliRunner().invoke(cli, args[1:], env=env)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise RuntimeError(f"{line}: {result.exception!r}") from result.exception
        lines = self._shown(result.output).splitlines()
        for name, _, arg in (f.strip().partition(" ") for f in filters):
            if name in ("head", "tail"):
                n = int(arg.lstrip("-n "))
                lines = lines[:n] if name == "head" else lines[-n:]
            elif name == "grep":
                lines = [x for x in lines if shlex.split(arg)[0] in x]
            else:
                raise ValueError(f"a sample filters with head, tail or grep only: {line}")
        return "\n".join(lines)

    def _real(self, line: str) -> str:
        for shown, url in self.urls.items():
            line = line.replace(shown, url)
        return line

    def _shown(self, output: str) -> str:
        from clawrecall._urls import redacted_url

        for shown, url in self.urls.items():
            output = output.replace(url, shown).replace(redacted_url(url), shown)  # a summary hides the password
        return output.rstrip("\n").replace(str(self.home), SHOWN_HOME).replace(str(self.dir), SHOWN_DIR)

    @contextmanager
    def _fixed_world(self) -> Iterator[None]:
        """The clock stands at `self.now` (a second later than the last command's), random bytes come from
        the seeded generator, the environment names only the session's store, the cwd is the session's."""
        import clawrecall._time as clock

        self.now += timedelta(seconds=1)
        now = self.now
        env = {name: value for name, value in os.environ.items() if not name.startswith("CLAWRECALL_")}
        env.update(CLAWRECALL_HOME=str(self.home), COLUMNS="100", HF_HUB_OFFLINE="1")  # the defaults, as a new user has them
        saved_env = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)

        class Frozen(datetime):
            @classmethod
            def now(cls, tz=None):  # type: ignore[override]
                return now if tz is not None else now.replace(tzinfo=None)

        saved = (clock.datetime, os.urandom, random._urandom, os.getpid, socket.gethostname,  # type: ignore[attr-defined]
                 os.getcwd())
        clock.datetime = Frozen  # type: ignore[misc]
        os.urandom = random._urandom = self.rng.randbytes  # type: ignore[attr-defined]
        os.getpid, socket.gethostname = (lambda: 4242), (lambda: "host")  # in a worker's name
        os.chdir(self.dir)
        sys.path.insert(0, str(self.dir))  # modules a sample writes (job handlers) import from there
        try:
            yield
        finally:
            clock.datetime, os.urandom, random._urandom, os.getpid, socket.gethostname, cwd = saved  # type: ignore[attr-defined]
            os.chdir(cwd)
            sys.path.remove(str(self.dir))
            os.environ.clear()
            os.environ.update(saved_env)


_PG: list[str] = []  # the URL of the server `Session.postgres` started, once per process


def _pg_server() -> str:
    if not _PG:
        import pgserver

        home = Path(tempfile.mkdtemp(prefix="clawrecall-docs-pg-"))
        server = pgserver.get_server(home / "data", cleanup_mode="delete")
        atexit.register(shutil.rmtree, home, True)
        atexit.register(server.cleanup)  # runs first: the server stops, then its folder goes
        _PG.append(server.get_uri())
    return _PG[0]


# -- the CLI reference ---------------------------------------------------------------------------
def commands() -> list[tuple[str, click.Command]]:
    """Every command and subcommand, by its full name (`clawrecall jobs list`), in the order of the help."""
    from clawrecall.cli import cli

    found: list[tuple[str, click.Command]] = []

    def walk(command: click.Command, path: str) -> None:
        found.append((path, command))
        if isinstance(command, click.Group):
            for name in sorted(command.commands):
                walk(command.commands[name], f"{path} {name}")

    walk(cli, "clawrecall")
    return found


def help_text(path: str) -> str:
    from clawrecall.cli import cli

    result = CliRunner().invoke(cli, [*path.split()[1:], "--help"], env={"COLUMNS": "100"}, terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output.rstrip("\n")


def cli_reference() -> None:
    """Each command's `--help`, under a heading of its full name."""
    for path, command in commands():
        level = "#" * min(2 + path.count(" "), 4)
        _out(f"{level} `{path}`\n\n```\n{help_text(path)}\n```\n")


# -- running cog over the docs ------------------------------------------------------------------
def documents() -> list[Path]:
    return [p for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))] if "[[[cog" in p.read_text()]


def main(argv: list[str]) -> int:
    from cogapp import Cog

    check = "--check" in argv
    args = ["cog", "-I", str(Path(__file__).parent), "--check" if check else "-r", *map(str, documents())]
    return Cog().main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
