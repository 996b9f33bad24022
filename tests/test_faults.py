"""Faults under a running `clawrecall serve`: the embedding provider down, slow, or answering garbage
(tests/embedding_stub_server.py), and a full disk. Each time the caller gets a clear error, nothing half
written is kept, what was acknowledged stays, and the store works again once the fault is gone.
(PostgreSQL restarted under a server: test_postgres_restart.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
from embedding_stub_server import StubEmbeddingServer
from reliability_workloads import check_sound, sqlite_integrity

from clawrecall import Memory
from clawrecall.scopes import Caller
from clawrecall.server.spawn import spawn_server

HEADERS = {"x-clawrecall-user": "alice", "x-clawrecall-session": "s1"}


@pytest.fixture
def provider_and_server(tmp_path):
    """A server embedding through an OpenAI-compatible provider (the stub) with a 1 s timeout."""
    stub = StubEmbeddingServer().start()
    env = {"CLAWRECALL_EMBEDDING__PROVIDER": "openai-compatible", "CLAWRECALL_EMBEDDING__BASE_URL": f"{stub.url}/v1",
           "CLAWRECALL_EMBEDDING__MODEL": "stub-embed", "CLAWRECALL_EMBEDDING__API_KEY": "k",
           "CLAWRECALL_EMBEDDING__TIMEOUT_S": "1", "CLAWRECALL_HOME": str(tmp_path / "home")}
    try:
        with spawn_server(tmp_path / "memory.db", env=env) as server, \
                httpx.Client(base_url=server.url, timeout=60, headers=HEADERS) as client:
            yield stub, server, client
    finally:
        stub.stop()


def memories(client) -> list[str]:
    return [m["content"] for m in client.get("/v1/memories", params={"limit": 1000}).json()["memories"]]


FAULTS = {"error500": "HTTP 500", "slow": "timed out after 1s", "nan": "not finite or are all zero",
          "zeros": "not finite or are all zero"}


def test_a_provider_down_slow_or_answering_garbage_keeps_new_memories_and_refuses_what_needs_a_vector(provider_and_server):
    """While the provider fails (HTTP 500 three times, a 3 s answer against a 1 s timeout, NaN or all-zero
    vectors), a new memory is kept without a vector (201; `writes.embed_later`), found by keyword at once and
    embedded once the provider answers; a hybrid search runs on its keyword legs and says so (`without_vectors`);
    a content update, a vector search and /embed need a vector now: 503 `embedding_error` that says why, within
    seconds, and nothing of the update is stored. The recall hook injects nothing (keyword scores are not relevance);
    agent_end still records the turn's messages, and the memory it captures is kept without a vector (it was
    acknowledged as queued), found by keyword at once and embedded once the provider answers; the E5-compatible
    /embed and /batch fail the same way instead of answering nulls. Once the provider answers again, writes work."""
    stub, server, client = provider_and_server
    kept = client.post("/v1/memories", json={"content": "Alice's cat is called Miso"}).json()["id"]
    for n, (fault, why) in enumerate(FAULTS.items()):
        stub.mode, stub.slow_s = fault, 3.0
        pending = client.post("/v1/memories", json={"content": f"Alice's dog is called Rex ({fault})"})
        assert pending.status_code == 201, (fault, pending.text)
        for call in (lambda: client.patch(f"/v1/memories/{kept}", json={"content": "Alice's cat is called Mochi"}),
                     lambda: client.post("/v1/search", json={"query": "what is the cat called", "mode": "vector"}),
                     lambda: client.post("/embed", json={"text": "what is the cat called"}),  # not nulls
                     lambda: client.post("/batch", json={"texts": ["a", "b"]})):
            started = time.monotonic()
            answer = call()
            assert time.monotonic() - started < 30, fault  # refused within seconds (bounded retries), not held
            assert answer.status_code == 503 and answer.json()["error"]["code"] == "embedding_error", (fault, answer.text)
            assert why in answer.json()["error"]["message"] and "Bearer k" not in answer.text, fault
        assert [m for m in memories(client) if "badge" not in m and "Rex" not in m] == ["Alice's cat is called Miso"]
        dog = client.post("/v1/search", json={"query": f"dog called Rex {fault}", "mode": "bm25"}).json()["results"]
        assert f"Alice's dog is called Rex ({fault})" in [h["memory"]["content"] for h in dog]  # kept, found by keyword

        hybrid = client.post("/v1/search", json={"query": "what is the cat called"})  # the keyword legs answer, and say so
        assert hybrid.status_code == 200 and why in hybrid.json()["without_vectors"], (fault, hybrid.text)
        assert kept in [h["memory"]["id"] for h in hybrid.json()["results"]]
        tool = client.post("/v1/tools/memory_recall", json={"query": "what is the cat called"}).json()
        assert "Miso" in tool["content"][0]["text"] and "(Found by keywords only:" in tool["content"][0]["text"]
        assert why in tool["details"]["without_vectors"]
        context = client.post("/v1/context", json={"query": "what is the cat called"}).json()
        assert why in context["without_vectors"] and kept in [r["id"] for r in context["results"]]
        keyword = client.post("/v1/search", json={"query": "cat called Miso", "mode": "bm25"}).json()["results"]
        assert [h["memory"]["id"] for h in keyword if "Miso" in h["memory"]["content"]] == [kept]  # (what else
        # the session kept comes along as its neighbours)
        turn = client.post("/v1/hooks/agent_end", json={"messages": [
            {"role": "user", "content": f"Remember that my badge number is 4{n} ({fault})"}]})
        assert turn.status_code == 200 and turn.json()["recorded"] == 1
        found = client.post("/v1/search", json={"query": f"badge number {fault}", "sources": ["message"],
                                                "mode": "bm25"}).json()["results"]
        assert f"Remember that my badge number is 4{n} ({fault})" in [h["memory"]["content"] for h in found]
        captured = f"Remember that my badge number is 4{n} ({fault})"
        deadline = time.monotonic() + 30
        while captured not in memories(client) and time.monotonic() < deadline:  # the capture is written in the background
            time.sleep(0.1)
        kept_without_vector = client.post("/v1/search", json={"query": f"badge number {fault}", "mode": "bm25"}).json()
        assert captured in [h["memory"]["content"] for h in kept_without_vector["results"]]
        recall = client.post("/v1/hooks/before_prompt_build", json={"prompt": "what is my cat called?"}).json()
        assert recall["prependContext"] is None and recall["skipped"] == "error"  # the prompt goes on without recall

    stub.mode = "ok"
    assert client.post("/v1/memories", json={"content": "Alice's dog is called Rex"}).status_code == 201
    assert client.post("/v1/memories", json={"content": "Alice's dog is called Rex"}).json()["action"] == "duplicate"
    assert client.patch(f"/v1/memories/{kept}", json={"content": "Alice's cat is called Mochi"}).status_code == 200
    server.process.terminate()
    server.process.wait(30)
    with Memory.open(server.log_path.with_name("memory.db"), check_embedding=False) as mem:
        assert sorted(r.content for r in mem.list(caller=Caller("alice"))) == sorted([
            "Alice's cat is called Mochi", "Alice's dog is called Rex",
            *(f"Alice's dog is called Rex ({fault})" for fault in FAULTS),
            *(f"Remember that my badge number is 4{n} ({fault})" for n, fault in enumerate(FAULTS))])
        stored = [np.frombuffer(v, dtype=np.float32) for (v,) in
                  mem._store.run("SELECT embedding FROM memories WHERE embedding IS NOT NULL")]
        assert stored and all(np.isfinite(v).all() and v.any() for v in stored)


# --- a full disk --------------------------------------------------------------------------------------

FILL = """
import json, resource, signal, sys
from clawrecall import Memory
from clawrecall.errors import ClawrecallError
if len(sys.argv) > 2:  # no file system of its own to fill: a file size limit stands in for it
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
mem = Memory.open(sys.argv[1])
n = 0
while True:
    batch = [{"content": f"note {n + i}: " + "the tide tables for the north pier, " * 8} for i in range(50)]
    try:
        ids = [r.id for r in mem.add_many(batch, dedup=False)]
    except ClawrecallError as exc:
        print(json.dumps({"error": type(exc).__name__, "code": exc.code, "message": str(exc)}), flush=True)
        break
    print(json.dumps({"acked": ids}), flush=True)
    n += 50
