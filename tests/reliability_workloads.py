"""The reliability workloads, shared by the tests (a few short rounds) and `bench/reliability.py` (the
published figures): kill -9 of `clawrecall serve` under a stream of acknowledged changes, kill -9 of
`import`/`purge`/`migrate`, and writer and reader processes on one store.

Each workload returns what it saw and raises `AssertionError` naming what was lost or broken.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from clawrecall import Memory
from clawrecall.scopes import Caller
from clawrecall.server.spawn import spawn_server
from clawrecall.storage import is_postgres_url

USER = {"x-clawrecall-user": "alice"}
KILL_AFTER = Path(__file__).with_name("kill_after.py")


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of `values`, 0 when there are none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def sqlite_integrity(target: str) -> list[str]:
    """SQLite's full `PRAGMA integrity_check` (every page, index and constraint); [] for PostgreSQL."""
    if is_postgres_url(target):
        return []
    conn = sqlite3.connect(target)
    try:
        found = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()
    return [] if found == ["ok"] else found


def check_sound(target: str) -> None:
    """The store opens, passes its checks (and SQLite's integrity_check), takes a write and finds it."""
    assert sqlite_integrity(target) == [], sqlite_integrity(target)
    with Memory.open(target) as mem:
        assert mem._store.integrity_problems() == []
        probe = f"sound store probe {time.time_ns()}"
        assert mem.add(probe, user_id="alice", dedup=False).action == "created"
        assert [h.memory.content for h in mem.search(probe, user_id="alice", mode="bm25", limit=1)] == [probe]


# --- kill -9 of `clawrecall serve` --------------------------------------------------------------------


@dataclass
class Acknowledged:
    """What the server acknowledged, and what was sent but not answered (either outcome is right for those)."""

    added: dict[str, str] = field(default_factory=dict)  # id -> content
    updated: dict[str, str] = field(default_factory=dict)  # id -> last acknowledged content
    update_in_flight: dict[str, str] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    captured: dict[str, list[str]] = field(default_factory=dict)  # session -> messages of the last answered call
    counts: dict[str, int] = field(default_factory=lambda: {"add": 0, "update": 0, "delete": 0, "capture": 0})

    def total(self) -> int:
        return sum(self.counts.values())


def seed_for_crash(target: str, n: int) -> list[str]:
    """`n` memories of alice's for the stream to update and delete."""
    with Memory.open(target) as mem:
        results = mem.add_many([{"content": f"seeded fact number {i} about the garden"} for i in range(n)],
                               user_id="alice", dedup=False)
        return [r.id for r in results]


def _stream(url: str, kind: str, tag: str, ids: list[str], ack: Acknowledged, lock: threading.Lock,
            stop: threading.Event) -> None:
    """One client sending one kind of change until the server dies or `stop` is set."""
    with httpx.Client(base_url=url, timeout=60, headers={**USER, "x-clawrecall-session": f"crash-{tag}"}) as c:
        n = 0
        transcript: list[dict] = []
        while not stop.is_set():
            try:
                if kind == "add":
                    content = f"fact {tag}-{n}: the shed key hangs on hook {n}"
                    r = c.post("/v1/memories", json={"content": content, "dedup": False})
                    if r.status_code == 201:
                        with lock:
                            ack.added[r.json()["id"]] = content
                elif kind == "update":
                    target = ids[n % len(ids)]
                    content = f"seeded fact {target[:8]} revised {tag}-{n}"
                    with lock:
                        ack.update_in_flight[target] = content
                    r = c.patch(f"/v1/memories/{target}", json={"content": content})
                    if r.status_code == 200:
                        with lock:
                            ack.updated[target] = content
                            ack.update_in_flight.pop(target, None)
                elif kind == "delete":
                    if n >= len(ids):
                        return
                    r = c.delete(f"/v1/memories/{ids[n]}")
                    if r.status_code == 200:
                        with lock:
                            ack.deleted.add(ids[n])
                else:  # capture: the agent_end hook, its whole transcript each turn as OpenClaw sends it
                    transcript += [{"role": "user", "content": f"turn {n} question {tag}"},
                                   {"role": "assistant", "content": f"turn {n} answer {tag}"}]
                    r = c.post("/v1/hooks/agent_end", json={"messages": transcript})
                    if r.status_code == 200:
                        with lock:
                            ack.captured[f"crash-{tag}"] = [m["content"] for m in transcript]
            except httpx.HTTPError:
                return
            if r.status_code >= 300:
                raise AssertionError(f"{kind} answered {r.status_code}: {r.text}")
            with lock:
                ack.counts[kind] += 1
            n += 1


