"""Backups: a store's tables as one tar file, the same on both backends, so a SQLite store's backup
restores into PostgreSQL and back.

The tar holds `manifest.json` (format, the migration steps the store had, the embedding
fingerprint, each table's row count and SHA-256) and one `<table>.jsonl` per table, every row
read from one snapshot (`Store.snapshot`: a SQLite read transaction over WAL, a PostgreSQL
REPEATABLE READ transaction), so writers go on while it is taken and it is consistent. Values are
JSON: times ISO-8601, vectors base64 float32. A restore checks the whole file first, refuses a
store that is not empty and a backup from a newer schema, then writes every table in one
transaction (memories through `store.memories.insert`, so each backend indexes them its own way).
History ids are renumbered in order (PostgreSQL generates them); the rest comes back as it was.
"""

from __future__ import annotations

import base64
import hashlib
import io
import itertools
import json
import os
import tarfile
import tempfile
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .._time import utcnow
from ..errors import StorageError, ValidationError
from ..models import BackupSummary, MemoryRecord
from . import migrations
from .dialect import RowMap
from .schema import MEMORIES, META, MIGRATIONS, Column, Table

if TYPE_CHECKING:
    import numpy as np

    from .sql import Store

FORMAT = "clawrecall-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: meta keys a backend keeps for itself (caches, a bulk load's state): the restoring store makes its own
_OWN_META = {"schema_version", "vector_dims", "vector_index_deferred"}
_BATCH = 1000

Progress = Callable[[int, int], None]


def tables() -> list[Table]:
    """Every table a backup carries, in restore order (`meta` is read apart, `migrations` is the target's own)."""
    return [t for s in migrations.SETS for t in s.tables if t not in (META, MIGRATIONS)]


def _columns(table: Table) -> list[Column]:
    """A table's portable columns: all but a backend's own (a tsvector) and generated ids."""
    return [c for c in table.columns if c.only is None and c.type != "serial"]


# -- values <-> JSON ----------------------------------------------------------------------------
def _to_json(col: Column, value: Any) -> Any:
    if value is None:
        return None
    if col.type == "time":
        return value.isoformat()
    if col.type == "vector":
        import numpy as np

        return base64.b64encode(np.asarray(value, dtype="<f4").tobytes()).decode("ascii")
    return value


def _from_json(col: Column, value: Any) -> Any:
    if value is None:
        return None
    if col.type == "time":
        return datetime.fromisoformat(value)
    if col.type == "vector":
        import numpy as np

        return np.frombuffer(base64.b64decode(value), dtype="<f4")
    return value


