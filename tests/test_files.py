"""`mem.files`: ingesting Markdown, text, code and PDF files as searchable chunks, on SQLite and PostgreSQL
(hash embeddings: search by spelling), and the doors (CLI, REST) with their limits."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from clawrecall import Caller, Memory, NotFoundError, ScopeError, ValidationError, WritesDisabledError
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.config import EmbeddingConfig
from clawrecall.files import Limits, chunk, read, tokens_for
from clawrecall.files.tokens import Tokens
from clawrecall.server import create_app

ADMIN = Caller()
LIMITS = Limits(max_chars=1_000_000, max_pages=100, max_seconds=60)
ALICE = Caller("alice")
BOB = Caller("bob")


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF, one page per text (lines set with Helvetica), written by hand."""
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    bodies = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        stream = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({line}) Tj T*" for line in text.split("\n")) + " ET"
        bodies.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                      f"/Contents {5 + 2 * i} 0 R >>".encode())
        bodies.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream".encode())
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(bodies, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(bodies) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    return out + f"trailer\n<< /Size {len(bodies) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()


MARKDOWN = textwrap.dedent("""\
    # Deployment notes

    The API runs on a Kubernetes cluster in Frankfurt.
    Deploys go out every Tuesday after the standup.

    ## Rollback

    To roll back, redeploy the previous image tag with helm.
    The on-call engineer decides; nobody needs to ask.

    ## Databases

    PostgreSQL 18 with pgvector holds the team's memories.
    Backups run nightly to an object store in Amsterdam.
    """)

PYTHON = "\n".join(
    ["import os", "", ""]
    + [f"def handler_{n}(event):\n    \"\"\"Handle event {n} of the zebra pipeline.\"\"\"\n    return os.getenv('STAGE_{n}')\n\n"
       for n in range(40)]
)


def lines_of(path: Path, first: int, last: int) -> str:
    return "\n".join(path.read_text().splitlines()[first - 1 : last])


def chunks_of(mem: Memory, file_id: str, caller: Caller = ADMIN) -> list:
    from clawrecall.storage import Filters

    rows = mem._store.memories.find(Filters(kinds=("chunk",), source_ids=[file_id]), limit=10_000, offset=0, order="oldest")
    return sorted(rows, key=lambda r: r.metadata["chunk"])


@pytest.fixture
def small(db_target):
    """A store whose chunks hold 24 tokens (several chunks per small file)."""
    m = Memory.open(db_target, files={"chunk_tokens": 24})
    yield m
    m.close()


# -- formats and chunks ------------------------------------------------------------------------
def test_markdown_chunks_start_at_headings_and_keep_their_lines(small, tmp_path):
    path = tmp_path / "notes.md"
    path.write_text(MARKDOWN)
    result = small.files.ingest(path, caller=ADMIN)
    assert result.action == "created" and result.file_type == "markdown" and result.chunks > 2
    chunks = chunks_of(small, result.file_id)
    assert len(chunks) == result.chunks
    for c in chunks:
        first, last = c.metadata["lines"]
        assert c.content == lines_of(path, first, last)  # the line range is exactly where the text is
        assert c.kind == "chunk" and c.source_type == "file" and c.metadata["path"] == str(path)
    starts = {c.content.splitlines()[0] for c in chunks}
    assert {"## Rollback", "## Databases"} <= starts  # a section is not glued to the end of another


def test_code_chunks_fit_the_window_overlap_and_cover_every_line(small, tmp_path):
    path = tmp_path / "pipeline.py"
    path.write_text(PYTHON)
    result = small.files.ingest(path, caller=ADMIN)
    assert result.file_type == "code"
    chunks = chunks_of(small, result.file_id)
    covered: set[int] = set()
    for c in chunks:
        first, last = c.metadata["lines"]
        assert c.content == lines_of(path, first, last)
        covered |= set(range(first, last + 1))
    text_lines = {i for i, line in enumerate(PYTHON.splitlines(), start=1) if line.strip()}
    assert text_lines <= covered
    assert [c.metadata["chunk"] for c in chunks] == list(range(1, len(chunks) + 1))


def test_a_chunk_never_exceeds_the_local_models_window_and_cut_passages_overlap():
    """Counted by the bundled model's own tokenizer (the model itself is not loaded)."""
    tokens = tokens_for(EmbeddingConfig(provider="local"))
    assert tokens.exact and tokens.window == 254  # all-MiniLM-L6-v2: 256 less [CLS] and [SEP]
    words = [f"w{n}" for n in range(3000)]
    text = "\n".join(" ".join(words[i : i + 10]) for i in range(0, 3000, 10)).encode()
    chunks = chunk(read(text, "text", "t.txt", LIMITS), tokens, 0.15)
    assert len(chunks) > 5
    for c in chunks:
        assert len(tokens.tokenizer.encode(c.text).ids) <= 256  # with the special tokens: the model's window
    for a, b in zip(chunks, chunks[1:]):
        assert b.first <= a.last  # the next chunk starts on a line the last one had
        shared = set(a.text.splitlines()) & set(b.text.splitlines())
        assert 0.1 * tokens.window <= sum(tokens.count(sorted(shared))) <= 0.3 * tokens.window


def test_a_line_longer_than_a_chunk_is_cut_into_pieces(tmp_path):
    tokens = Tokens(window=20)  # no tokenizer: characters / 4
    chunks = chunk(read(b"x" * 1000 + b"\nend", "text", "long.txt", LIMITS), tokens, 0.15)
    assert all(c.tokens <= 20 for c in chunks)
    assert "".join(c.text for c in chunks if c.last == 1).count("x") >= 1000
    assert chunks[-1].last == 2 and chunks[-1].text.endswith("end")


def test_a_pdf_is_read_page_by_page(small, tmp_path):
    from pypdf import PdfReader

    data = make_pdf(["Quarterly report of the walrus project\nRevenue grew in the north", "Appendix about flamingo habitats"])
    assert "flamingo" in PdfReader(__import__("io").BytesIO(data)).pages[1].extract_text()
    path = tmp_path / "report.pdf"
    path.write_bytes(data)
    result = small.files.ingest(path, caller=ADMIN)
    assert result.file_type == "pdf"
    chunks = chunks_of(small, result.file_id)
    assert "lines" not in chunks[0].metadata
    pages = {c.metadata["pages"][0]: c for c in chunks}
    assert "walrus" in pages[1].content and "flamingo" in pages[2].content
    small.upkeep.runtime.drain()
    small.upkeep.backfill()
    assert small.upkeep.unembedded() == 0
    hits = small.search("flamingo habitats", sources=["chunk"], caller=ADMIN)
    assert hits and hits[0].source == "chunk"
    assert hits[0].origin == {"file_id": result.file_id, "path": str(path), "pages": [2, 2], "chunk": len(chunks)}


def test_search_finds_a_chunk_with_its_file_and_lines(mem, tmp_path):
    path = tmp_path / "deploy.md"
    path.write_text(MARKDOWN)
    file_id = mem.files.ingest(path, caller=ALICE).file_id
    assert mem.search("Amsterdam backups", sources=["chunk"], caller=ALICE, mode="bm25")  # keyword search: at once
    mem.upkeep.runtime.drain()  # the embedding the ingest started in the background, then any left here
    mem.upkeep.backfill()
    assert mem.upkeep.unembedded() == 0
    hits = mem.search("nightly backups Amsterdam", sources=["chunk"], caller=ALICE, mode="vector")
    assert hits and hits[0].origin["file_id"] == file_id and hits[0].origin["path"] == str(path)
    first, last = hits[0].origin["lines"]
    assert "Amsterdam" in lines_of(path, first, last)
    assert hits[0].id in {h.id for h in mem.search("nightly backups Amsterdam", caller=ALICE)}  # by default too
    assert not mem.search("nightly backups Amsterdam", caller=ALICE, sources=["memory"])  # memories only, when asked


# -- ingesting again ---------------------------------------------------------------------------
def test_an_unchanged_file_is_left_as_it_is_and_a_changed_one_replaced(small, tmp_path):
    path = tmp_path / "notes.md"
    path.write_text(MARKDOWN)
    first = small.files.ingest(path, caller=ADMIN)
    before = [c.id for c in chunks_of(small, first.file_id)]
    again = small.files.ingest(path, caller=ADMIN)
    assert again.action == "unchanged" and again.file_id == first.file_id
    assert [c.id for c in chunks_of(small, first.file_id)] == before

    path.write_text(MARKDOWN.replace("Amsterdam", "Lisbon") + "\n## Monitoring\n\nGrafana dashboards watch latency.\n")
    changed = small.files.ingest(path, caller=ADMIN)
    assert changed.action == "replaced" and changed.file_id == first.file_id
    now = chunks_of(small, first.file_id)
    assert len(now) == changed.chunks and not set(before) & {c.id for c in now}
    assert not small.search("Amsterdam", sources=["chunk"], caller=ADMIN, mode="bm25")
    assert small.search("Lisbon", sources=["chunk"], caller=ADMIN, mode="bm25")
    (listed,) = small.files.list(caller=ADMIN)
    assert listed.chunk_count == len(now) and listed.created_at < listed.updated_at


def test_removal_erases_the_chunks_and_the_record(mem, tmp_path):
    path = tmp_path / "deploy.md"
    path.write_text(MARKDOWN)
    file_id = mem.files.ingest(path, caller=ADMIN).file_id
    removed = mem.files.remove(file_id[:8], caller=ADMIN)
    assert removed.id == file_id and mem.files.list(caller=ADMIN) == []
    assert chunks_of(mem, file_id) == []
    assert not mem.search("Frankfurt", sources=["chunk"], caller=ADMIN, mode="bm25")
    mem.files.ingest(path, caller=ADMIN)
    assert mem.files.remove(str(path), caller=ADMIN).path == str(path)  # by path too
    with pytest.raises(NotFoundError):
        mem.files.remove(str(path), caller=ADMIN)


# -- who sees what -----------------------------------------------------------------------------
def test_another_user_never_finds_or_removes_your_file(mem, tmp_path):
    path = tmp_path / "secret.md"
    path.write_text("# Alice's secret\n\nThe vault combination is saffron-octopus-42.\n")
    result = mem.files.ingest(path, caller=ALICE)
    assert result.scope == "user:alice"
    mem.upkeep.backfill()
    assert mem.search("saffron octopus vault", sources=["chunk"], caller=ALICE)
    for mode in ("hybrid", "bm25", "vector", "trigram"):
        assert not mem.search("saffron octopus vault", sources=["chunk"], caller=BOB, mode=mode)
    assert mem.files.list(caller=BOB) == []
    with pytest.raises(NotFoundError):
        mem.files.remove(result.file_id, caller=BOB)
    with pytest.raises(NotFoundError):
        mem.files.remove(str(path), caller=BOB)
    bobs = mem.files.ingest(path, caller=BOB)  # bob's own copy, in his scope
    assert bobs.action == "created" and bobs.file_id != result.file_id


def test_a_shared_file_is_removed_only_by_who_may_write_its_scope(mem, tmp_path):
    path = tmp_path / "handbook.md"
    path.write_text("# Handbook\n\nExpenses are filed by Friday.\n")
    shared = mem.files.ingest(path, caller=ADMIN)
    assert shared.scope == "global" and mem.files.get(shared.file_id, caller=BOB).id == shared.file_id
    for wanted in (shared.file_id, str(path)):
        with pytest.raises(ScopeError, match="read-only"):
            mem.files.remove(wanted, caller=BOB)
    assert [f.id for f in mem.files.list(caller=BOB)] == [shared.file_id] and chunks_of(mem, shared.file_id)
    assert mem.files.remove(shared.file_id, caller=ADMIN).id == shared.file_id


# -- limits ------------------------------------------------------------------------------------
def test_limits_size_type_and_content(db_target, tmp_path):
    with Memory.open(db_target, files={"max_bytes": 100, "types": ["markdown", "code"]}) as mem:
        big = tmp_path / "big.md"
        big.write_text("# big\n" + "word " * 100)
        with pytest.raises(ValidationError, match="limit is 100"):
            mem.files.ingest(big, caller=ADMIN)
        for name in ("notes.txt", "tool.exe", "data.bin"):
            (tmp_path / name).write_text("hello")
            with pytest.raises(ValidationError, match="cannot ingest"):
                mem.files.ingest(tmp_path / name, caller=ADMIN)
        (tmp_path / "latin1.py").write_bytes("caf\xe9 = 1\n".encode("latin-1"))
        with pytest.raises(ValidationError, match="not UTF-8"):
            mem.files.ingest(tmp_path / "latin1.py", caller=ADMIN)
        (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
        with pytest.raises(ValidationError, match="binary"):
            mem.files.ingest(tmp_path / "nul.py", caller=ADMIN)
        (tmp_path / "blank.md").write_text("\n\n   \n")
        with pytest.raises(ValidationError, match="no text"):
            mem.files.ingest(tmp_path / "blank.md", caller=ADMIN)
        (tmp_path / "folder.md").mkdir()
        with pytest.raises(ValidationError, match="folder"):
            mem.files.ingest(tmp_path / "folder.md", caller=ADMIN)
        os.mkfifo(tmp_path / "pipe.md")  # reading it would wait forever
        with pytest.raises(ValidationError, match="not a regular file"):
            mem.files.ingest(tmp_path / "pipe.md", caller=ADMIN)
        with pytest.raises(NotFoundError):
            mem.files.ingest(tmp_path / "missing.md", caller=ADMIN)
        assert mem.files.list(caller=ADMIN) == []


def test_a_pdf_without_text_or_that_is_no_pdf_is_refused(mem, tmp_path):
    (tmp_path / "scan.pdf").write_bytes(make_pdf([""]))
    with pytest.raises(ValidationError, match="no text"):
        mem.files.ingest(tmp_path / "scan.pdf", caller=ADMIN)
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 nothing else")
    with pytest.raises(ValidationError, match="not a readable PDF"):
        mem.files.ingest(tmp_path / "broken.pdf", caller=ADMIN)


def test_within_roots_refuses_paths_outside_them_symlinks_followed(db_target, tmp_path):
    root, outside = tmp_path / "shared", tmp_path / "private"
    root.mkdir()
    outside.mkdir()
    (root / "ok.md").write_text("# Fine\n\nA shared note about otters.\n")
    (outside / "key.md").write_text("# Secret\n\nThe private key passphrase.\n")
    (root / "link.md").symlink_to(outside / "key.md")
    (root / "dir").symlink_to(outside)
    with Memory.open(db_target) as mem:
        with pytest.raises(ValidationError, match="files.roots is empty"):
            mem.files.ingest(root / "ok.md", caller=ADMIN, within_roots=True)
        assert mem.files.ingest(outside / "key.md", caller=ADMIN).action == "created"  # a local caller reads anything
    with Memory.open(db_target, files={"roots": [str(root)]}) as mem:
        assert mem.files.ingest(root / "ok.md", caller=ALICE, within_roots=True).action == "created"
        for path in (outside / "key.md", root / "link.md", root / "dir" / "key.md", root / ".." / "private" / "key.md",
                     outside / "missing.md"):
            with pytest.raises(ValidationError, match="outside the folders"):
                mem.files.ingest(path, caller=ALICE, within_roots=True)
        with pytest.raises(ValidationError, match="not an absolute path"):
            mem.files.ingest("ok.md", caller=ALICE, within_roots=True)
        assert [(f.scope, f.path) for f in mem.files.list(caller=ALICE)] == [
            ("global", str(outside / "key.md")), ("user:alice", str(root / "ok.md"))]


def test_ingest_is_a_write(db_target, tmp_path):
    (tmp_path / "a.md").write_text("# a\n\ntext\n")
    with Memory.open(db_target, writes={"enabled": False}) as mem:
        with pytest.raises(WritesDisabledError):
            mem.files.ingest(tmp_path / "a.md", caller=ADMIN)


# -- doors -------------------------------------------------------------------------------------
def test_cli_adds_lists_and_removes_files(tmp_path):
    docs = tmp_path / "docs"
    (docs / ".hidden").mkdir(parents=True)
    (docs / "deploy.md").write_text(MARKDOWN)
    (docs / "pipeline.py").write_text(PYTHON)
    (docs / "image.png").write_bytes(b"\x89PNG")
    (docs / ".hidden" / "skip.md").write_text("# no\n")
    (tmp_path / "report.pdf").write_bytes(make_pdf(["Walrus revenue", "Flamingo appendix"]))
    db = str(tmp_path / "cli.db")
    runner = CliRunner(env={"COLUMNS": "400"})

    added = runner.invoke(cli, ["--db", db, "files", "add", str(docs), str(tmp_path / "report.pdf"), "--json"])
    assert added.exit_code == 0, added.output
    body = json.loads(added.stdout)
    assert [Path(f["path"]).name for f in body["files"]] == ["deploy.md", "pipeline.py", "report.pdf"]
    assert {f["action"] for f in body["files"]} == {"created"} and body["failed"] == 0
    with Memory.open(db) as mem:
        assert mem.upkeep.unembedded() == 0  # embedded before the command returned
        hits = mem.search("Flamingo appendix", sources=["chunk"])
        assert hits[0].origin["pages"] == [1, 2]  # two short pages, one chunk

    again = runner.invoke(cli, ["--db", db, "files", "add", str(docs / "deploy.md"), str(tmp_path / "nope.md")])
    assert again.exit_code == 1
    assert "unchanged" in again.stdout and "Error: " in again.stderr and "no readable file" in again.stderr

    listed = runner.invoke(cli, ["--db", db, "files", "list"])
    assert listed.exit_code == 0 and "pipeline.py" in listed.stdout and "pdf" in listed.stdout
    removed = runner.invoke(cli, ["--db", db, "--json", "files", "remove", str(docs / "deploy.md")])
    assert removed.exit_code == 0 and json.loads(removed.stdout)["removed"][0]["path"] == str(docs / "deploy.md")
    assert len(json.loads(runner.invoke(cli, ["--db", db, "files", "list", "--json"]).stdout)) == 2


def test_rest_ingests_only_under_the_roots_and_in_the_callers_scope(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    (root / "deploy.md").write_text(MARKDOWN)
    (tmp_path / "secret.md").write_text("# secret\n")
    with Memory.open(tmp_path / "rest.db", files={"roots": [str(root)]}) as mem:
        tokens = TokenStore.for_memory(mem)
        alice = tokens.create(user_id="alice")[1]
        bob = tokens.create(user_id="bob")[1]
        client = TestClient(create_app(mem, tokens=tokens), base_url="http://127.0.0.1:8765")
        as_alice, as_bob = {"Authorization": f"Bearer {alice}"}, {"Authorization": f"Bearer {bob}"}

        refused = client.post("/v1/files", json={"path": str(tmp_path / "secret.md")}, headers=as_alice)
        assert refused.status_code == 400 and "outside" in refused.json()["error"]["message"]
        made = client.post("/v1/files", json={"path": str(root / "deploy.md")}, headers=as_alice)
        assert made.status_code == 200, made.text
        body = made.json()
        assert body["action"] == "created" and body["scope"] == "user:alice" and body["chunks"] >= 1
        assert client.post("/v1/files", json={"path": str(root / "deploy.md")}, headers=as_alice).json()["action"] == "unchanged"

        assert [f["path"] for f in client.get("/v1/files", headers=as_alice).json()["files"]] == [str(root / "deploy.md")]
        assert client.get("/v1/files", headers=as_bob).json()["files"] == []
        assert client.get(f"/v1/files/{body['file_id']}", headers=as_bob).status_code == 404
        assert client.delete(f"/v1/files/{body['file_id']}", headers=as_bob).status_code == 404
        gone = client.delete(f"/v1/files/{body['file_id']}", headers=as_alice)
        assert gone.status_code == 200 and gone.json()["removed"] == body["file_id"]
        assert client.get("/v1/files", headers=as_alice).json()["files"] == []
        tokens.close()


def test_a_file_may_name_the_message_it_came_with(mem, tmp_path):
    (tmp_path / "a.md").write_text("# Attached\n\nThe contract draft Carol sent.\n")
    with pytest.raises(NotFoundError, match="no message"):
        mem.files.ingest(tmp_path / "a.md", caller=ALICE, message_id="0123abcd-0000-4000-8000-000000000000")
    with pytest.raises(ValidationError, match="ids are UUIDs"):
        mem.files.ingest(tmp_path / "a.md", caller=ALICE, message_id="not-an-id")
    said = mem.conversations.log([{"role": "user", "content": "Here is the contract draft"}], caller=ALICE, session_id="s1")
    with pytest.raises(NotFoundError, match="no message"):  # another user's message is none of bob's business
        mem.files.ingest(tmp_path / "a.md", caller=BOB, message_id=said.ids[0])
    made = mem.files.ingest(tmp_path / "a.md", caller=ALICE, message_id=said.ids[0])
    assert mem.files.get(made.file_id, caller=ALICE).message_id == said.ids[0]


# -- a hostile client --------------------------------------------------------------------------
def test_a_symlink_swapped_in_between_the_check_and_the_open_is_not_followed(db_target, tmp_path, monkeypatch):
    """The race: the path is checked (resolved under the root), then replaced by a symlink to a file outside
    before it is opened. The swap is made deterministic by doing it from inside the check."""
    import clawrecall.engine._files as engine_files

    root, outside = tmp_path / "shared", tmp_path / "private"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nThe vault passphrase is walrus-hexagon.\n")
    real_type = engine_files.file_type

    def swap(name: str, path: Path, to: Path):
        def file_type(p):  # called once the path was checked, before the file is opened
            moved = tmp_path / f"{name}.link"
            moved.symlink_to(to)
            if path.is_dir():
                path.rename(tmp_path / f"{name}.aside")
            os.replace(moved, path)  # an atomic rename, as an attacker's loop does
            return real_type(p)
        return file_type

    with Memory.open(db_target, files={"roots": [str(root)]}) as mem:
        for name, path, to in (("file", root / "note.md", outside / "secret.md"), ("dir", root / "sub", outside)):
            if name == "file":
                path.write_text("# Note\n\nAn innocent note.\n")
            else:
                (path / "secret.md").write_text("# decoy\n\nA decoy.\n")
            monkeypatch.setattr(engine_files, "file_type", swap(name, path, to))
            target = path if name == "file" else path / "secret.md"
            with pytest.raises(ValidationError, match="changed while it was being read"):
                mem.files.ingest(target, caller=ALICE, within_roots=True)
            monkeypatch.setattr(engine_files, "file_type", real_type)
        assert mem.search("walrus-hexagon vault passphrase", caller=ALICE, sources=["chunk"]) == []
        assert mem.files.list(caller=ALICE) == []


def test_a_hard_link_to_a_file_outside_the_roots_is_refused(db_target, tmp_path):
    root, outside = tmp_path / "shared", tmp_path / "private"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nThe vault passphrase is walrus-hexagon.\n")
    os.link(outside / "secret.md", root / "innocent.md")
    with Memory.open(db_target, files={"roots": [str(root)]}) as mem:
        with pytest.raises(ValidationError, match="other hard links"):
            mem.files.ingest(root / "innocent.md", caller=ALICE, within_roots=True)
        assert mem.files.list(caller=ALICE) == []
        assert mem.files.ingest(root / "innocent.md", caller=ALICE).action == "created"  # the local user may


def test_a_file_name_is_never_looked_up_on_the_servers_filesystem(tmp_path, monkeypatch):
    """`~user`, a symlink loop in the server's working directory, a relative path: "not found", never a 500."""
    root = tmp_path / "shared"
    root.mkdir()
    (root / "deploy.md").write_text(MARKDOWN)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    monkeypatch.chdir(tmp_path)
    with Memory.open(tmp_path / "rest.db", files={"roots": [str(root)]}) as mem:
        tokens = TokenStore.for_memory(mem)
        alice = {"Authorization": f"Bearer {tokens.create(user_id='alice')[1]}"}
        client = TestClient(create_app(mem, tokens=tokens), base_url="http://127.0.0.1:8765",
                            raise_server_exceptions=False)
        made = client.post("/v1/files", json={"path": str(root / "deploy.md")}, headers=alice).json()
        for name in ("~", "~nosuchuser", "~root", "loop", "~nosuchuser%2Fx.md", "deploy.md"):
            for method in (client.get, client.delete):
                answer = method(f"/v1/files/{name}", headers=alice)
                assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found", (name, answer.text)
        for path in ("~nosuchuser/x.md", "~/x.md", "loop"):
            answer = client.post("/v1/files", json={"path": path}, headers=alice)
            assert answer.status_code == 400 and "not an absolute path" in answer.json()["error"]["message"]
        assert client.get(f"/v1/files/{made['file_id']}", headers=alice).status_code == 200
        tokens.close()
    with Memory.open(tmp_path / "rest.db") as mem:  # the local user: `~` is theirs, failures are "not found"
        for name in ("~nosuchuser", "loop"):
            with pytest.raises(NotFoundError):
                mem.files.remove(name, caller=ALICE)
            with pytest.raises(NotFoundError):
                mem.files.ingest(name, caller=ALICE)
    removed = CliRunner().invoke(cli, ["--db", str(tmp_path / "rest.db"), "files", "remove", "~nosuchuser"])
    assert removed.exit_code == 1 and "Traceback" not in removed.output
    assert "no ingested file '~nosuchuser'" in removed.stderr


def pdf_bomb(pages: int, repeats: int) -> bytes:
    """A small PDF whose pages all draw one compressed content stream showing `repeats` lines of text."""
    import io
    import zlib

    from pypdf import PdfWriter
    from pypdf.generic import DictionaryObject, NameObject, StreamObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica")}))
    stream = StreamObject()
    stream._data = zlib.compress(("BT /F1 12 Tf 72 720 Td " + "(walrus hexagon lorem) Tj T* " * repeats + "ET").encode(), 9)
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    content = writer._add_object(stream)
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Contents")] = content
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_a_small_pdf_that_unfolds_into_much_text_is_refused_at_the_limits(db_target, tmp_path):
    """Bytes do not bound the work: ten pages drawing one compressed stream. The text, the pages and the
    time are bounded (`files.max_text_chars`, `max_pages`, `max_seconds`), and nothing of the file is stored."""
    from clawrecall.files.readers import pdf_pages

    bomb = pdf_bomb(pages=10, repeats=3000)
    assert len(bomb) < 3000
    (tmp_path / "bomb.pdf").write_bytes(bomb)
    with Memory.open(db_target, files={"max_text_chars": 100_000}) as mem:
        with pytest.raises(ValidationError, match=r"more than 100000 characters of text \(files.max_text_chars\)"):
            mem.files.ingest(tmp_path / "bomb.pdf", caller=ALICE)
        assert mem.files.list(caller=ALICE) == [] and mem.count(caller=ALICE) == 0
    with Memory.open(db_target, files={"max_pages": 9}) as mem:
        with pytest.raises(ValidationError, match=r"has 10 pages; the limit is 9 \(files.max_pages\)"):
            mem.files.ingest(tmp_path / "bomb.pdf", caller=ALICE)
    ticks = iter(range(1_000_000))  # a clock that moves one second each time it is read
    with pytest.raises(ValidationError, match=r"takes longer than 5 s to read \(files.max_seconds\)"):
        pdf_pages(bomb, "bomb.pdf", Limits(max_chars=10**9, max_pages=100, max_seconds=5, clock=lambda: next(ticks)))
    pages = pdf_pages(bomb, "bomb.pdf", Limits(max_chars=10**9, max_pages=100, max_seconds=5, clock=lambda: 0.0))
    assert len(pages) == 10 and pages[0].count("walrus hexagon lorem") == 3000  # within the limits: read whole


def test_a_server_reads_files_on_its_own_bounded_queue_not_on_the_request_threads(tmp_path, monkeypatch):
    """More ingests than the server has request threads, each stuck in reading: `files.workers` (1) read at a
    time, the others wait without a thread, and a search is still answered meanwhile."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import clawrecall.engine._files as engine_files

    root = tmp_path / "shared"
    root.mkdir()
    (root / "a.md").write_text("# Notes\n\nOtters hold hands while they sleep.\n")
    release, entered = threading.Event(), threading.Semaphore(0)
    running, most = [0], [0]
    real_read = engine_files.read

    def stuck_read(*args):
        running[0] += 1
        most[0] = max(most[0], running[0])
        entered.release()
        release.wait(60)
        running[0] -= 1
        return real_read(*args)

    monkeypatch.setattr(engine_files, "read", stuck_read)
    with Memory.open(tmp_path / "rest.db", files={"roots": [str(root)]}) as mem:
        mem.add("Alice's locker code is 7731", user_id="alice")
        tokens = TokenStore.for_memory(mem)
        alice = {"Authorization": f"Bearer {tokens.create(user_id='alice')[1]}"}
        with TestClient(create_app(mem, tokens=tokens), base_url="http://127.0.0.1:8765") as client, \
                ThreadPoolExecutor(48) as pool:
            posts = [pool.submit(client.post, "/v1/files", json={"path": str(root / "a.md")}, headers=alice)
                     for _ in range(45)]  # more than the 40 request threads
            assert entered.acquire(timeout=60)  # one is reading
            found = pool.submit(client.post, "/v1/search", json={"query": "locker code"}, headers=alice).result(60)
            assert found.status_code == 200 and "7731" in found.text
            release.set()
            assert {p.result(60).json()["action"] for p in posts} == {"created", "unchanged"}
        assert most[0] == 1
        tokens.close()


def test_roots_may_be_per_user_or_agent(db_target, tmp_path):
    """`{user}` and `{agent}` in a root make it each caller's own: bob cannot have alice's folder read, and an id
    that is no plain folder name (`..`) names no folder at all."""
    shared = tmp_path / "attachments"
    for who in ("alice", "bob"):
        (shared / who).mkdir(parents=True)
        (shared / who / "notes.md").write_text(f"# {who}\n\nThe notes of {who}.\n")
    (tmp_path / "top.md").write_text("# Top\n\nNot in anyone's folder.\n")
    (shared / "main").mkdir()
    (shared / "main" / "agent.md").write_text("# Agent\n\nThe agent's own notes.\n")
    roots = [str(shared / "{user}"), str(shared / "{agent}")]
    with Memory.open(db_target, files={"roots": roots}) as mem:
        assert mem.files.ingest(shared / "alice" / "notes.md", caller=ALICE, within_roots=True).action == "created"
        assert mem.files.ingest(shared / "main" / "agent.md", caller=Caller(None, "main"), within_roots=True)
        for caller, path in ((BOB, shared / "alice" / "notes.md"), (Caller(".."), tmp_path / "top.md"),
                             (Caller(None, "main"), shared / "alice" / "notes.md"), (ADMIN, shared / "bob" / "notes.md")):
            with pytest.raises(ValidationError, match="outside the folders"):
                mem.files.ingest(path, caller=caller, within_roots=True)
