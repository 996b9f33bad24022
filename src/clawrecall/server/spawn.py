"""Run `clawrecall serve` as a child process on a free loopback port and wait until it is ready.

For the tests and benchmarks that must talk to a real server over real sockets.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import httpx


_LISTENING = re.compile(r"^clawrecall serving .* at (http://\S+) \(", re.MULTILINE)


@dataclass
class ServerProcess:
    url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def records(self) -> list[dict[str, Any]]:
        """The JSON log records written so far; a line still being written is left out."""
        lines = self.log().splitlines(keepends=True)
        return [json.loads(line) for line in lines if line.startswith("{") and line.endswith("\n")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def spawn_server(
    db: str | Path, *, args: Sequence[str] = (), env: Mapping[str, str] | None = None, log_path: Path | None = None,
    timeout_s: float = 600.0,
) -> Iterator[ServerProcess]:
    """`clawrecall --db DB serve --port 0 ARGS…`, yielded once `/health` reports the model loaded; stopped on exit.

    The server binds a port the system chooses and says which in its log (a port chosen here and
    bound there could be taken in between by a server another process starts). Its output goes to
    `log_path` (default: `DB.serve.log` beside the database). `timeout_s` only tells a hang from a slow
    start: on a machine busy with other work, importing the server alone can take minutes.
    """
    log_path = log_path or Path(f"{db}.serve.log")
    command = [sys.executable, "-m", "clawrecall.cli", "--db", str(db), "serve", "--port", "0", *args]
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    server = ServerProcess("", process, log_path)
    try:
        _wait_ready(server, timeout_s)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _bound_url(server: ServerProcess) -> str:
    """The URL the server says it listens at (its line for people, or its `serving` log record), once written."""
    if said := _LISTENING.search(server.log()):
        return said.group(1)
    for record in server.records():
        if record.get("msg") == "serving" and "port" in record:
            host = record["host"]
            return f"http://{f'[{host}]' if ':' in host else host}:{record['port']}"
    return ""


def _wait_ready(server: ServerProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"clawrecall serve exited with {server.process.returncode}:\n{server.log()}")
        server.url = server.url or _bound_url(server)
        try:
            if server.url and httpx.get(f"{server.url}/health", timeout=60).json().get("status") == "ok":
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"clawrecall serve was not ready after {timeout_s:g}s:\n{server.log()}")