# -- backup --------------------------------------------------------------------------------------
def backup(store: Store, path: str | Path, progress: Progress | None = None) -> BackupSummary:
    """Write the store to `path` (a tar; `.tar.gz` compresses), atomically: a crash leaves no half file."""
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    d = store.dialect
    summary = BackupSummary(path=str(target), backend=store.backend, schema_version=store.schema_version())
    done_steps = migrations.applied(store)[0]
    manifest: dict[str, Any] = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "backend": store.backend, "created_at": utcnow().isoformat(),
        "schema_version": summary.schema_version,
        "migrations": {s: sorted(names) for s, names in done_steps.items()}, "tables": {},
    }
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".backup-") as work:
        with store.snapshot() as read:
            meta = {k: v for k, v in read("SELECT key, value FROM meta") if k not in _OWN_META}
            manifest["meta"] = meta
            wanted = [t for s in migrations.SETS if s.name in done_steps for t in s.tables if t in tables()]
            total = sum(int(next(iter(read(f"SELECT count(*) FROM {t.name}")))[0]) for t in wanted)
            written = 0
            for table in wanted:
                cols = _columns(table)
                convert = [(c, d.from_db.get(c.type)) for c in cols]
                order = d.order_column if table.ordered else ", ".join(table.key)
                digest, rows = hashlib.sha256(), 0
                with open(Path(work, f"{table.name}.jsonl"), "wb") as fh:
                    sql = f"SELECT {', '.join(c.name for c in cols)} FROM {table.name} ORDER BY {order}"
                    for row in read(sql):
                        obj = {c.name: _to_json(c, v if fn is None or v is None else fn(v))
                               for (c, fn), v in zip(convert, row)}
                        line = (json.dumps(obj, ensure_ascii=False, default=str) + "\n").encode()
                        fh.write(line)
                        digest.update(line)
                        rows += 1
                        written += 1
                        if progress is not None and written % _BATCH == 0:
                            progress(written, total)
                manifest["tables"][table.name] = {"rows": rows, "sha256": digest.hexdigest(),
                                                  "columns": [c.name for c in cols]}
                summary.tables[table.name] = rows
        if progress is not None:
            progress(total, total)
        partial = Path(work, "backup.tar")
        with tarfile.open(partial, "w:gz" if target.name.endswith((".gz", ".tgz")) else "w") as tar:
            data = json.dumps(manifest, indent=2).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            for name in manifest["tables"]:
                tar.add(Path(work, f"{name}.jsonl"), arcname=f"{name}.jsonl")
        with open(partial, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(partial, target)
    summary.bytes = target.stat().st_size
    return summary


# -- restore -------------------------------------------------------------------------------------
def read_manifest(tar: tarfile.TarFile, where: str) -> dict[str, Any]:
    try:
        member = tar.extractfile(MANIFEST)
        manifest = json.loads(member.read()) if member is not None else None
    except (KeyError, ValueError):
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValidationError(f"{where} is not a clawrecall backup (no {MANIFEST})")
    if manifest.get("format_version", 0) > FORMAT_VERSION:
        raise ValidationError(f"{where} is a backup format newer than this clawrecall reads: upgrade clawrecall")
    known = {(s.name, n) for s in migrations.SETS for n in (*s.steps, *s.retired)}
    newer = sorted(f"{s}/{n}" for s, names in manifest.get("migrations", {}).items() for n in names if (s, n) not in known)
    unknown_tables = sorted(set(manifest.get("tables", {})) - {t.name for t in tables()})
    if newer or unknown_tables:
        raise ValidationError(f"{where} comes from a newer clawrecall (schema: {', '.join(newer or unknown_tables)}): "
                              "upgrade clawrecall to restore it")
    return manifest


def _rows(tar: tarfile.TarFile, name: str) -> Iterator[dict[str, Any]]:
    fh = tar.extractfile(f"{name}.jsonl")
    if fh is None:
        raise ValidationError(f"backup has no {name}.jsonl")
    for line in fh:
        yield json.loads(line)


def verify(tar: tarfile.TarFile, manifest: dict[str, Any], where: str) -> None:
    """Each table's file hashes and counts as the manifest says: a damaged backup is refused before a row is written."""
    for name, info in manifest["tables"].items():
        fh = tar.extractfile(f"{name}.jsonl") if name + ".jsonl" in tar.getnames() else None
        if fh is None:
            raise ValidationError(f"{where} is damaged: {name}.jsonl is missing")
        digest, rows = hashlib.sha256(), 0
        for line in fh:
            digest.update(line)
            rows += 1
        if digest.hexdigest() != info["sha256"] or rows != info["rows"]:
            raise ValidationError(f"{where} is damaged: {name}.jsonl does not match its manifest")


def restore(store: Store, path: str | Path, progress: Progress | None = None) -> BackupSummary:
    """Restore a backup into `store`, which must be empty; all of it in one transaction, or nothing."""
    source = Path(path).expanduser()
    where = str(source)
    try:
        tar = tarfile.open(source)
    except (OSError, tarfile.TarError) as exc:
        raise ValidationError(f"cannot read backup {where}: {exc}") from None
    with tar:
        manifest = read_manifest(tar, where)
        verify(tar, manifest, where)
        _check_empty(store)
        summary = BackupSummary(path=str(source), backend=manifest["backend"],
                                schema_version=int(manifest.get("schema_version", 0)))
        total = sum(info["rows"] for info in manifest["tables"].values())
        done = 0
        p = store.dialect.p
        with store.deferred_vector_index(), store.transaction():
            for key, value in manifest.get("meta", {}).items():
                if key not in _OWN_META:
                    store.run(f"INSERT INTO meta (key, value) VALUES ({p}, {p}) "
                              "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))
            by_name = {t.name: t for t in tables()}
            for name, info in manifest["tables"].items():
                table = by_name[name]
                cols = [c for c in _columns(table) if c.name in info["columns"]]
                write = _memories_writer(store) if table is MEMORIES else _table_writer(store, table, cols)
                stream = _rows(tar, name)
                while batch := list(itertools.islice(stream, _BATCH)):
                    write([{c.name: _from_json(c, row.get(c.name)) for c in cols} for row in batch])
                    done += len(batch)
                    if progress is not None:
                        progress(done, total)
                summary.tables[name] = info["rows"]
            for name, rows in summary.tables.items():
                if (have := int(store.run(f"SELECT count(*) FROM {name}")[0][0])) != rows:
                    raise StorageError(f"restore of {name} wrote {have} rows where the backup has {rows}: nothing restored")
    if progress is not None:
        progress(total, total)
    summary.bytes = source.stat().st_size
    return summary


def _check_empty(store: Store) -> None:
    full = [t.name for t in tables() if store.table_exists(t.name) and store.run(f"SELECT 1 FROM {t.name} LIMIT 1")]
    if full or store.get_meta("embedding_fingerprint") is not None:
        raise ValidationError(f"{store.location} is not empty ({', '.join(full) or 'it has an embedding model'}): "
                              "restore into a new store")


def _memories_writer(store: Store) -> Callable[[list[dict[str, Any]]], None]:
    """Memories through the backend's own insert (its text indexes, its vector index), in runs of rows
    alike in having a vector and its dimensions (a store mid re-embedding may mix them)."""
    import numpy as np

    def write(rows: list[dict[str, Any]]) -> None:
        run: list[dict[str, Any]] = []
        for row in rows:
            if run and _shape(run[0]) != _shape(row):
                _insert(run)
                run = []
            run.append(row)
        if run:
            _insert(run)

    def _shape(row: dict[str, Any]) -> int | None:
        v = row.get("embedding")
        return None if v is None else len(v)

    def _insert(run: list[dict[str, Any]]) -> None:
        vectors: np.ndarray | None = None
        if run[0].get("embedding") is not None:
            vectors = np.stack([r["embedding"] for r in run])
        records = [MemoryRecord(**{k: v for k, v in r.items() if k != "embedding"}) for r in run]
        store.memories.insert(records, vectors)

    return write


def _table_writer(store: Store, table: Table, cols: list[Column]) -> Callable[[list[dict[str, Any]]], None]:
    """Any other table: its declared columns, converted by the dialect; a column the backup lacks (an
    older schema) takes its declared default."""
    names = tuple(c.name for c in _columns(table))
    rowmap = RowMap(store.dialect, table, names)
    defaults = {c.name: c.default for c in _columns(table)}
    sql = f"INSERT INTO {table.name} ({rowmap.columns}) VALUES ({store.dialect.marks(len(names))})"

    def write(rows: list[dict[str, Any]]) -> None:
        store.run_many(sql, (rowmap.row(SimpleNamespace(**{**defaults, **r})) for r in rows))

    return write
