"""Keeping a store in shape: purging what was deleted long ago, re-embedding with a new model, the vector index."""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator

from .._time import utcnow
from ..config import Config
from ..errors import ValidationError
from ..models import STORED_KINDS, BackupSummary, EmbeddingFingerprint, PurgeRun, ReembedState
from ..scopes import Caller
from ..storage import Filters, Store
from ..storage.backup import backup
from ._embedding import Embedding, Progress
from ._validate import require_writes
from ._writes import Writes, actor_of

_PASSES = 3  # passes over the store before the rest is embedded holding the write lock
_LAST_PURGE = "last_purge"  # meta: the last purge, as PurgeRun JSON
BACKUP_NAME = "clawrecall-{:%Y%m%dT%H%M%SZ}.tar.gz"  # scheduled backups: names sort as their times


class Maintenance:
    """Whole-store jobs. Erasures go through the write path, so history records them like any other."""

    def __init__(self, store: Store, config: Config, embedding: Embedding, writes: Writes):
        self.store = store
        self.config = config
        self.embedding = embedding
        self.writes = writes

    def purge(self, caller: Caller, older_than_days: float | None = None) -> int:
        """Hard-delete memories soft-deleted longer ago than the retention period, of those the caller may erase."""
        require_writes(self.config)
        days = self.config.writes.retention_days if older_than_days is None else older_than_days
        if not 0 <= days <= 365_000:  # a timedelta cannot reach further back
            raise ValidationError(f"older_than_days must be between 0 and 365000, got {days}")
        now = utcnow()
        ids = self.writes.erasable(self.store.memories.purgeable(now - timedelta(days=days)), caller)
        if ids:
            self.writes.erase(ids, "purge", actor_of(caller))
        self.store.set_meta(_LAST_PURGE, PurgeRun(at=now, purged=len(ids)).model_dump_json())
        return len(ids)

    def last_purge(self) -> PurgeRun | None:
        raw = self.store.get_meta(_LAST_PURGE)
        return None if raw is None else PurgeRun.model_validate(json.loads(raw))

    def purge_due(self, now: datetime) -> bool:
        """Whether the server's schedule (`writes.purge_every_hours`; 0: never) calls for a purge now. The
        last one is read from the store, so a restart neither skips nor repeats one."""
        every = self.config.writes.purge_every_hours
        last = self.last_purge()
        return every > 0 and (last is None or last.at <= now - timedelta(hours=every))

    def scheduled_backup(self, now: datetime) -> BackupSummary | None:
        """A backup into `backups.dir` when the newest there is `backups.every_hours` old (none when `dir` is
        unset); then only the newest `backups.keep` stay. The folder is the schedule's memory."""
        cfg = self.config.backups
        if cfg.dir is None:
            return None
        taken = self.saved_backups()
        if taken and taken[-1].name > BACKUP_NAME.format(now - timedelta(hours=cfg.every_hours)):
            return None
        summary = backup(self.store, Path(cfg.dir).expanduser() / BACKUP_NAME.format(now))
        for old in self.saved_backups()[: -cfg.keep]:
            old.unlink()
        return summary

    def saved_backups(self) -> list[Path]:
        """The scheduled backups in `backups.dir`, oldest first."""
        folder = self.config.backups.dir
        return [] if folder is None else sorted(Path(folder).expanduser().glob("clawrecall-*.tar.gz"))

    def reembed(self, *, progress: Progress | None = None, batch_size: int = 256) -> int:
        """Re-embed every row (memories, messages, file chunks, long messages' windows; deleted and awaiting ones too) with the
        configured model and adopt it as the store's model. Returns how many rows it re-embedded.

        The new vectors are staged (`storage/staging.py`) and swapped in with the new fingerprint in
        one transaction, so searches use the old model until then and a failure or a crash leaves the
        store as it was; running it again resumes from the staged vectors."""
        require_writes(self.config)
        if not 1 <= batch_size <= 4096:
            raise ValidationError(f"batch_size must be between 1 and 4096, got {batch_size}")
        embedder = self.embedding.embedder
        embedder.ensure_dimensions()  # a provider that cannot embed fails here, before anything changes
        target = embedder.fingerprint.model_dump_json()
        staged = self.store.staged
        staged.begin(target)
        total = self.store.memories.count(Filters(include_deleted=True, include_expired=True, include_superseded=True, kinds=STORED_KINDS))
        done = staged.count()
        if progress:
            progress(done, total)

        def embed(rows: list[tuple[int, str, str, object]]) -> None:
            staged.stage(target, rows, embedder.embed([r[2] for r in rows], kind="passage"))

        for _ in range(_PASSES):  # later passes: rows written or changed while the one before ran
            last, found = 0, 0
            while rows := staged.pending(last, batch_size):
                embed(rows)
                last, found, done = rows[-1][0], found + len(rows), min(done + len(rows), total)
                if progress:
                    progress(done, total)
            if found <= batch_size:
                break
        with self.store.transaction():
            self.store.lock_writes()
            if rows := staged.pending(0, None):  # the last few, while no writer can add more
                embed(rows)
            changed = self.store.swap_staged_vectors(target, self.embedding.model_name)
            self.embedding.adopt()
        staged.clear()
        self.store.build_vector_index()
        if progress:
            progress(total, total)
        return changed

    def reembed_state(self) -> ReembedState:
        """What `doctor` reports of the vectors: a re-embedding left unfinished, rows of another model."""
        stored = self.embedding.stored_fingerprint()
        target = self.store.staged.target()
        other_model, other_dims = (0, 0) if stored is None else self.store.memories.other_vectors(
            f"{stored.provider}/{stored.model}", stored.dimensions)
        return ReembedState(
            target=None if target is None else EmbeddingFingerprint.model_validate_json(target),
            staged=self.store.staged.rows(), other_model=other_model, other_dimensions=other_dims,
        )

    @contextmanager
    def deferred_vector_index(self, *, rebuild: bool = False) -> Iterator[None]:
        require_writes(self.config)
        with self.store.deferred_vector_index(rebuild=rebuild):
            yield

    def build_vector_index(self) -> None:
        require_writes(self.config)
        self.store.build_vector_index()
