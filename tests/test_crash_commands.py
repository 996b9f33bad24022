"""kill -9 of `import`, `purge` and `migrate` in the middle of their work, on SQLite and PostgreSQL: the store
is sound afterwards, and the same command run again finishes the work, leaving what an uninterrupted run leaves.

One kill per command here, after about half its writing statements; `bench/reliability.py crash` runs more."""

from __future__ import annotations

import itertools
import uuid

import pytest
from conftest import _admin, with_database
from reliability_workloads import commands, crash_command

ROUNDS = 1

@pytest.fixture
def new_target(request, tmp_path):
    """A function giving a fresh empty store location of the test's backend each call."""
    n = itertools.count()
    if request.param == "sqlite":
        yield lambda: str(tmp_path / f"store-{next(n)}.db")
        return
    server = request.getfixturevalue("pg_server")
    made: list[str] = []

    def database() -> str:
        made.append("t_" + uuid.uuid4().hex[:12])
        _admin(server, f"CREATE DATABASE {made[-1]}")
        return with_database(server, made[-1])

    yield database
    for name in made:
        _admin(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.parametrize("new_target", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("name", ["import", "purge", "migrate"])
def test_kill_9_of_a_command_leaves_a_store_the_command_finishes(name, new_target, tmp_path):
    command = next(c for c in commands(tmp_path, 200) if c.name == name)
    report = crash_command(command, new_target, ROUNDS)
    assert report["write_statements"] >= 2 and len(report["killed_at"]) == ROUNDS
