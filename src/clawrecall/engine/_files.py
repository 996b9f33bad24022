"""`mem.files`: files made searchable (openclaw-memory-pgvector's `files` and `file_chunks`): Markdown, text, code, PDF.

`ingest` reads a file, cuts it into chunks that fit the embedding model (`clawrecall.files`), and
stores each chunk as a `memories` row of kind `chunk` (searched with `sources=["chunk"]`, guarded by
the same scope check) plus one `files` row. Vectors come after the answer (`_backfill.py`).
A file is known by its resolved path in the caller's scope: ingesting it again replaces its chunks
when its content changed, and does nothing when it did not.

The file is read with this process's rights. A server's client must not make it read anything it
can (`/etc/passwd`, a key): the doors that serve others pass `within_roots=True`, which refuses
every path that does not resolve, symlinks followed, under a folder of `files.roots`. The file is
then opened by walking down from the root's own descriptor without following any link, so a
symlink swapped in after the check is refused, not followed; a file with other hard links is
refused too (one of them may be outside the roots). What is checked is what is read.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import os
import re
import stat
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._time import utcnow
from ..config import Config
from ..errors import NotFoundError, ValidationError
from ..files import FILE_TYPES, FileType, Limits, chunk, file_type, read, tokens_for
from ..models import FileRecord, Ingested, MemoryRecord
from ..scopes import Caller, as_caller, check_change, read_scopes, write_scope
from ..storage import Filters, Store
from ._backfill import Backfill
from ._validate import _is_uuid, check_int, check_text, new_ids, require_writes
from ._writes import Writes

if TYPE_CHECKING:
    import numpy as np

_CHUNK_IMPORTANCE = 0.5  # a chunk's weight in ranking (memories default to 0.7): read, not chosen to be kept
_ID_PREFIX = re.compile(r"^[0-9a-f-]{8,36}$")
_ALL = 1_000_000_000


class Files:
    def __init__(self, store: Store, config: Config, writes: Writes, backfill: Backfill):
        self._store = store
        self._config = config
        self._writes = writes
        self._backfill = backfill

    def ingest(
        self, path: str | os.PathLike[str], *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, message_id: str | None = None, within_roots: bool = False,
    ) -> Ingested:
        """Make a file searchable in the caller's own scope; durable when it returns, embedded after.

        A file already ingested there (same resolved path) is replaced if its content changed, else
        left as it is. `message_id`: the conversation message the file came with. `within_roots`:
        refuse paths outside `files.roots` (for doors serving other processes)."""
        caller = as_caller(caller, user_id, agent_id)
        require_writes(self._config)
        if message_id is not None and not (isinstance(message_id, str) and _is_uuid(message_id.lower())):
            raise ValidationError(f"invalid message id {message_id!r}: ids are UUIDs")
        scope = write_scope(caller, None, access=self._config.access)
        target, kind, root = self._check_path(path, caller if within_roots else None)
        data = self._read(target, root)
        digest = hashlib.sha256(data).hexdigest()
        known = self._store.files.at(scope, str(target))
        if known is not None and known.content_hash == digest:
            return _result("unchanged", known)
        if message_id is not None:
            message_id = message_id.lower()
            said, scopes = self._store.messages.of([message_id]).get(message_id), read_scopes(caller, None, access=self._config.access)
            if said is None or (scopes is not None and said.scope not in scopes):
                raise NotFoundError(f"no message with id {message_id!r}")
        cfg = self._config.files
        limits = Limits(cfg.max_text_chars, cfg.max_pages, cfg.max_seconds)
        chunks = chunk(read(data, kind, target.name, limits), tokens_for(self._config.embedding, cfg.chunk_tokens), cfg.overlap)
        if not chunks:
            raise ValidationError(f"{target} has no text to index")
        for attempt in (1, 2):
            try:
                return self._save(target, kind, data, digest, chunks, caller, scope, message_id)
            except Exception as exc:  # another writer ingested the same file between our read and insert
                if attempt == 2 or not self._store.is_conflict(exc):
                    raise
        raise AssertionError("unreachable")

    def _save(
        self, target: Path, kind: str, data: bytes, digest: str, chunks: list[Any], caller: Caller, scope: str,
        message_id: str | None,
    ) -> Ingested:
        now = utcnow()
        with self._store.transaction():
            known = self._store.files.at(scope, str(target))
            if known is not None:
                known = self._store.files.get(known.id, for_update=True)  # PostgreSQL: one replacement at a time
            if known is not None and known.content_hash == digest:
                return _result("unchanged", known)
            file = FileRecord(
                id=known.id if known is not None else new_ids(1)[0], scope=scope, user_id=caller.user_id,
                agent_id=caller.agent_id, path=str(target), file_type=kind, size_bytes=len(data),
                content_hash=digest, chunk_count=len(chunks), message_id=message_id,
                created_at=known.created_at if known is not None else now, updated_at=now,
            )
            stale = self._chunk_ids(known) if known is not None else []
            place = "pages" if kind == "pdf" else "lines"
            self._writes.record([
                MemoryRecord(
                    id=chunk_id, content=c.text, importance=_CHUNK_IMPORTANCE, scope=scope, user_id=caller.user_id,
                    agent_id=caller.agent_id, source_type="file", source_id=file.id, created_at=now, updated_at=now,
                    metadata={"path": file.path, place: [c.first, c.last], "chunk": n}, kind="chunk",
                )
                for n, (chunk_id, c) in enumerate(zip(new_ids(len(chunks)), chunks), start=1)
            ])
            if known is None:
                self._store.files.insert([file])
            else:
                self._writes.unrecord(stale)
                self._store.files.replace(file)
        self._backfill.kick()
        return _result("created" if known is None else "replaced", file)

    def bring(
        self, file_id: str, path: str, kind: FileType, size_bytes: int, created_at: datetime,
        chunks: builtins.list[tuple[str, str]], vectors: dict[str, np.ndarray], *, caller: Caller | None = None,
        user_id: str | None = None, agent_id: str | None = None,
    ) -> bool:
        """Another system's file as this store keeps one (`import --from`): its record under `file_id` and its
        chunks as that system cut them, `(id, text)` in order, each with its vector in `vectors` when the
        store keeps it (else the backfill embeds it). False, and nothing written, when `file_id` is stored
        already: an import run again adds nothing."""
        caller = as_caller(caller, user_id, agent_id)
        require_writes(self._config)
        scope = write_scope(caller, None, access=self._config.access)
        with self._store.transaction():
            if self._store.files.get(file_id) is not None:
                return False
            file = FileRecord(
                id=file_id, scope=scope, user_id=caller.user_id, agent_id=caller.agent_id, path=path, file_type=kind,
                size_bytes=size_bytes, content_hash=hashlib.sha256("\n".join(t for _, t in chunks).encode()).hexdigest(),
                chunk_count=len(chunks), created_at=created_at, updated_at=created_at,
            )
            records = [
                MemoryRecord(
                    id=chunk_id, content=text, importance=_CHUNK_IMPORTANCE, scope=scope, user_id=caller.user_id,
                    agent_id=caller.agent_id, source_type="file", source_id=file_id, created_at=created_at,
                    updated_at=created_at, metadata={"path": path, "chunk": n}, kind="chunk",
                )
                for n, (chunk_id, text) in enumerate(chunks, start=1)
            ]
            given = [r for r in records if r.id in vectors]
            if given:
                import numpy

                self._writes.record(given, numpy.stack([vectors[r.id] for r in given]))
            if len(given) < len(records):
                self._writes.record([r for r in records if r.id not in vectors])
            self._store.files.insert([file])
        self._backfill.kick()
        return True

    def list(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        limit: int = 1000, offset: int = 0,
    ) -> list[FileRecord]:
        """The ingested files the caller may read, by path."""
        caller = as_caller(caller, user_id, agent_id)
        check_int(limit, "limit", 1, 100_000)
        check_int(offset, "offset", 0, _ALL)
        return self._store.files.find(read_scopes(caller, None, access=self._config.access), limit=limit, offset=offset)

    def get(
        self, path_or_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        within_roots: bool = False,
    ) -> FileRecord:
        """An ingested file by its id (or 8+ first characters of it) or by its path, in the caller's scopes.

        `within_roots` (a server's client): the path is matched as written (made absolute lexically),
        never looked up on this machine's filesystem (`~user`, symlinks)."""
        caller = as_caller(caller, user_id, agent_id)
        if not isinstance(path_or_id, str) or not path_or_id.strip():
            raise ValidationError("give a file's id or path")
        check_text(path_or_id, "file")
        wanted = path_or_id.strip()
        scopes = read_scopes(caller, None, access=self._config.access)
        if _ID_PREFIX.match(wanted.lower()):
            found = [f for f in self._store.files.find(scopes, limit=_ALL, offset=0) if f.id.startswith(wanted.lower())]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise ValidationError(f"{wanted!r} is the start of {len(found)} file ids: give more of it")
        path = os.path.normpath(wanted) if within_roots else _local_path(wanted)
        own = write_scope(caller, None, access=self._config.access)
        for scope in [own] + [s for s in scopes or [] if s != own]:
            if (file := self._store.files.at(scope, path)) is not None:
                return file
        raise NotFoundError(f"no ingested file {wanted!r}")

    def remove(
        self, path_or_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        within_roots: bool = False,
    ) -> FileRecord:
        """Forget an ingested file: its chunks (text, vectors, index entries) and its row are gone. Erased as a
        memory is: by who ingested it, or with write access to its scope (a shared file is not any reader's)."""
        caller = as_caller(caller, user_id, agent_id)
        require_writes(self._config)
        file = self.get(path_or_id, caller=caller, within_roots=within_roots)
        check_change(caller, file, access=self._config.access, erase=True)
        with self._store.transaction():
            self._writes.unrecord(self._chunk_ids(file))
            self._store.files.delete(file.id)
        return file

    def _chunk_ids(self, file: FileRecord) -> builtins.list[str]:
        filters = Filters(scopes=[file.scope], kinds=("chunk",), source_ids=[file.id], include_deleted=True,
                          include_expired=True)
        return [r.id for r in self._store.memories.find(filters, limit=_ALL, offset=0, order="oldest")]

    # -- what may be read ---------------------------------------------------------------------
    def _check_path(self, path: str | os.PathLike[str], client: Caller | None) -> tuple[Path, FileType, Path | None]:
        """The resolved path (symlinks followed), its type and the root it is under, after the type, root and
        kind checks. `client`: a server's caller, limited to its roots; None: the local user, who reads any path."""
        if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
            raise ValidationError("give the path of a file to ingest")
        check_text(str(path), "path")
        given = Path(path)
        if client is not None and not given.is_absolute():  # `~` too: a client's `~root` is not this machine's business
            raise ValidationError(f"{str(path)!r} is not an absolute path")
        try:
            target = (given if client is not None else given.expanduser()).resolve()
        except (OSError, RuntimeError):  # a symlink loop, no permission, `~nosuchuser`
            raise NotFoundError(f"no readable file at {str(path)!r}") from None
        root = None
        if client is not None:  # before looking at the file: outside the roots, whether it exists is no one's business
            roots = self._roots(client)
            if not self._config.files.roots:
                raise ValidationError("this server reads no files: files.roots is empty (configure the folders it may read)")
            root = next((r for r in roots if target.is_relative_to(r)), None)
            if root is None:
                raise ValidationError(f"{str(path)!r} is outside the folders this server may read (files.roots)")
        if not target.exists():
            raise NotFoundError(f"no readable file at {str(path)!r}")
        if target.is_dir():
            raise ValidationError(f"{str(path)!r} is a folder: give the files in it")
        kind = file_type(target)
        allowed = self._config.files.types
        if kind is None or kind not in allowed:
            what = f"{target.suffix} files" if target.suffix else f"{target.name} (no extension to tell its type)"
            raise ValidationError(
                f"cannot ingest {what}: the types read are {', '.join(t for t in FILE_TYPES if t in allowed)} "
                "(Markdown .md, text .txt, source code such as .py or .js, PDF .pdf)"
            )
        return target, kind, root

    def _roots(self, caller: Caller) -> builtins.list[Path]:
        """`files.roots` as they apply to this caller: `{user}` and `{agent}` in a root stand for its ids. A root
        naming an id the caller lacks, or one that is no plain folder name (`..`, a `/`), is not among its roots."""
        out = []
        for root in self._config.files.roots:
            for key, value in (("{user}", caller.user_id), ("{agent}", caller.agent_id)):
                if key in root:
                    plain = value is not None and value not in (".", "..") and "/" not in value and os.sep not in value
                    root = root.replace(key, value) if value is not None and plain else ""
            if root:
                out.append(Path(root).expanduser().resolve())
        return out

    def _read(self, target: Path, root: Path | None) -> bytes:
        """The file's bytes, if it is a regular file within the size limit (a FIFO or device is refused, not read).
        Under a root: the file the check saw, or an error (`_open_under`)."""
        limit = self._config.files.max_bytes
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(target, flags) if root is None else _open_under(root, target.relative_to(root).parts, flags)
        except OSError as exc:
            raise NotFoundError(f"cannot read {target}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ValidationError(f"{target} is not a regular file")
            if root is not None and info.st_nlink != 1:
                raise ValidationError(f"{target} has other hard links (one may be outside files.roots): a server reads "
                                      "only files with one name")
            if info.st_size > limit:
                raise ValidationError(f"{target} is {info.st_size} bytes; the limit is {limit} (files.max_bytes)")
            data = fh.read(limit + 1)
        if len(data) > limit:  # it grew since
            raise ValidationError(f"{target} is over {limit} bytes (files.max_bytes)")
        return data


def _open_under(root: Path, parts: tuple[str, ...], flags: int) -> int:
    """A descriptor of `root/parts…` opened one name at a time from the root's own descriptor, following no
    symlink: one swapped in since the path was resolved is refused (ELOOP, ENOTDIR), not followed out of the root."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for n, name in enumerate(parts):
            last = n == len(parts) - 1
            try:
                inner = os.open(name, (flags if last else os.O_RDONLY | os.O_DIRECTORY) | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise ValidationError(f"{root.joinpath(*parts)} changed while it was being read (a symbolic link "
                                          "swapped in is not followed)") from None
                raise
            os.close(fd)
            fd = inner
        return fd
    except BaseException:
        os.close(fd)
        raise


def _local_path(given: str) -> str:
    """A path named by the local user (the CLI, the Python API): `~` expanded and resolved; as written when
    that fails (`~nosuchuser`, a symlink loop), so the lookup answers "not found"."""
    try:
        return str(Path(given).expanduser().resolve())
    except (OSError, RuntimeError):
        return os.path.abspath(given)


def _result(action: str, file: FileRecord) -> Ingested:
    return Ingested(
        action=action, file_id=file.id, path=file.path, file_type=file.file_type, chunks=file.chunk_count,
        size_bytes=file.size_bytes, scope=file.scope,
    )
