"""`reembed` moves a store to another embedding model: the new vectors are staged until every row
has one and swapped in at once, so searches keep the old model meanwhile, a failure or a kill -9
leaves the store as it was, a second run resumes, and no store is left mixing models. `doctor`
reports a mixed store and an unfinished re-embedding. Against a real HTTP embedding server on
127.0.0.1 (tests/embedding_stub_server.py), on both backends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from embedding_stub_server import StubEmbeddingServer, fake_embed

from clawrecall import Memory
from clawrecall.cli import cli
from clawrecall.errors import EmbeddingError, EmbeddingMismatchError, StorageError, ValidationError
from clawrecall.scopes import Caller

HASH = "hash/hashed-word-trigrams"
STUB = "openai-compatible/stub-embed"


@pytest.fixture
def stub():
    server = StubEmbeddingServer().start()
    yield server
    server.stop()


def remote(stub: StubEmbeddingServer, model: str = "stub-embed", **kw) -> dict:
    return {"provider": "openai-compatible", "base_url": stub.url + "/v1", "model": model, **kw}


def remote_config(stub: StubEmbeddingServer, path: Path) -> Path:
    path.write_text(f'[embedding]\nprovider = "openai-compatible"\nbase_url = "{stub.url}/v1"\nmodel = "stub-embed"\n')
    return path


def fill(db: str, n: int) -> list[str]:
    """n memories embedded by the hash model; their ids."""
    with Memory.open(db) as mem:
        return [r.id for r in mem.add_many([{"content": f"fact number {i} about topic {i * 7}"} for i in range(n)],
                                           dedup=False)]


def models(mem: Memory) -> dict[str | None, int]:
    """How many rows each model embedded (None: rows awaiting a vector)."""
    rows = mem._store.run("SELECT embedding_model, count(*) FROM memories WHERE embedding IS NOT NULL GROUP BY embedding_model")
    unembedded = mem.upkeep.unembedded()
    return {m: n for m, n in rows} | ({None: unembedded} if unembedded else {})


def texts_embedded(stub: StubEmbeddingServer, contents: set[str]) -> int:
    """How many of these texts the server was asked to embed."""
    return sum(1 for r in stub.posts() for t in r.body["input"] if t in contents)


def unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def as_stored(mem: Memory, v: np.ndarray) -> np.ndarray:
    """A vector as the store keeps it: PostgreSQL's are half precision."""
    return v.astype(np.float16).astype(np.float32) if mem._store.dialect.name == "postgres" else v


def assert_stub_vectors(mem: Memory) -> None:
    """Every row holds the stub model's vector of its own text."""
    rows = mem._store.run("SELECT id, content FROM memories")
    vectors = mem._store.vectors([str(i) for i, _ in rows])
    assert len(vectors) == len(rows)
    for memory_id, content in rows:
        assert np.allclose(vectors[str(memory_id)], as_stored(mem, unit(fake_embed(content))), atol=1e-6), content