mem.close()
"""


@contextmanager
def small_file_system(tmp_path: Path, size_mb: int):
    """(a directory, the extra child arguments): a tmpfs of `size_mb` when this process may mount one (root),
    else a plain directory and an RLIMIT_FSIZE of that size on the child."""
    where = tmp_path / "small"
    where.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(where)], capture_output=True, check=False).returncode == 0
    try:
        yield where, ([] if mounted else [str(size_mb * 1024 * 1024)]), ("tmpfs" if mounted else "RLIMIT_FSIZE")
    finally:
        if mounted:
            subprocess.run(["umount", str(where)], check=True)


def test_a_full_disk_is_a_clear_error_and_the_store_stays_intact(tmp_path):
    with small_file_system(tmp_path, 4) as (where, extra, how):
        db = where / "memory.db"
        child = subprocess.run([sys.executable, "-c", FILL, str(db), *extra], capture_output=True, text=True,
                               timeout=240, check=False)
        lines = [json.loads(line) for line in child.stdout.splitlines()]
        assert child.returncode == 0, (how, child.stderr[-2000:])
        acked = [i for line in lines[:-1] for i in line["acked"]]
        error = lines[-1]
        assert len(acked) >= 50, (how, lines[-1])
        assert error["error"] == "StorageError" and error["code"] == "storage_error", (how, error)
        # ENOSPC on a full file system; EFBIG past the size limit, which SQLite reports as an I/O error
        said = "database or disk is full" if how == "tmpfs" else "disk I/O error"
        assert error["message"] == f"cannot write to SQLite database {db}: {said}", (how, error)
        assert sqlite_integrity(str(db)) == []
        with Memory.open(db) as mem:  # every acknowledged batch is there, and reads work on the full disk
            assert mem._store.integrity_problems() == []
            assert set(mem._store.memories.fetch(acked)) == set(acked)
            assert mem.search("tide tables north pier", mode="bm25", limit=1)
        copy = tmp_path / "copy.db"  # room again: the same store takes writes
        for suffix in ("", "-wal"):
            if Path(f"{db}{suffix}").exists():
                copy.with_name(copy.name + suffix).write_bytes(Path(f"{db}{suffix}").read_bytes())
    with Memory.open(copy) as mem:
        assert set(mem._store.memories.fetch(acked)) == set(acked)
    check_sound(str(copy))


def test_a_write_that_may_embed_later_is_kept_while_the_provider_is_down_and_embedded_after(db_target, tmp_path):
    """`embed_later` (`writes.embed_later`, on by default; agent_end's capture always): kept without a vector,
    undeduplicated, found by keyword; the backfill embeds it once the provider answers. Without it the add
    fails and stores nothing."""
    from clawrecall.errors import EmbeddingError

    stub = StubEmbeddingServer().start()
    try:
        embedding = {"provider": "openai-compatible", "base_url": f"{stub.url}/v1", "model": "stub-embed",
                     "api_key": "k", "timeout_s": 1}
        with Memory.open(db_target, embedding=embedding) as mem:
            first = mem.add("Alice's badge number is 4417", user_id="alice")
            stub.mode = "error500"
            with pytest.raises(EmbeddingError):
                mem.add("Alice parks on level 3", user_id="alice", embed_later=False)
            kept = mem.add("Alice parks on level 3", user_id="alice")  # writes.embed_later, the default
            again = mem.add("Alice's badge number is 4417", user_id="alice", embed_later=True)
            assert kept.action == again.action == "created"  # not deduplicated: there is no vector to compare
            assert mem._store.vectors([kept.id]) == {} and mem.upkeep.unembedded() == 2
            [hit] = mem.search("parks level", user_id="alice", mode="bm25", min_score=0)
            assert hit.memory.id == kept.id
            hybrid = mem.search("where does alice park", user_id="alice", min_score=0)  # keyword legs, and it says so
            assert kept.id in {h.memory.id for h in hybrid} and "HTTP 500" in hybrid.without_vectors
            with pytest.raises(EmbeddingError):
                mem.search("where does alice park", user_id="alice", mode="vector")
            stub.mode = "ok"
            assert mem.upkeep.backfill() == 2 and mem.upkeep.unembedded() == 0
            assert set(mem._store.vectors([kept.id, first.id])) == {kept.id, first.id}
            assert kept.id in {h.memory.id for h in mem.search("parks level", user_id="alice", mode="vector", min_score=0)}
            assert mem.search("where does alice park", user_id="alice", min_score=0).without_vectors is None
    finally:
        stub.stop()