def crash_round(target: str, workdir: Path, round_: int, ack: Acknowledged, *, seeded: list[str],
                min_s: float = 0.8, max_s: float = 2.5) -> dict[str, Any]:
    """Start `clawrecall serve` on the store (it must open and serve after the last kill), stream adds,
    updates, deletes and agent_end captures from four clients, kill -9 the server at a random moment,
    then check every change ever acknowledged (this round and earlier ones) on the store."""
    rng = random.Random(round_)
    third = max(1, len(seeded) // 3)
    to_update = seeded[:third]
    to_delete = [i for i in [*seeded[third:], *ack.added] if i not in ack.deleted]  # earlier rounds' adds too
    lock, stop = threading.Lock(), threading.Event()
    before = ack.total()
    with spawn_server(target, log_path=workdir / f"serve-{round_}.log") as running:
        assert httpx.get(f"{running.url}/v1/memories", params={"limit": 1}, headers=USER).status_code == 200
        clients = [threading.Thread(target=_stream, args=(running.url, kind, f"{round_}", ids, ack, lock, stop))
                   for kind, ids in (("add", []), ("update", to_update), ("delete", to_delete), ("capture", []))]
        for client in clients:
            client.start()
        wait_s = rng.uniform(min_s, max_s)
        time.sleep(wait_s)
        deadline = time.monotonic() + 60  # and once each stream has been answered (a loaded machine starts them late)
        while min(ack.counts.values()) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(running.process.pid, signal.SIGKILL)
        running.process.wait()
        stop.set()
        for client in clients:
            client.join(15)
    check_acknowledged(target, ack)
    return {"round": round_, "killed_after_s": round(wait_s, 2), "acknowledged": ack.total() - before}


def check_acknowledged(target: str, ack: Acknowledged) -> None:
    """Every acknowledged add, update, delete and capture is in the store; SQLite's integrity_check is ok."""
    assert sqlite_integrity(target) == [], sqlite_integrity(target)
    with Memory.open(target) as mem:
        assert mem._store.integrity_problems() == []
        ids = [*ack.added, *ack.updated, *ack.deleted]
        stored = mem._store.memories.fetch(ids)
        lost = [i for i in ack.added if i not in stored or stored[i].content != ack.added[i]]
        assert not lost, f"{len(lost)} acknowledged adds lost, e.g. {lost[:3]}"
        stale = [i for i, content in ack.updated.items()
                 if stored[i].content not in (content, ack.update_in_flight.get(i))]
        assert not stale, f"{len(stale)} acknowledged updates lost, e.g. {stale[:3]}"
        undeleted = [i for i in ack.deleted if stored[i].deleted_at is None]
        assert not undeleted, f"{len(undeleted)} acknowledged deletes lost, e.g. {undeleted[:3]}"
        for session, messages in ack.captured.items():
            kept = [m.content for m in mem.conversations.show(session, caller=Caller("alice"), limit=100_000)]
            assert kept[: len(messages)] == messages, f"acknowledged messages of {session} lost"


def crash_serve(target: str, workdir: Path, rounds: int, *, seed: int = 300, serve_after: bool = True,
                log=lambda _: None) -> dict[str, Any]:
    """`rounds` kill -9's of one server after another on one store (each round's server starts on the store
    the last one left); then, with `serve_after`, one more server must serve it."""
    seeded = seed_for_crash(target, seed)
    ack = Acknowledged()
    runs = []
    for round_ in range(rounds):
        runs.append(crash_round(target, workdir, round_, ack, seeded=seeded))
        log(f"round {round_ + 1}/{rounds}: {runs[-1]}")
    if serve_after:
        with spawn_server(target, log_path=workdir / "serve-after.log") as running:
            some = next(iter(ack.added))
            assert httpx.get(f"{running.url}/v1/memories/{some}", headers=USER).json()["content"] == ack.added[some]
    check_sound(target)
    return {"rounds": rounds, "acknowledged": dict(ack.counts), "lost": 0, "integrity": "ok", "runs": runs}


# --- kill -9 of a command ---------------------------------------------------------------------------


def run_cli(target: str, *args: str, kill_after: int | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`clawrecall --db TARGET ARGS…` in a child process; with `kill_after=k`, the child sends itself SIGKILL
    right after its k-th statement that writes (tests/kill_after.py), so it dies in the middle of its work
    at a point chosen on purpose rather than by the scheduler. Its stderr's last line is its statement count."""
    prefix = [sys.executable, str(KILL_AFTER), str(kill_after or 0)]
    return subprocess.run([*prefix, "--db", target, *args], capture_output=True, text=True, timeout=timeout, check=False)


def write_statements(result: subprocess.CompletedProcess) -> int:
    """How many writing statements a finished `run_cli` made (kill_after.py's last stderr line)."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("write statements: ")]
    assert lines, result.stderr
    return int(lines[-1].split(": ")[1])


def killed(result: subprocess.CompletedProcess) -> bool:
    return result.returncode == -signal.SIGKILL


def make_import_file(path: Path, n: int) -> list[str]:
    """An export of `n` memories (with their ids) from a scratch store: what `import` is given."""
    scratch = path.with_suffix(".source.db")
    with Memory.open(scratch) as mem:
        mem.add_many([{"content": f"imported note {i}: the {('red', 'green', 'blue')[i % 3]} kite flies on day {i}"}
                      for i in range(n)], user_id="alice", dedup=False)
        with path.open("w", encoding="utf-8") as out:
            mem.export_jsonl(out)
    ids = [json.loads(line)["id"] for line in path.read_text().splitlines()]
    for suffix in ("", "-wal", "-shm"):
        Path(f"{scratch}{suffix}").unlink(missing_ok=True)
    return ids


def _soft_deleted_store(target: str, keep: int, drop: int) -> None:
    """`keep` live memories and `drop` soft-deleted ones: what `purge --older-than 0` erases."""
    with Memory.open(target) as mem:
        mem.add_many([{"content": f"kept note {i} about the orchard"} for i in range(keep)], user_id="alice", dedup=False)
        mem.add_many([{"content": f"dropped note {i} about the quarry"} for i in range(drop)], user_id="bob", dedup=False)
        mem.delete_bulk(scope="user:bob")


def _contents(target: str, *, deleted: bool) -> list[str]:
    with Memory.open(target) as mem:
        return sorted(r.content for r in mem.list(include_deleted=deleted, only_deleted=deleted, limit=100_000))


@dataclass
class Command:
    """A command killed mid-way: how its store is prepared, its arguments, what a finished run leaves."""

    name: str
    args: tuple[str, ...]
    prepare: Any  # (target) -> None
    outcome: Any  # (target) -> comparable: what a finished run leaves
    partial: Any  # (target) -> None: asserts what a killed run may leave


def commands(workdir: Path, size: int) -> list[Command]:
    source = workdir / "import.jsonl"
    lines = {json.loads(line)["id"]: json.loads(line)["content"] for line in source.read_text().splitlines()} \
        if source.exists() else None
    if lines is None:
        make_import_file(source, size)
        lines = {json.loads(line)["id"]: json.loads(line)["content"] for line in source.read_text().splitlines()}

    def imported(target: str) -> list[tuple[str, str]]:
        with Memory.open(target) as mem:
            return sorted((r.id, r.content) for r in mem.list(limit=100_000))

    def import_partial(target: str) -> None:
        check_integrity(target)
        stored = imported(target)
        assert all(lines.get(i) == content for i, content in stored), "a killed import left a memory not in its file"

    def purge_partial(target: str) -> None:
        check_integrity(target)
        assert _contents(target, deleted=False) == sorted(f"kept note {i} about the orchard" for i in range(size // 4))
        assert len(_contents(target, deleted=True)) in (0, size)  # one transaction: all of them or none

    def migrated(target: str) -> tuple:
        from legacy import catalog

        from clawrecall.storage import open_store

        from clawrecall.storage.migrations import pending

        store = open_store(target, migrate=False)
        try:
            rows = sorted(map(tuple, store.run("SELECT id, content FROM memories")))
            return [f"{step.migration_set}/{step.name}" for step in pending(store)], catalog(store), rows
        finally:
            store.close()

    def migrate_partial(target: str) -> None:
        check_integrity(target, open_with_memory=False)  # opening a Memory would finish the migration itself
        status = run_cli(target, "migrate", "status", "--json")
        assert status.returncode == 0, status.stderr

    def load_v1(target: str) -> None:
        from legacy import load

        load(target, "v1")

    return [
        Command("import", ("import", str(source), "--json"), lambda t: None, imported, import_partial),
        Command("purge", ("purge", "--older-than", "0", "--yes", "--json"),
                lambda t: _soft_deleted_store(t, size // 4, size), lambda t: (_contents(t, deleted=False),
                                                                              _contents(t, deleted=True)), purge_partial),
        Command("migrate", ("migrate", "apply", "--json"), load_v1, migrated, migrate_partial),
    ]


def check_integrity(target: str, *, open_with_memory: bool = True) -> None:
    assert sqlite_integrity(target) == [], sqlite_integrity(target)
    if open_with_memory:
        with Memory.open(target) as mem:
            assert mem._store.integrity_problems() == []


def crash_command(command: Command, new_target, rounds: int, log=lambda _: None) -> dict[str, Any]:
    """Run `command` to the end once (its outcome and its number of writing statements), then `rounds` times
    on a fresh store kill it -9 after a different share of those statements: the store must be sound, and
    the same command run again must finish it, leaving what the uninterrupted run left."""
    first = new_target()
    command.prepare(first)
    full = run_cli(first, *command.args)
    assert full.returncode == 0, full.stderr
    total, expected = write_statements(full), command.outcome(first)
    kills = []
    for round_ in range(rounds):
        at = max(1, round(total * (round_ + 1) / (rounds + 1)))
        target = new_target()
        command.prepare(target)
        result = run_cli(target, *command.args, kill_after=at)
        assert killed(result), f"{command.name} was not killed at statement {at} of {total}: {result.stderr}"
        command.partial(target)
        again = run_cli(target, *command.args)
        assert again.returncode == 0, again.stderr
        outcome = command.outcome(target)
        if command.name == "purge":  # ids differ store to store; the contents left must not
            assert outcome == expected
        elif command.name == "import":
            assert outcome == expected, "import run again did not leave every line exactly once"
        else:
            assert outcome[0] == [] and outcome[1:] == expected[1:], "migrate run again did not finish the schema"
        check_sound(target)
        kills.append(at)
        log(f"{command.name}: killed after write statement {at} of {total}; run again: finished, store sound")
    return {"command": command.name, "write_statements": total, "killed_at": kills, "finished_after": len(kills)}


# --- writer and reader processes on one store ---------------------------------------------------------


def _writer(target: str, n: int, seconds: float, start, out) -> None:
    mem = Memory.open(target)
    acked, latency, errors = [], [], []
    start.wait(300)
    end, i = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        content = f"writer {n} note {i}: the barge {i} left pier {n}"
        began = time.perf_counter()
        try:
            acked.append((mem.add(content, user_id=f"w{n}", dedup=False).id, content))
        except Exception as exc:  # noqa: BLE001  (every failure is counted and reported)
            errors.append(f"{type(exc).__name__}: {exc}")
        latency.append(time.perf_counter() - began)
        i += 1
    mem.close()
    out.put({"role": "writer", "acked": acked, "latency": {"add": latency}, "errors": errors})


def _reader(target: str, n: int, writers: int, seconds: float, start, out) -> None:
    mem = Memory.open(target)
    latency: dict[str, list[float]] = {"search": [], "list": []}
    errors: list[str] = []
    start.wait(300)
    end, i = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        user = f"w{(n + i) % writers}"
        op = ("search", "list")[i % 2]
        began = time.perf_counter()
        try:
            if op == "search":
                mem.search(f"which barge left pier {(n + i) % writers}", user_id=user, limit=5)
            else:
                mem.list(user_id=user, limit=20)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{type(exc).__name__}: {exc}")
        latency[op].append(time.perf_counter() - began)
        i += 1
    mem.close()
    out.put({"role": "reader", "acked": [], "latency": latency, "errors": errors})


def concurrency(target: str, *, writers: int = 8, readers: int = 8, seconds: float = 60.0) -> dict[str, Any]:
    """`writers` processes adding and `readers` processes searching and listing, on one store for `seconds`:
    every acknowledged id is stored once with its content, and no error (no "database is locked") surfaced."""
    with Memory.open(target) as mem:  # created (and migrated) once, before the processes race to open it
        mem.add("the harbour opens at dawn", dedup=False)
    # fork: sixteen fresh interpreters importing clawrecall would take longer than a short run itself
    ctx = multiprocessing.get_context("fork")
    # the clock starts once every process has opened the store (and this one passes the barrier with them)
    start, out = ctx.Barrier(writers + readers + 1), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(target, n, seconds, start, out)) for n in range(writers)]
    procs += [ctx.Process(target=_reader, args=(target, n, writers, seconds, start, out)) for n in range(readers)]
    for proc in procs:
        proc.start()
    start.wait(300)
    results = [out.get(timeout=seconds + 300) for _ in procs]
    for proc in procs:
        proc.join(30)
    acked = [pair for r in results for pair in r["acked"]]
    errors = [e for r in results for e in r["errors"]]
    with Memory.open(target) as mem:
        stored = mem._store.memories.fetch([i for i, _ in acked])
        lost = [i for i, content in acked if i not in stored or stored[i].content != content]
        users = [f"w{n}" for n in range(writers)]
        rows = mem._store.run(f"SELECT content, count(*) FROM memories WHERE user_id IN ({mem._store.dialect.marks(writers)}) "
                              "GROUP BY content", users)
        duplicated = [content for content, count in rows if count > 1]
        unacknowledged = sum(count for _, count in rows) - len(acked)
    latency: dict[str, list[float]] = {}
    for r in results:
        for op, values in r["latency"].items():
            latency.setdefault(op, []).extend(values)
    return {
        "writers": writers, "readers": readers, "seconds": seconds, "acknowledged_writes": len(acked),
        "lost": len(lost), "duplicated": len(duplicated), "stored_not_acknowledged": unacknowledged,
        "errors": len(errors), "locked_errors": sum("locked" in e.lower() for e in errors), "first_errors": errors[:3],
        "ops": {op: {"n": len(v), "per_s": round(len(v) / seconds, 1), "p50_ms": round(pct(v, 50) * 1000, 1),
                     "p95_ms": round(pct(v, 95) * 1000, 1)} for op, v in sorted(latency.items())},
        "integrity": sqlite_integrity(target) or "ok",
    }