def test_every_row_of_every_kind_moves_to_the_new_model_in_one_swap(db_target, stub, tmp_path):
    fill(db_target, 20)
    notes = tmp_path / "notes.md"
    notes.write_text("# Garden\n\nThe tomatoes need water every morning.\n")
    alice = Caller("alice")
    with Memory.open(db_target) as mem:
        mem.conversations.log([{"role": "user", "content": "what does the garden need?"},
                               {"role": "assistant", "content": "water every morning"},
                               {"role": "assistant", "content": "The beds need mulch in spring. " * 200}],  # windows too
                              caller=alice, session_id="s1")
        mem.files.ingest(notes, caller=alice)
        mem.upkeep.backfill()
        mem.delete(mem.list(limit=1)[0].id)  # deleted rows are re-embedded too: they can be undeleted
        # some rows still await their vector, as messages and chunks do right after they are written
        mem._store.run("UPDATE memories SET embedding = NULL, embedding_model = NULL WHERE kind = 'message'")
        total = mem._store.run("SELECT count(*) FROM memories")[0][0]
        kinds = {k for (k,) in mem._store.run("SELECT DISTINCT kind FROM memories")}
    assert kinds == {"memory", "message", "chunk", "window"} and total > 20

    reported: list[tuple[int, int]] = []
    old = Memory.open(db_target)  # a process on the old model, open across the swap
    assert old.search("fact number 3", mode="vector")
    with Memory.open(db_target, check_embedding=False, embedding=remote(stub)) as mem:
        assert mem.reembed(batch_size=8, progress=lambda done, all_: reported.append((done, all_))) == total
        assert models(mem) == {STUB: total}
        assert mem._store.staged.rows() == 0 and mem._store.staged.target() is None
        assert str(mem.upkeep.stored_fingerprint()) == "openai-compatible/stub-embed (8 dims)"
        assert mem.upkeep.reembed_state().model_dump() == {"target": None, "staged": 0, "other_model": 0, "other_dimensions": 0}
    # it searches and writes no more (one clear line, not a traceback), and writes nothing of the old model
    with pytest.raises(StorageError, match="^the stored vectors have 8 dimensions, the query 384: run `clawrecall reembed`"):
        old.search("fact number 3", mode="vector")
    with pytest.raises(StorageError, match="8 dimensions"):
        old.add("Olga's old-model memory")
    old.close()
    assert reported[0] == (0, total) and reported[-1] == (total, total)
    assert [d for d, _ in reported] == sorted(d for d, _ in reported)
    with Memory.open(db_target, embedding=remote(stub)) as mem:  # consistent now: opens and searches by vector
        [hit] = mem.search("tomatoes water morning", user_id="alice", sources=["chunk"], mode="vector", limit=1)
        assert "tomatoes" in hit.memory.content
        assert mem.search("fact number 3 about topic 21", mode="vector")
        assert_stub_vectors(mem)


def test_a_provider_failing_half_way_changes_nothing_and_the_next_run_resumes(db_target, stub):
    ids = fill(db_target, 40)
    with Memory.open(db_target) as mem:
        contents = {r.content for r in mem._store.memories.fetch(ids).values()}

    def fail_after_two_batches(done: int, total: int) -> None:
        if done >= 16:
            stub.mode = "error500"

    with Memory.open(db_target, check_embedding=False, embedding=remote(stub)) as mem:
        with pytest.raises(EmbeddingError, match="500"):
            mem.reembed(batch_size=8, progress=fail_after_two_batches)
        assert mem._store.staged.rows() == 16
    with Memory.open(db_target) as mem:  # the old model still serves every row
        assert mem.upkeep.stored_fingerprint().model == "hashed-word-trigrams"
        assert models(mem) == {HASH: 40}
        assert mem.search("fact number 33 about topic 231", mode="vector")[0].memory.content == "fact number 33 about topic 231"
        state = mem.upkeep.reembed_state()
        assert (state.staged, str(state.target)) == (16, "openai-compatible/stub-embed (8 dims)")

    stub.mode = "ok"
    stub.requests.clear()
    with Memory.open(db_target, check_embedding=False, embedding=remote(stub)) as mem:
        assert mem.reembed(batch_size=8) == 40
        assert texts_embedded(stub, contents) == 40 - 16  # the staged ones were not embedded again
        assert models(mem) == {STUB: 40} and mem._store.staged.rows() == 0
        assert_stub_vectors(mem)


def test_a_run_for_another_model_starts_over(db_target, stub):
    ids = fill(db_target, 24)
    with Memory.open(db_target) as mem:
        contents = {r.content for r in mem._store.memories.fetch(ids).values()}
    def fail_after_one_batch(done: int, total: int) -> None:
        if done >= 8:
            stub.mode = "error500"

    with Memory.open(db_target, check_embedding=False, embedding=remote(stub)) as mem:
        with pytest.raises(EmbeddingError):
            mem.reembed(batch_size=8, progress=fail_after_one_batch)
        assert mem._store.staged.rows() == 8
    stub.mode = "ok"
    stub.requests.clear()
    with Memory.open(db_target, check_embedding=False, embedding=remote(stub, "stub-other")) as mem:
        assert mem.reembed(batch_size=8) == 24
        assert texts_embedded(stub, contents) == 24  # the other model's staged vectors were dropped
        assert models(mem) == {"openai-compatible/stub-other": 24}


