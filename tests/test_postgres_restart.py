"""A PostgreSQL server restart under an open store: calls fail clearly while it is down, then work again."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from clawrecall import Memory
from clawrecall.errors import StorageError


@pytest.fixture
def own_server():
    """A PostgreSQL server of this test's own (the shared one must not be stopped under other tests)."""
    import pgserver

    home = Path(tempfile.mkdtemp(prefix="clawrecall-pg-restart-"))
    server = pgserver.get_server(home / "data", cleanup_mode="stop")
    yield home / "data", server
    try:
        pgserver.get_server(home / "data", cleanup_mode="delete").cleanup()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_store_survives_a_server_restart(own_server):
    import pgserver

    data, server = own_server
    url = server.get_uri()
    with Memory.open(url) as mem:
        mem.add("written before the restart", user_id="alice")
        server.cleanup()  # pg_ctl stop: every pooled connection dies

        started = time.monotonic()
        with pytest.raises(StorageError, match="PostgreSQL"):
            mem.count()
        assert time.monotonic() - started < 30  # a clear error, not a hang

        restarted = pgserver.get_server(data, cleanup_mode="stop")
        assert restarted.get_uri() == url
        assert mem.count() == 1  # the pool reconnects on its own
        assert mem.add("Alice's cat is called Miso", user_id="alice").action == "created"
        assert [h.memory.content for h in mem.search("what is the cat's name?", user_id="alice", limit=1)] == [
            "Alice's cat is called Miso"
        ]
