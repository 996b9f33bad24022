"""A real MariaDB server for the tests that read a MySQL database (ShadowDB's MySQL backend): Debian's
`mariadb-server`, installed here when missing and we may (as CI does), initialised in a temporary directory
and started on a free port of 127.0.0.1, once per test module (`server()`, a context manager).

Its zone is +02:00, not UTC, as many servers' are: a reader that took the server's times for UTC reads
them two hours off."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

import pytest

ZONE = "+02:00"


def _programs() -> tuple[str, str]:
    """mariadbd and mariadb-install-db, installed when missing and we are root with apt-get; else one clear skip."""
    def found() -> tuple[str | None, str | None]:
        path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
        return shutil.which("mariadbd", path=path), shutil.which("mariadb-install-db", path=path)

    server, install = found()
    if (server is None or install is None) and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
        subprocess.run(["apt-get", "install", "-y", "-qq", "mariadb-server"], capture_output=True, check=False,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        server, install = found()
    if server is None or install is None:
        pytest.skip("MySQL tests need Debian's mariadb-server (apt-get install mariadb-server), which cannot be "
                    "installed here")
    return server, install


@dataclass
class Server:
    port: int
    socket: Path

    def admin(self):
        import pymysql

        return pymysql.connect(unix_socket=str(self.socket), user="root", autocommit=True)

    def database(self, name: str, user: str, password: str) -> str:
        """A new database and a user who owns it: its URL, as ShadowDB's `connectionString` would give it."""
        with self.admin() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
            cur.execute("CREATE USER IF NOT EXISTS %s@'127.0.0.1' IDENTIFIED BY %s", (user, password))
            cur.execute(f"GRANT ALL ON `{name}`.* TO %s@'127.0.0.1'", (user,))
        return f"mysql://{quote(user, safe='')}:{quote(password, safe='')}@127.0.0.1:{self.port}/{name}"


@contextmanager
def server() -> Iterator[Server]:
    mariadbd, install_db = _programs()
    home = Path(tempfile.mkdtemp(prefix="clawrecall-mariadb-"))
    data, sock, log = home / "data", home / "mysqld.sock", home / "error.log"
    as_root = ["--user=root"] if os.geteuid() == 0 else []  # mariadbd refuses root unless told
    subprocess.run([install_db, "--no-defaults", f"--datadir={data}", "--auth-root-authentication-method=normal",
                    "--skip-test-db", "--innodb-log-file-size=4M", *as_root], check=True, capture_output=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([mariadbd, "--no-defaults", f"--datadir={data}", f"--socket={sock}", f"--port={port}",
                             "--bind-address=127.0.0.1", "--skip-name-resolve", f"--log-error={log}",
                             f"--pid-file={home / 'mysqld.pid'}", f"--default-time-zone={ZONE}",
                             "--innodb-buffer-pool-size=16M", "--innodb-log-file-size=4M", *as_root],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        running = Server(port, sock)
        _wait(proc, running, log)
        yield running
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(home, ignore_errors=True)


def _wait(proc: subprocess.Popen, running: Server, log: Path) -> None:
    """Until the server answers on its socket (polled), or exits."""
    import pymysql

    while proc.poll() is None:
        try:
            running.admin().close()
            return
        except pymysql.MySQLError:
            time.sleep(0.02)
    raise RuntimeError(f"mariadbd exited ({proc.returncode}): {log.read_text(errors='replace')[-2000:]}")