def test_rows_written_or_changed_during_a_reembed_are_embedded_again_before_the_swap(db_target, stub):
    """And a process still on the old model cannot write after the swap, even with a new model of the same size."""
    ids = fill(db_target, 30)
    same_size = remote(stub, "text-embedding-3-small", dimensions=384)
    new_model = "openai-compatible/text-embedding-3-small"
    writer = Memory.open(db_target)  # a server on the old model, writing while the store is re-embedded
    changes: dict[str, str] = {}

    def write_meanwhile(done: int, total: int) -> None:
        if done >= 8 and not changes:
            changes["added"] = writer.add("Zoe joined the team in March").id
            writer.update(ids[0], content="fact number zero was corrected")  # staged already: its vector is stale
            writer.forget(ids[1])
            changes["changed"] = ids[0]

    try:
        with Memory.open(db_target, check_embedding=False, embedding=same_size) as mem:
            assert mem.reembed(batch_size=8, progress=write_meanwhile) == 30
            assert models(mem) == {new_model: 30} and mem._store.staged.rows() == 0
            vectors = mem._store.vectors([changes["changed"], changes["added"]])
            assert np.allclose(vectors[changes["changed"]], as_stored(mem, unit(fake_embed("fact number zero was corrected", 384))), atol=1e-6)
            assert np.allclose(vectors[changes["added"]], as_stored(mem, unit(fake_embed("Zoe joined the team in March", 384))), atol=1e-6)
        # the old-model writer checked the store's model before the swap: its next write is refused, not mixed in
        with pytest.raises(EmbeddingMismatchError, match=f"re-embedded with {new_model} \\(384 dims\\)"):
            writer.add("Yusuf prefers tea")
        with pytest.raises(EmbeddingMismatchError):
            writer.update(ids[2], content="fact number two, old model")
    finally:
        writer.close()
    with Memory.open(db_target, embedding=same_size) as mem:
        assert models(mem) == {new_model: 30}
        assert mem.get(ids[2]).content == "fact number 2 about topic 14"


def test_a_run_overtaken_by_another_adopts_nothing(db_target, stub):
    """Two `reembed`s at once, for two models: the one that finishes first wins; the other stops
    with a clear error instead of swapping in vectors staged for another model."""
    fill(db_target, 24)
    other = Memory.open(db_target, check_embedding=False, embedding=remote(stub, "stub-other"))

    def overtaken(done: int, total: int) -> None:
        if done == 8:
            assert other.reembed(batch_size=8) == 24

    try:
        with Memory.open(db_target, check_embedding=False, embedding=remote(stub)) as mem:
            with pytest.raises(StorageError, match="another `clawrecall reembed` finished this one's work or began for"):
                mem.reembed(batch_size=8, progress=overtaken)
    finally:
        other.close()
    with Memory.open(db_target, embedding=remote(stub, "stub-other")) as mem:
        assert models(mem) == {"openai-compatible/stub-other": 24}
        assert mem.upkeep.reembed_state().staged == 0


def test_batch_size_is_checked(mem):
    with pytest.raises(ValidationError, match="batch_size must be between 1 and 4096"):
        mem.reembed(batch_size=0)


