"""Shared fixtures: every engine test runs on a real SQLite file with the real local model."""

from __future__ import annotations

import os

import pytest

from clawrecall import Memory

# Tests must never read the developer's own config or data directory.
for _name in [n for n in os.environ if n.startswith("CLAWRECALL_")]:
    del os.environ[_name]


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWRECALL_HOME", str(tmp_path / "home"))


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "memory.db"


@pytest.fixture
def mem(db_path):
    m = Memory.open(db_path)
    yield m
    m.close()
