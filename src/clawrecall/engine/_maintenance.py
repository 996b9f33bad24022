"""Keeping a store in shape: purging what was deleted long ago, re-embedding with a new model, the vector index."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta
from typing import Iterator

from .._time import utcnow
from ..config import Config
from ..errors import ValidationError
from ..models import MemoryRecord, embedded_text
from ..scopes import Caller, may_erase
from ..storage import Filters, Store
from ._embedding import Embedding, Progress
from ._validate import require_writes
from ._writes import Writes, actor_of


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
        ids = self.store.purgeable(utcnow() - timedelta(days=days))
        if not caller.administrator:
            ids = [i for i, r in self.store.fetch(ids).items() if may_erase(caller, r, access=self.config.access)]
        if ids:
            self.writes.erase(ids, "purge", actor_of(caller))
        return len(ids)

    def reembed(self, *, progress: Progress | None = None, batch_size: int = 256) -> int:
        """Re-embed every memory with the configured model and adopt it as the store's model."""
        require_writes(self.config)
        filters = Filters(include_deleted=True, include_expired=True, include_superseded=True)
        total = self.store.count(filters)
        done = 0
        batch: list[MemoryRecord] = []
        embedder = self.embedding.embedder
        model = self.embedding.model_name
        embedder.ensure_dimensions()  # a provider that cannot embed fails here, before anything changes
        self.store.drop_vector_index()

        def flush() -> None:
            vectors = embedder.embed([embedded_text(r.content, r.keys) for r in batch], kind="passage")
            with self.store.transaction():
                for record, vector in zip(batch, vectors):
                    self.store.update(record.model_copy(update={"embedding_model": model}), vector)
            batch.clear()

        for record, _ in self.store.iter_all(filters):
            batch.append(record)
            if len(batch) >= batch_size:
                done += len(batch)
                flush()
                if progress:
                    progress(done, total)
        if batch:
            done += len(batch)
            flush()
            if progress:
                progress(done, total)
        # Adopt the new model only once every vector is its own; a failure above leaves the old one in charge.
        self.store.build_vector_index()
        self.embedding.adopt()
        return done

    @contextmanager
    def deferred_vector_index(self, *, rebuild: bool = False) -> Iterator[None]:
        require_writes(self.config)
        with self.store.deferred_vector_index(rebuild=rebuild):
            yield

    def build_vector_index(self) -> None:
        require_writes(self.config)
        self.store.build_vector_index()
