"""Fixtures for tests against a real `clawrecall serve` process: its data folder, its store and the server.

A test module imports these and defines `tokens` (the tokens it needs, made before the server starts).
"""

from __future__ import annotations

import pytest

from clawrecall.server.spawn import spawn_server


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("server")


@pytest.fixture(scope="module")
def db(home):
    return home / "memory.db"


@pytest.fixture(scope="module")
def server(db, home, tokens):
    with spawn_server(db, env={"CLAWRECALL_HOME": str(home / "home")}) as running:
        yield running
