"""Secret memories (docs/agents.md): sealed at rest, their text in no index, vector, history, log, prompt
or export that did not ask for it; opened only for their own agent's explicit request; the key rotated
(an interrupted rotation leaves every secret readable); secrets stored before encryption sealed when the
store is migrated. On both backends."""

from __future__ import annotations

import io
import json
import tarfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from clawrecall import Caller, Memory, NotFoundError
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.engine import _secrets
from clawrecall.errors import SecretKeyError
from clawrecall.hooks import before_prompt_build
from clawrecall.models import MASK
from clawrecall.sealing import Keyring, parse_keys
from clawrecall.server import create_app
from clawrecall.server.spawn import spawn_server
from clawrecall.storage import Filters, is_postgres_url, open_store
from clawrecall.tools import run_tool

DRJONES = Caller("alice", "drjones", "s1")
BOB = Caller("alice", "bob")
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
JOBS = {"backoff_base_s": 0.05, "backoff_max_s": 0.2, "poll_s": 0.05}


def stored_bytes(mem: Memory, db_target: str) -> bytes:
    """Everything the store holds, as bytes: a SQLite file and its WAL (read while the store is open, so
    the WAL still has its frames), or every PostgreSQL table's rows as text (tsvectors, history, search log)."""
    if not is_postgres_url(db_target):
        return b"".join(p.read_bytes() for p in Path(db_target).parent.glob(Path(db_target).name + "*")
                        if not p.name.endswith((".key", ".log")))
    tables = [r[0] for r in mem._store.run("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    assert {"memories", "history", "search_log", "messages", "fact_occurrences"} <= set(tables)
    return "\n".join(str(row[0]) for t in tables for row in mem._store.run(f"SELECT t::text FROM {t} t")).encode()


def open_mem(db_target: str, stub=None, **overrides) -> Memory:
    llm = {} if stub is None else {"llm": {"provider": "openai", "base_url": stub.openai_base_url, "model": "stub-model",
                                           "max_retries": 0, "timeout_s": 5.0}, "jobs": JOBS}
    return Memory.open(db_target, **llm, **overrides)


def fact(text: str, visibility: str | None = None) -> dict:
    return {"text": text, "category": "fact", "entities": ["user"], "importance": 0.6, "confidence": 0.9,
            "valid_from": None, "sentiment": "neutral", "source": [1], "action": "new", "existing": None,
            "visibility": visibility}


def converse(mem: Memory, texts: list[str], session: str, start: datetime) -> None:
    transcript = [{"role": "user" if i % 2 == 0 else "assistant", "content": t,
                   "timestamp": int((start + timedelta(minutes=i)).timestamp() * 1000)} for i, t in enumerate(texts)]
    caller = Caller("alice", "drjones", session)
    mem.conversations.log(transcript, caller=caller, session_id=session, now=start + timedelta(minutes=len(texts)))
    mem.conversations.end(session, caller=caller)
    while mem.upkeep.run_job("test-worker") is not None:
        pass


def test_a_secrets_text_is_in_no_byte_of_the_store_its_logs_or_a_prompt(db_target, llm_stub, tmp_path):
    """Secrets written through every door (Python, CLI, REST, an agent tool over a real server, extraction)
    each carry a marker; the database (file and WAL, or every table), the server's log and every prompt the
    LLM was sent hold none of them, though each is still found by its own agent's explicit request."""
    markers = {door: f"qx{door}{n}zz" for n, door in enumerate(["python", "cli", "rest", "tool", "extracted"])}
    with open_mem(db_target, llm_stub) as mem:
        mem.add(f"Bank PIN for the joint account is {markers['python']}", caller=DRJONES, visibility="secret")
        added = CliRunner().invoke(cli, ["--db", db_target, "add", f"Bank PIN for the card is {markers['cli']}",
                                         "--user", "alice", "--agent", "drjones", "--visibility", "secret", "--json"])
        assert added.exit_code == 0, added.output
        assert markers["cli"] not in added.output and MASK in added.output

        log_path = tmp_path / "serve.log"
        with spawn_server(db_target, log_path=log_path) as server:
            import httpx

            headers = {"X-Clawrecall-User": "alice", "X-Clawrecall-Agent": "drjones"}
            rest = httpx.post(f"{server.url}/v1/memories", headers=headers, timeout=30,
                              json={"content": f"Bank PIN of the safe is {markers['rest']}", "visibility": "secret"})
            assert rest.status_code in (200, 201), rest.text
            tool = httpx.post(f"{server.url}/v1/tools/memory_write", headers=headers, timeout=30,
                              json={"content": f"Bank PIN of the locker is {markers['tool']}", "visibility": "secret"})
            assert tool.status_code == 200, tool.text
            found = httpx.post(f"{server.url}/v1/search", headers=headers, timeout=30,
                               json={"query": "bank PIN", "secrets": True, "limit": 20}).json()["results"]
            assert {markers["rest"], markers["tool"]} <= {m for h in found for m in markers.values() if m in h["memory"]["content"]}
            hidden = httpx.post(f"{server.url}/v1/search", headers=headers, timeout=30,
                                json={"query": "bank PIN", "limit": 20, "min_score": 0}).text
            assert not any(m in hidden for m in markers.values())

        # extraction: the model marks a fact secret; later prompts (known facts) never show any secret
        first = {"json": {"facts": [fact(f"The user's bank PIN is {markers['extracted']}.", "secret"),
                                    fact("The user banks with Sparkasse.")], "summary": "Banking."}}
        later = {"json": {"facts": [fact("The user asked about the bank PIN again.")], "summary": "Bank."}}
        llm_stub.default = lambda request: first if "told you my PIN" in request.text else later
        converse(mem, ["My bank is Sparkasse and I told you my PIN.", "Noted.", "Keep the PIN safe.", "Sure."], "s1", T0)
        converse(mem, ["What was my bank PIN at Sparkasse?", "I keep it.", "Thanks for the PIN.", "Welcome."], "s2",
                 T0 + timedelta(hours=2))
        # the second extraction was shown the known facts of the bank: the shared one, never the secret
        assert any("banks with Sparkasse" in r.text for r in llm_stub.requests[1:])

        hook = before_prompt_build(mem, {"prompt": "what is my bank PIN?"}, DRJONES)["prependContext"] or ""
        assert mem.search(markers["python"], caller=DRJONES, secrets=True)  # logged without its words
        asked = mem.search("bank PIN", caller=DRJONES, secrets=True, limit=20)
        assert {m for h in asked for m in markers.values() if m in h.memory.content} == set(markers.values())
        others = mem.search("bank PIN", caller=BOB, secrets=True, limit=20, min_score=0)
        assert not any(m in h.memory.content for h in others for m in markers.values())

        mem._recorder.flush()
        raw = stored_bytes(mem, db_target)
    prompts = "\n".join(json.dumps(r.body) for r in llm_stub.requests)
    logged = log_path.read_text(errors="replace")
    for door, marker in markers.items():
        assert marker.encode() not in raw, f"the {door} secret is stored in plain text"
        assert marker not in prompts, f"the {door} secret was sent to the LLM"
        assert marker not in logged, f"the {door} secret is in the server's log"
        assert marker not in hook
    assert b"Sparkasse" in raw  # the grep reads the text the store does keep


def test_masked_everywhere_but_an_explicit_request_and_changes_keep_it_sealed(db_target, tmp_path):
    with open_mem(db_target) as mem:
        secret = mem.add("Blood test result: ferritin 12, marker qxblood7zz", caller=DRJONES, visibility="secret",
                         title="lab qxtitle7zz").memory
        assert secret.content == MASK and secret.title is None
        # listed and shown in history masked; left out unless asked for
        assert secret.id not in {m.id for m in mem.list(caller=DRJONES)}
        [listed] = [m for m in mem.list(caller=DRJONES, secrets=True) if m.id == secret.id]
        assert listed.content == MASK
        assert "qxblood7zz" not in json.dumps([h.model_dump(mode="json") for h in mem.history(secret.id, caller=DRJONES)])
        # opened by id, and by a secret search, for its own agent (or its user); never for another agent
        assert "qxblood7zz" in mem.get(secret.id, caller=DRJONES).content
        assert mem.get(secret.id, caller=DRJONES).title == "lab qxtitle7zz"
        assert mem.get(secret.id, caller=DRJONES, reveal=False).content == MASK
        assert "qxblood7zz" in mem.get(secret.id, user_id="alice").content
        with pytest.raises(NotFoundError):
            mem.get(secret.id, caller=BOB)
        assert "qxblood7zz" in run_tool(mem, DRJONES, "memory_get", {"id": secret.id}).text
        [hit] = mem.search("ferritin blood", caller=DRJONES, secrets=True)
        assert hit.id == secret.id and "qxblood7zz" in hit.memory.content and hit.matched == ["secret"]
        assert not mem.search("ferritin blood", caller=DRJONES, min_score=0)
        assert not [h for h in mem.search("ferritin", caller=BOB, secrets=True, min_score=0) if h.id == secret.id]
        # the search log keeps that a secret search was made, not its words (they may spell the secret)
        mem.search("qxblood7zz", caller=DRJONES, secrets=True)
        mem._recorder.flush()
        queries = [r[0] for r in mem._store.run("SELECT query FROM search_log")]
        assert "ferritin blood" in queries and MASK in queries and "qxblood7zz" not in queries
        # the dashboard's page of it shows the mask
        client = TestClient(create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True),
                            base_url="http://127.0.0.1:8765")
        headers = {"X-Clawrecall-User": "alice", "X-Clawrecall-Agent": "drjones"}
        assert "qxblood7zz" in client.get(f"/v1/memories/{secret.id}", headers=headers).text
        # export: without the flag no secret at all; with it, as text (it imports as a secret again)
        plain, opened = io.StringIO(), io.StringIO()
        mem.export_jsonl(plain, caller=DRJONES)
        mem.export_jsonl(opened, caller=DRJONES, secrets=True)
        assert secret.id not in plain.getvalue() and "qxblood7zz" in opened.getvalue()
        # a backup carries it sealed
        mem.backup(tmp_path / "b.tar")
        with tarfile.open(tmp_path / "b.tar") as tar:
            assert not any(b"qxblood7zz" in tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())

        # an update keeps it sealed; a supersede's new version is sealed too and keeps the title
        mem.update(secret.id, content="Blood test result: ferritin 30, marker qxblood8zz", caller=DRJONES)
        newer = mem.supersede(secret.id, "Blood test result: ferritin 45, marker qxblood9zz", caller=DRJONES)
        assert newer.content == MASK and mem.get(newer.id, caller=DRJONES).title == "lab qxtitle7zz"
        assert "qxblood9zz" in mem.get(newer.id, caller=DRJONES).content

        # a private memory made secret leaves the indexes, its vector and its history's text behind
        private = mem.add("Salary is qxsalary5zz a month", caller=DRJONES, visibility="private").memory
        assert mem.search("qxsalary5zz", caller=DRJONES, mode="bm25")
        assert mem._store.vectors([private.id])
        mem.update(private.id, visibility="secret", caller=DRJONES)
        assert not mem.search("qxsalary5zz", caller=DRJONES, mode="bm25", min_score=0)
        assert not mem.search("qxsalary5zz", caller=DRJONES, mode="trigram", min_score=0)
        assert not mem._store.vectors([private.id])
        assert "qxsalary5zz" not in json.dumps([h.model_dump(mode="json") for h in mem.history(private.id, caller=DRJONES)])
        assert "qxsalary5zz" in mem.get(private.id, caller=DRJONES).content
        # its user makes it readable again: indexed and embedded once more
        mem.update(private.id, visibility="private", user_id="alice")
        assert mem.search("qxsalary5zz", caller=DRJONES, mode="bm25")[0].id == private.id
        assert mem._store.vectors([private.id])

        raw = stored_bytes(mem, db_target)
    for marker in ("qxblood7zz", "qxblood8zz", "qxblood9zz", "qxtitle7zz"):
        assert marker.encode() not in raw


def test_a_key_rotation_cut_short_leaves_every_secret_readable_and_running_it_again_finishes_it(db_target, monkeypatch):
    monkeypatch.setattr(_secrets, "_BATCH", 2)
    with open_mem(db_target) as mem:
        ids = [r.id for r in mem.add_many([{"content": f"PIN {n} is qxpin{n}zz", "visibility": "secret"} for n in range(5)],
                                          caller=DRJONES)]
        key_file = mem._secrets.key_file()
        old = parse_keys(key_file.read_text(), "old")
        assert len(old) == 1 and key_file.stat().st_mode & 0o777 == 0o600

        class Cut(Exception):
            pass

        def cut(done: int, total: int) -> None:
            assert total == 5
            raise Cut

        with pytest.raises(Cut):
            mem.secrets.rotate(cut)
        both = parse_keys(key_file.read_text(), "both")
        assert both[1:] == old and len(both) == 2
    with open_mem(db_target) as mem:  # another process: every secret opens, new ones are sealed with the new key
        assert [mem.get(i, caller=DRJONES).content for i in ids] == [f"PIN {n} is qxpin{n}zz" for n in range(5)]
        assert mem.secrets.status().keys == 2
        later = mem.add("PIN 5 is qxpin5zz", caller=DRJONES, visibility="secret").id
        runner = CliRunner()
        reports = json.loads(runner.invoke(cli, ["--db", db_target, "secrets", "rotate", "--json"]).output)
        assert reports["key"] == Keyring((both[0],), "new").fingerprint and reports["total"] == 6
        assert reports["resealed"] == 3 and reports["dropped_keys"] == 1  # the 2 of the first batch and the later one were done
        assert parse_keys(key_file.read_text(), "new") == both[:1]
        status = json.loads(runner.invoke(cli, ["--db", db_target, "secrets", "status", "--json"]).output)
        assert status["keys"] == 1 and status["sealed"] == 6 and status["key"] == status["store_key"]
        assert "qxpin5zz" in mem.get(later, caller=DRJONES).content
        tokens = [t for _, t in mem._store.memories.sealed_tokens(None, 100)]
        assert len(tokens) == 6
        with pytest.raises(SecretKeyError):  # the old key opens none of them now
            Keyring(tuple(old), "old").open(tokens[0])
        assert all(Keyring((both[0],), "new").open(t) for t in tokens)


def test_keys_from_the_environment_rotate_by_putting_the_new_one_first(db_target, tmp_path):
    old, new = (runner_key() for _ in range(2))
    with open_mem(db_target, secrets={"key": old}) as mem:
        secret = mem.add("Locker code qxlock1zz", caller=DRJONES, visibility="secret").id
        with pytest.raises(SecretKeyError, match="put a new key first"):
            mem.secrets.rotate()
    with open_mem(db_target, secrets={"key": f"{new},{old}"}) as mem:
        assert mem.secrets.rotate().resealed == 1
    with open_mem(db_target, secrets={"key": new}) as mem:
        assert "qxlock1zz" in mem.get(secret, caller=DRJONES).content
    with open_mem(db_target, secrets={"key": old}) as mem:  # a process left with the old key: a clear error, nothing sealed
        with pytest.raises(SecretKeyError, match="sealed with key"):
            mem.add("Another code", caller=DRJONES, visibility="secret")
        with pytest.raises(SecretKeyError):
            mem.get(secret, caller=DRJONES)


def runner_key() -> str:
    result = CliRunner().invoke(cli, ["secrets", "new-key", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["key"]


def test_a_lost_key_file_is_a_clear_error_not_a_new_key(tmp_path):
    db = tmp_path / "m.db"
    with Memory.open(db) as mem:
        secret = mem.add("Door code qxdoor1zz", caller=DRJONES, visibility="secret").id
        key_file = mem._secrets.key_file()
    assert key_file == tmp_path / "m.db.key"
    key_file.rename(tmp_path / "elsewhere.key")
    with Memory.open(db) as mem:
        with pytest.raises(SecretKeyError, match="is missing"):
            mem.add("Another door code", caller=DRJONES, visibility="secret")
        with pytest.raises(SecretKeyError):
            mem.get(secret, caller=DRJONES)
        assert not key_file.exists()
        assert mem.list(caller=DRJONES) == []  # what does not open a secret still works
    with Memory.open(db, secrets={"key_file": str(tmp_path / "elsewhere.key")}) as mem:
        assert "qxdoor1zz" in mem.get(secret, caller=DRJONES).content


def test_secrets_stored_before_encryption_are_sealed_when_the_store_is_migrated(db_target):
    """A store of the release before: its secret rows in plain text, in the text indexes, with vectors and
    history. Opening it applies core/sealed-secrets and seals them: nothing of their text is left."""
    with open_mem(db_target) as mem:
        plain = mem.add("Tax number qxtax1zz", caller=DRJONES, visibility="private").memory
        mem.update(plain.id, importance=0.9, caller=DRJONES)
        kept = mem.add("Tax office is in Brno", caller=DRJONES, visibility="private").id
    store = open_store(db_target, migrate=False)
    with store.transaction():  # as the release before left it: the level secret, the text as written
        store.run(f"UPDATE memories SET visibility = 'secret' WHERE id = {store.dialect.p}", (plain.id,))
        store.run("ALTER TABLE memories DROP COLUMN sealed")
        store.run("DELETE FROM migrations WHERE name = 'sealed-secrets'")
    assert [s.label for s in store.pending_migrations()] == ["core/sealed-secrets"]
    assert b"qxtax1zz" in stored_bytes(SimpleMem(store), db_target)
    store.close()
    with open_mem(db_target) as mem:
        assert mem.secrets.status().unsealed == 0 and mem.secrets.status().sealed == 1
        assert "qxtax1zz" in mem.get(plain.id, caller=DRJONES).content
        assert plain.id not in {h.id for h in mem.search("tax number", caller=DRJONES, mode="bm25", min_score=0)}
        assert plain.id not in {h.id for h in mem.search("tax numbr", caller=DRJONES, mode="trigram", min_score=0)}
        assert not mem._store.vectors([plain.id])
        assert [h.action for h in mem.history(plain.id, caller=DRJONES)] == ["add", "update"]
        assert mem.search("tax office Brno", caller=DRJONES, mode="bm25")[0].id == kept
    # read once the store is closed: SQLite's WAL frames written before the sealing are checkpointed away by then
    # (while it is open, a checkpoint that a busy machine delays may leave them a while, as after an erasure)
    store = open_store(db_target)
    raw = stored_bytes(SimpleMem(store), db_target)
    store.close()
    assert b"qxtax1zz" not in raw and b"Brno" in raw


class SimpleMem:
    """What `stored_bytes` reads of a store opened without the engine."""

    def __init__(self, store) -> None:
        self._store = store