# -- the CLI: doctor, and kill -9 ------------------------------------------------------------------
def cli_json(db: str, *args: str, code: int = 0) -> dict:
    result = CliRunner().invoke(cli, ["--db", db, *args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def checks(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def test_doctor_reports_a_mixed_store_and_reembed_fixes_it(db_target):
    ids = fill(db_target, 5)
    with Memory.open(db_target) as mem:
        # what an older release's failed re-embedding left: rows of another model, some of other dimensions
        records, vectors = mem._store.memories.fetch(ids[:2]), mem._store.vectors(ids[:2])
        mem._store.drop_vector_index()  # as it did first (PostgreSQL's index admits only the old dimensions)
        mem._store.memories.update(records[ids[0]].model_copy(update={"embedding_model": "openai/text-embedding-3-small"}),
                         unit([1.0] * 8))
        mem._store.memories.update(records[ids[1]].model_copy(update={"embedding_model": "openai/text-embedding-3-small"}),
                         vectors[ids[1]])
    report = cli_json(db_target, "doctor", code=1)
    vectors = checks(report)["vectors"]
    assert report["ok"] is False and vectors["status"] == "fail"
    assert vectors["detail"] == (
        f"the store mixes models: 2 rows embedded by another model than {HASH}, 1 vector of other dimensions "
        "than 384; searches compare vectors that do not belong together: run `clawrecall reembed` (with "
        f"{HASH} (384 dims) configured, or the model to move to)")
    assert cli_json(db_target, "reembed")["reembedded"] == 5
    report = cli_json(db_target, "doctor")
    assert report["ok"] is True and checks(report)["vectors"]["detail"] == f"every vector is from {HASH} (384 dims)"


def test_kill_9_during_reembed_leaves_the_old_model_serving_and_a_rerun_finishes(db_target, stub, tmp_path):
    ids = fill(db_target, 40)
    with Memory.open(db_target) as mem:
        contents = {r.content for r in mem._store.memories.fetch(ids).values()}
    config = remote_config(stub, tmp_path / "remote.toml")
    # ten of the texts are answered (two batches of five), then the stub holds its answers: the kill comes
    # mid-run however long the watcher below takes to see the ten rows
    answer, held = stub.answer, threading.Event()

    def ten_then_hold(method, path, body, headers):
        if texts_embedded(stub, contents) > 10:
            held.wait(60)
        return answer(method, path, body, headers)

    stub.answer = ten_then_hold
    process = subprocess.Popen(
        [sys.executable, "-m", "clawrecall.cli", "--db", db_target, "--config", str(config), "reembed",
         "--batch-size", "5", "--json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy(),
    )
    with Memory.open(db_target) as watcher:
        deadline = time.monotonic() + 60
        while watcher._store.staged.rows() < 10 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    held.set()
    stub.answer = answer
    assert process.returncode == -signal.SIGKILL, process.stderr.read()

    with Memory.open(db_target) as mem:  # the old model, as configured before: opens and searches
        staged = mem._store.staged.rows()
        assert 10 <= staged < 40
        assert mem.upkeep.stored_fingerprint().model == "hashed-word-trigrams" and models(mem) == {HASH: 40}
        assert mem._store.integrity_problems() == []
        assert mem.search("fact number 12 about topic 84", mode="vector")[0].memory.content == "fact number 12 about topic 84"
    report = cli_json(db_target, "doctor")
    vectors = checks(report)["vectors"]
    assert report["ok"] is True and vectors["status"] == "warn"
    assert vectors["detail"] == (
        f"a re-embedding to openai-compatible/stub-embed (8 dims) is in progress or was interrupted ({staged} rows "
        "staged); searches use the old vectors until it finishes: run `clawrecall reembed` again to finish it")

    stub.mode = "ok"
    stub.requests.clear()
    done = cli_json(db_target, "--config", str(config), "reembed")
    assert (done["reembedded"], done["resumed"]) == (40, staged)
    assert texts_embedded(stub, contents) == 40 - staged
    report = cli_json(db_target, "--config", str(config), "doctor")
    assert report["ok"] is True and {c["status"] for c in report["checks"]} == {"ok"}
    with Memory.open(db_target, embedding=remote(stub)) as mem:
        assert models(mem) == {STUB: 40} and mem.search("fact number 12 about topic 84", mode="vector")
        assert_stub_vectors(mem)
