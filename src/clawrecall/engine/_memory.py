"""`Memory`: the engine every door (Python, CLI, and later REST/MCP) goes through.

It validates input, applies the one scope check, embeds, deduplicates, writes history,
and hands searches to the one retrieval pipeline. Storage is behind `Store`.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from contextlib import closing, contextmanager, nullcontext
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from pydantic import ValidationError as PydanticValidationError

from ._blas import one_blas_thread
from ._time import checked_utc, parse_when, utcnow
from .config import Config, default_db_path, load_config
from .errors import (
    AmbiguousIdError,
    ConfigError,
    ScopeError,
    EmbeddingMismatchError,
    NotFoundError,
    ValidationError,
    WritesDisabledError,
)
from .models import (
    AddResult,
    EmbeddingFingerprint,
    HistoryEntry,
    MemoryRecord,
    NewMemory,
    SearchHit,
    StartupEntry,
    Stats,
    Visibility,
)
from .scopes import Caller, new_memory_scope, read_scopes, write_scope
from .storage import Filters, HistoryDraft, Store, open_store

if TYPE_CHECKING:
    import numpy as np  # imported where vectors are made: `clawrecall stats` never needs it

    from .embeddings.base import EmbeddingStream

Progress = Callable[[int, int], None]
MAX_CONTENT_CHARS = 100_000
MAX_METADATA_CHARS = 100_000  # as JSON: room for any annotation, not for a second copy of a document
_ID_PREFIX = re.compile(r"^[0-9a-f-]{8,36}$")
_FINGERPRINT_KEY = "embedding_fingerprint"


_MAX_ROWS = 1_000_000_000  # list limit/offset: beyond what a store holds, within a 64-bit SQL integer
_DEDUP_BLOCK = 256  # rows of a batch compared at once: bounded memory for any batch size


class Memory:
    """Long-term memory on one store. Open with `Memory.open()`; close with `close()` or `with`."""

    def __init__(self, store: Store, config: Config, *, check_embedding: bool = True):
        self.store = store
        self.config = config
        self._embedder = None
        self._pipeline = None
        self._fingerprint_ok = False  # set once the provider's vectors are known to match the store
        if check_embedding:
            self.check_fingerprint(static_only=True)

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path_or_url: str | Path | None = None,
        *,
        config_path: str | Path | None = None,
        check_embedding: bool = True,
        create: bool = True,
        **config: Any,
    ) -> "Memory":
        """Open a store: a SQLite path, `sqlite:///path`, or the default data directory; a SQLite file
        that does not exist is created unless `create=False` (for readers: a mistyped path is an error).

        Keyword arguments are config keys (`embedding={"provider": "openai"}`, `writes={"enabled": False}`)
        and override the config file and `CLAWRECALL_*` environment variables.
        """
        if path_or_url is not None and not str(path_or_url).strip():
            raise ConfigError("the database path is empty: give a SQLite file, sqlite:///path or postgresql://…")
        cfg = load_config(config_path, overrides=config)
        target = path_or_url or cfg.db or (cfg.database.url() if cfg.database else None) or default_db_path()
        store = open_store(target, postgres=cfg.postgres, create=create)
        try:
            return cls(store, cfg, check_embedding=check_embedding)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- embedding -------------------------------------------------------------------------
    @property
    def embedder(self):
        """The configured provider, built on first use so commands that never embed stay light."""
        if self._embedder is None:
            from .embeddings import create_embedder

            self._embedder = create_embedder(self.config.embedding)
        return self._embedder

    def configured_fingerprint(self) -> tuple[str, str, int | None]:
        from .embeddings import configured_model, known_dimensions

        cfg = self.config.embedding
        model = configured_model(cfg)
        return cfg.provider, model, cfg.dimensions or known_dimensions(model)

    def stored_fingerprint(self) -> EmbeddingFingerprint | None:
        raw = self.store.get_meta(_FINGERPRINT_KEY)
        return None if raw is None else EmbeddingFingerprint.model_validate_json(raw)

    def check_fingerprint(self, *, static_only: bool) -> None:
        """Raise EmbeddingMismatchError when the configured model is not the one that made the stored
        vectors; `static_only` compares what the config names, without loading or calling the model."""
        stored = self.stored_fingerprint()
        if stored is None:
            return
        provider, model, dims = self.configured_fingerprint()
        if not static_only:
            dims = self.embedder.ensure_dimensions()
        if (stored.provider, stored.model) != (provider, model) or (dims is not None and dims != stored.dimensions):
            shown = f"{provider}/{model}" + (f" ({dims} dims)" if dims else "")
            raise EmbeddingMismatchError(
                f"{self.store.location} holds vectors from {stored}, but the configured embedding model is "
                f"{shown}; configure {stored.provider}/{stored.model} again, or run `clawrecall reembed` "
                "to re-embed every memory with the new model"
            )

    def _embed_passages(self, texts: list[str]) -> np.ndarray:
        vectors = self.embedder.embed(texts, kind="passage")
        self._remember_fingerprint()
        return vectors

    def _embed_queries(self, texts: list[str]) -> np.ndarray:
        vectors = self.embedder.embed(texts, kind="query")
        self._remember_fingerprint()
        return vectors

    def _remember_fingerprint(self) -> None:
        """Record which model made the vectors the first time any are made; check it afterwards."""
        if self._fingerprint_ok:
            return
        if self.stored_fingerprint() is None:
            self.store.set_meta(_FINGERPRINT_KEY, self.embedder.fingerprint.model_dump_json())
        else:
            self.check_fingerprint(static_only=False)
        self._fingerprint_ok = True

    @property
    def _embedding_model(self) -> str:
        """What a record embedded by the configured embedder names as its `embedding_model`."""
        return f"{self.embedder.provider}/{self.embedder.model}"

    @property
    def pipeline(self):
        if self._pipeline is None:
            from .retrieval.pipeline import RetrievalPipeline
            from .retrieval.rerank import create_reranker

            self._pipeline = RetrievalPipeline(
                self.config.retrieval, self.store, self._embed_queries, create_reranker(self.config.retrieval.rerank)
            )
        return self._pipeline

    # -- writes ----------------------------------------------------------------------------
    def add(
        self,
        content: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        scope: str | None = None,
        category: str | None = None,
        title: str | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        confidence: float | None = None,
        visibility: str | None = None,
        source_type: str | None = None,
        source_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
        expires_at: datetime | None = None,
        dedup: bool | None = None,
    ) -> AddResult:
        """Store one memory. A near-identical memory in the same scope returns `duplicate` and writes nothing."""
        item = dict(
            content=content, user_id=user_id, agent_id=agent_id, session_id=session_id, scope=scope,
            category=category, title=title, tags=[] if tags is None else tags, importance=importance, confidence=confidence,
            visibility=visibility, source_type=source_type, source_id=source_id,
            metadata=metadata, created_at=created_at, expires_at=expires_at,
        )
        return self.add_many([item], dedup=dedup)[0]

    def add_many(
        self,
        items: Iterable[NewMemory | Mapping[str, Any]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        dedup: bool | None = None,
        progress: Progress | None = None,
        actor: str | None = None,
        embeddings: np.ndarray | None = None,
    ) -> list[AddResult]:
        """Validate every item (nothing is written if one is bad) while a local model embeds them, insert in one transaction.

        `user_id`/`agent_id` identify the caller and apply to items that name none. `embeddings`
        (one row per item, made by the configured model) skips embedding: the bulk-load path.
        """
        self._require_writes()
        now = utcnow()
        if isinstance(items, (str, bytes, Mapping, NewMemory)):
            raise ValidationError(f"add_many takes a list of items, got {type(items).__name__}")
        items = list(items)
        stream = self._start_embedding(items) if embeddings is None else None
        with closing(stream) if stream is not None else nullcontext():
            label = (lambda n: "") if len(items) == 1 else (lambda n: f"item {n}: ")
            ids = _uuid4s(len(items))
            model = self._embedding_model
            records = [
                self._new_record(item, now, user_id, agent_id, label(n), ids[n - 1], model)
                for n, item in enumerate(items, start=1)
            ]
            if not records:
                return []
            named = [(label(i + 1), r.id) for i, r in enumerate(records) if r.id != ids[i]]  # only imports name ids
            if named:
                self._check_named_ids(named)  # before embedding: a bad batch fails at once
            # While a local model embeds: what history keeps and what the caller gets (a duplicate's are replaced).
            after = [r.model_dump_json() for r in records]
            results = [AddResult(action="created", id=r.id, memory=r) for r in records]
            if embeddings is None:
                assert stream is not None  # None only for an item with invalid content, and validating it raised
                vectors = self._collect(stream, [r.content for r in records], progress)
            else:
                vectors = self._check_embeddings(embeddings, len(records))
        dedup = self.config.dedup.enabled if dedup is None else dedup
        duplicates = self._find_duplicates(records, vectors) if dedup else {}
        keep: list[int] = []
        for i in range(len(records)):
            if i in duplicates:
                existing, similarity = duplicates[i]
                results[i] = AddResult(action="duplicate", id=existing, existing_id=existing, similarity=round(similarity, 4))
            else:
                keep.append(i)
        if keep:
            actor = actor or _actor(user_id, agent_id)
            with self.store.transaction():
                if named:
                    self._check_named_ids(named)  # again, under the write lock: another process may have stored them since
                self.store.insert([records[i] for i in keep], vectors[keep])
                self.store.add_history([HistoryDraft(records[i].id, "add", None, after[i], actor, now) for i in keep])
        return results

    def _start_embedding(self, items: Sequence[NewMemory | Mapping[str, Any]]) -> EmbeddingStream | None:
        """Start embedding the items' distinct contents, before the rest of each item is validated, so
        that validation overlaps a local model. None when an item has no valid content: validating
        it says what is wrong, in the words it always uses."""
        texts = []
        for item in items:
            content = item.content if isinstance(item, NewMemory) else item.get("content") if isinstance(item, Mapping) else None
            try:
                texts.append(self._check_content(content))
            except ValidationError:
                return None
        return self.embedder.stream(list(dict.fromkeys(texts)), "passage") if texts else None

    def _collect(self, stream: EmbeddingStream, texts: list[str], progress: Progress | None) -> np.ndarray:
        """One vector per text, from the stream `_start_embedding` began on the distinct texts."""
        vectors = stream.collect(progress)
        self._remember_fingerprint()
        row = {text: i for i, text in enumerate(stream.texts)}
        return vectors[[row[t] for t in texts]]

    def _check_embeddings(self, embeddings: np.ndarray, n: int) -> np.ndarray:
        import numpy as np

        try:
            vectors = np.asarray(embeddings, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"embeddings must be numbers: {exc}") from None
        dims = self.embedder.ensure_dimensions()
        if vectors.shape != (n, dims):
            raise ValidationError(f"embeddings must have shape ({n}, {dims}), got {vectors.shape}")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(np.isfinite(vectors)) or np.any(norms == 0):
            raise ValidationError("embeddings must be finite, non-zero vectors")
        self._remember_fingerprint()
        return vectors / norms

    def _check_named_ids(self, named: list[tuple[str, str]]) -> None:
        """Ids an item names must be new: not repeated in the batch, not stored (deleted ones included)."""
        first: dict[str, str] = {}
        for where, memory_id in named:
            if memory_id in first:
                raise ValidationError(f"{where}id {memory_id} repeats {first[memory_id]}")
            first[memory_id] = where.removesuffix(": ")
        if taken := self.store.fetch(list(first)):
            where, memory_id = next((w, i) for w, i in named if i in taken)
            raise ValidationError(f"{where}a memory with id {memory_id} already exists")

    def _find_duplicates(self, records: list[MemoryRecord], vectors: np.ndarray) -> dict[int, tuple[str, float]]:
        """Item index → (id, similarity) of a near-identical memory in its scope: an earlier item of this
        batch that is itself kept, else the nearest stored memory. One matrix product per block of a scope."""
        import numpy as np

        threshold = self.config.dedup.threshold
        by_scope: dict[str, list[int]] = {}
        for i, record in enumerate(records):
            by_scope.setdefault(record.scope, []).append(i)
        out: dict[int, tuple[str, float]] = {}
        for scope, rows in by_scope.items():
            group = vectors[rows]
            stored = self.store.nearest(group, scope, threshold)
            kept = np.array([hit is None for hit in stored])  # final for every item not close to an earlier one
            for start in range(0, len(rows), _DEDUP_BLOCK):
                stop = min(start + _DEDUP_BLOCK, len(rows))
                with one_blas_thread():
                    sims = group[start:stop] @ group[:stop].T
                sims[np.arange(start, stop)[:, None] <= np.arange(stop)] = -np.inf  # earlier items only
                for p in np.flatnonzero((sims >= threshold).any(axis=1)) + start:
                    # rare, and in order: which earlier items were kept decides
                    earlier = np.where(kept[:p], sims[p - start, :p], -np.inf)
                    best = int(np.argmax(earlier))
                    if earlier[best] >= threshold:
                        out[rows[p]] = records[rows[best]].id, float(earlier[best])
                        kept[p] = False
            for p, hit in enumerate(stored):
                if hit is not None and rows[p] not in out:
                    out[rows[p]] = hit.id, hit.score
        return out

    def _new_record(
        self, item: NewMemory | Mapping[str, Any], now: datetime, user_id: str | None, agent_id: str | None, where: str,
        fresh_id: str, embedding_model: str | None = None,
    ) -> MemoryRecord:
        """Validate one item into a record (with `fresh_id` unless it names its own); errors start with
        `where` ("item 3: ", "line 7: ")."""
        try:
            return self._build_record(item, now, user_id, agent_id, fresh_id, embedding_model)
        except PydanticValidationError as exc:
            raise ValidationError(f"{where}{_pydantic_message(exc)}") from None
        except (ValidationError, ScopeError) as exc:
            raise type(exc)(f"{where}{exc}") from None

    def _build_record(
        self, item: NewMemory | Mapping[str, Any], now: datetime, user_id: str | None, agent_id: str | None, fresh_id: str,
        embedding_model: str | None,
    ) -> MemoryRecord:
        if isinstance(item, NewMemory):
            new = item
        elif type(item) is dict or isinstance(item, Mapping):
            new = NewMemory.model_validate(item if type(item) is dict else dict(item))
        else:
            raise ValidationError(f"expected a mapping or a NewMemory, got {type(item).__name__}")
        content = self._check_content(new.content)
        for name in ("title", "session_id", "source_type", "source_id"):
            if (value := getattr(new, name)) is not None:
                _check_text(value, name)
        uid = new.user_id if new.user_id is not None else user_id
        aid = new.agent_id if new.agent_id is not None else agent_id
        if user_id is not None and uid != user_id:
            raise ScopeError(f"user_id {uid!r} differs from the caller's {user_id!r}")
        scope = new_memory_scope(uid, aid, new.scope)
        created = _check_when(new.created_at, "created_at") if new.created_at else now
        return MemoryRecord(
            id=self._check_new_id(new.id) if new.id else fresh_id,
            content=content,
            title=new.title,
            category=self._check_category("other" if new.category is None else new.category),
            tags=self._check_tags(new.tags),
            importance=0.7 if new.importance is None else new.importance,
            confidence=1.0 if new.confidence is None else new.confidence,
            scope=scope,
            user_id=uid,
            agent_id=aid,
            session_id=new.session_id,
            visibility=new.visibility or Visibility.shared,
            source_type=new.source_type,
            source_id=new.source_id,
            metadata=_check_metadata(new.metadata) if new.metadata else {},
            created_at=created,
            updated_at=_check_when(new.updated_at, "updated_at") if new.updated_at else max(created, now) if new.id else now,
            deleted_at=_check_when(new.deleted_at, "deleted_at") if new.deleted_at else None,
            expires_at=_check_when(new.expires_at, "expires_at") if new.expires_at else None,
            embedding_model=embedding_model,
        )

    def update(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        scope: str | list[str] | None = None,
        content: str | None = None,
        title: str | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        confidence: float | None = None,
        visibility: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        expires_at: datetime | None = None,
    ) -> MemoryRecord:
        """Change the given fields only; a new content is re-embedded. History keeps the old values."""
        self._require_writes()
        old = self._resolve(memory_id, Caller(user_id, agent_id), scope)
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = self._check_content(content)
        if title is not None:
            _check_text(title, "title")
            changes["title"] = title
        if category is not None:
            changes["category"] = self._check_category(category)
        if tags is not None:
            changes["tags"] = self._check_tags(list(tags))
        for name, value in (("importance", importance), ("confidence", confidence)):
            if value is not None:
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
                    raise ValidationError(f"{name} must be between 0 and 1, got {value!r}")
                changes[name] = float(value)
        if visibility is not None:
            changes["visibility"] = _check_visibility(visibility)
        if metadata is not None:
            changes["metadata"] = _check_metadata(dict(metadata))
        if expires_at is not None:
            changes["expires_at"] = _check_when(expires_at, "expires_at")
        requested = {k: v for k, v in changes.items() if getattr(old, k) != v}
        if not requested:
            return old
        vector = self._embed_passages([requested["content"]])[0] if "content" in requested else None  # before the lock
        now = utcnow()
        with self.store.transaction():
            current = self._current(old.id)
            changes = {k: v for k, v in requested.items() if getattr(current, k) != v}
            if not changes:
                return current
            new = current.model_copy(update={**changes, "updated_at": now})
            if "content" in changes:
                new.embedding_model = self._embedding_model
            before = json.dumps({k: _jsonable(getattr(current, k)) for k in changes})
            after = json.dumps({k: _jsonable(getattr(new, k)) for k in changes})
            self.store.update(new, vector if "content" in changes else None)
            self.store.add_history([HistoryDraft(new.id, "update", before, after, _actor(user_id, agent_id), now)])
        return new

    def delete(
        self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, scope: str | list[str] | None = None
    ) -> MemoryRecord:
        """Soft delete: hidden from search and lists, recoverable until purged (retention period)."""
        return self._set_deleted(memory_id, Caller(user_id, agent_id), scope, utcnow())

    def undelete(
        self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, scope: str | list[str] | None = None
    ) -> MemoryRecord:
        return self._set_deleted(memory_id, Caller(user_id, agent_id), scope, None)

    def _set_deleted(self, memory_id: str, caller: Caller, scope: str | list[str] | None, when: datetime | None) -> MemoryRecord:
        self._require_writes()
        old = self._resolve(memory_id, caller, scope)
        if (old.deleted_at is None) == (when is None):
            return old
        now = utcnow()
        with self.store.transaction():
            current = self._current(old.id)
            if (current.deleted_at is None) == (when is None):
                return current
            new = current.model_copy(update={"deleted_at": when, "updated_at": now})
            self.store.update(new, None)
            self.store.add_history([
                HistoryDraft(
                    new.id, "delete" if when else "undelete", json.dumps({"deleted_at": _jsonable(current.deleted_at)}),
                    json.dumps({"deleted_at": _jsonable(when)}), _actor(caller.user_id, caller.agent_id), now,
                )
            ])
        return new

    def forget(
        self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, scope: str | list[str] | None = None
    ) -> str:
        """Hard delete (GDPR): content, vector, index rows and the content kept in history are gone."""
        self._require_writes()
        record = self._resolve(memory_id, Caller(user_id, agent_id), scope)
        self._erase([record.id], "forget", _actor(user_id, agent_id))
        return record.id

    def purge(self, *, older_than_days: float | None = None, user_id: str | None = None, agent_id: str | None = None) -> int:
        """Hard-delete memories soft-deleted longer ago than the retention period (default 30 days)."""
        self._require_writes()
        days = self.config.writes.retention_days if older_than_days is None else older_than_days
        if not 0 <= days <= 365_000:  # a timedelta cannot reach further back
            raise ValidationError(f"older_than_days must be between 0 and 365000, got {days}")
        ids = self.store.purgeable(utcnow() - timedelta(days=days))
        scopes = read_scopes(Caller(user_id, agent_id), None)
        if scopes is not None:
            ids = [i for i, r in self.store.fetch(ids).items() if r.scope in scopes]
        if ids:
            self._erase(ids, "purge", _actor(user_id, agent_id))
        return len(ids)

    def _erase(self, ids: list[str], action: str, actor: str) -> None:
        now = utcnow()
        with self.store.transaction():
            self.store.remove(ids)
            for memory_id in ids:
                self.store.erase_history(memory_id)
            self.store.add_history([HistoryDraft(i, action, None, None, actor, now) for i in ids])

    def reembed(self, *, progress: Progress | None = None, batch_size: int = 256) -> int:
        """Re-embed every memory with the configured model and adopt it as the store's model."""
        self._require_writes()
        filters = Filters(include_deleted=True, include_expired=True)
        total = self.store.count(filters)
        done = 0
        batch: list[MemoryRecord] = []
        model = self._embedding_model
        self.embedder.ensure_dimensions()  # a provider that cannot embed fails here, before anything changes
        self.store.drop_vector_index()

        def flush() -> None:
            vectors = self.embedder.embed([r.content for r in batch], kind="passage")
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
        self.store.set_meta(_FINGERPRINT_KEY, self.embedder.fingerprint.model_dump_json())
        self._fingerprint_ok = True
        return done

    @contextmanager
    def deferred_vector_index(self, *, rebuild: bool = False) -> Iterator[None]:
        """For bulk loads on PostgreSQL: `add_many` inside the block skips the HNSW index, built once at the end.

        Maintaining the graph costs milliseconds per row; building it once is 10-30x cheaper. With
        `rebuild`, an index that already exists is dropped first (worth it when the load is large
        next to what is stored). Searches meanwhile read exactly. SQLite has nothing to defer.
        """
        self._require_writes()
        with self.store.deferred_vector_index(rebuild=rebuild):
            yield

    def build_vector_index(self) -> None:
        """Build the vector index if it is missing (after a deferred load that was interrupted)."""
        self._require_writes()
        self.store.build_vector_index()

    # -- reads -----------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        scope: str | list[str] | None = None,
        limit: int = 10,
        category: str | list[str] | None = None,
        tags: Sequence[str] | None = None,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        include_deleted: bool = False,
        mode: str = "hybrid",
        explain: bool = False,
        diverse: bool = True,
        min_score: float | None = None,
    ) -> list[SearchHit]:
        """Hybrid search in the scopes the caller may read. Hits carry `.memory`, `.score`, `.age`.

        `.score` is absolute: the estimated probability that the hit is relevant (docs/retrieval.md).
        Hits below `min_score` (default `retrieval.min_score`) are left out, so a query about nothing
        stored returns no hits. `diverse=False` skips the diversity stage, which moves near-copies of
        a better hit to the end: to see every copy of a memory, e.g. before erasing one."""
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must not be empty")
        _check_text(query, "query")
        _check_int(limit, "limit", 1, 1000)
        if mode not in ("hybrid", "vector", "bm25", "trigram"):
            raise ValidationError(f"unknown search mode {mode!r}: use hybrid, vector, bm25 or trigram")
        if min_score is not None and (
            type(min_score) not in (int, float) or not 0 <= min_score <= 1  # NaN fails the bounds too
        ):
            raise ValidationError(f"min_score must be a number from 0 to 1, not {min_score!r}")
        filters = self._filters(
            Caller(user_id, agent_id), scope, category=category, tags=tags, session_id=session_id,
            since=since, until=until, include_deleted=include_deleted,
        )
        return self.pipeline.search(
            query.strip()[:4000], filters, limit=limit, mode=mode, explain=explain, diverse=diverse,  # type: ignore[arg-type]
            min_score=min_score,
        )

    def get(
        self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, scope: str | list[str] | None = None
    ) -> MemoryRecord:
        """A memory by id or unique id prefix (8+ hex characters), deleted ones included.

        Like every call by id, it looks in `scope` (default: the caller's own scopes, as a search
        would) and answers "not found" for a memory elsewhere.
        """
        return self._resolve(memory_id, Caller(user_id, agent_id), scope)

    def list(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        scope: str | list[str] | None = None,
        category: str | list[str] | None = None,
        tags: Sequence[str] | None = None,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        include_deleted: bool = False,
        only_deleted: bool = False,
        include_expired: bool = False,
        limit: int = 50,
        offset: int = 0,
        order: str = "newest",
    ) -> list[MemoryRecord]:
        """Memories without searching, newest first; deleted and expired ones only when asked for."""
        _check_int(limit, "limit", 1, _MAX_ROWS)
        _check_int(offset, "offset", 0, _MAX_ROWS)
        if order not in ("newest", "oldest", "updated"):
            raise ValidationError(f"unknown order {order!r}: use newest, oldest or updated")
        filters = self._filters(
            Caller(user_id, agent_id), scope, category=category, tags=tags, session_id=session_id, since=since,
            until=until, include_deleted=include_deleted, only_deleted=only_deleted, include_expired=include_expired,
        )
        return self.store.list(filters, limit=limit, offset=offset, order=order)  # type: ignore[arg-type]

    def count(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        scope: str | list[str] | None = None,
        category: str | list[str] | None = None,
        include_deleted: bool = False,
        include_expired: bool = False,
    ) -> int:
        filters = self._filters(
            Caller(user_id, agent_id), scope, category=category, include_deleted=include_deleted,
            include_expired=include_expired,
        )
        return self.store.count(filters)

    def history(
        self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, scope: str | list[str] | None = None
    ) -> list[HistoryEntry]:
        """Every change to a memory. A forgotten memory's history keeps only who erased it and when."""
        caller = Caller(user_id, agent_id)
        try:
            record_id = self._resolve(memory_id, caller, scope).id
        except NotFoundError:
            if caller != Caller():  # an erased memory's scope is gone with it: only the administrator sees its trace
                raise
            prefix = memory_id.strip().lower()
            matches = self.store.history_ids_with_prefix(prefix)
            if len(matches) > 1 and prefix not in matches:
                raise AmbiguousIdError(memory_id, matches) from None
            entries = self.store.history(prefix if prefix in matches else matches[0]) if matches else []
            if entries and entries[-1].action in ("forget", "purge"):
                return entries
            raise
        return self.store.history(record_id)

    def stats(self) -> Stats:
        s = self.store.stats()
        return Stats(
            total=s.total, active=s.total - s.deleted - s.expired, deleted=s.deleted, expired=s.expired,
            by_category=s.by_category, by_scope=s.by_scope, users=s.users, embedding=self.stored_fingerprint(),
            schema_version=self.store.schema_version(), backend=self.store.backend, location=self.store.location,
            size_bytes=s.size_bytes, oldest=s.oldest, newest=s.newest,
        )

    # -- startup identity -------------------------------------------------------------------
    def startup_set(
        self, key: str, content: str, *, priority: int = 2, reinforce: bool = False, scope: str | None = None,
        user_id: str | None = None, agent_id: str | None = None,
    ) -> StartupEntry:
        """Create or replace a startup entry (injected on the first turn of a session)."""
        self._require_writes()
        caller = Caller(user_id, agent_id)
        target = write_scope(caller, scope) if scope is not None or user_id or agent_id else "global"
        _check_text(key, "key")
        try:
            entry = StartupEntry(
                scope=target, key=key, content=self._check_content(content), priority=priority, reinforce=reinforce,
                updated_at=utcnow(),
            )
        except PydanticValidationError as exc:
            raise ValidationError(_pydantic_message(exc)) from None
        self.store.put_startup(entry)
        return entry

    def startup_list(self, *, user_id: str | None = None, agent_id: str | None = None, scope: str | list[str] | None = None) -> list[StartupEntry]:
        return self.store.startup_entries(read_scopes(Caller(user_id, agent_id), scope))

    def startup_delete(self, key: str, *, scope: str = "global", user_id: str | None = None, agent_id: str | None = None) -> None:
        self._require_writes()
        _check_text(key, "key")
        if not self.store.delete_startup(write_scope(Caller(user_id, agent_id), scope), key):
            raise NotFoundError(f"no startup entry {key!r} in scope {scope!r}")

    # -- JSONL import / export ---------------------------------------------------------------
    def export_jsonl(
        self, out: IO[str], *, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, include_deleted: bool = True,
    ) -> int:
        """Write one JSON object per memory, with every field, oldest first."""
        filters = self._filters(Caller(user_id, agent_id), scope, include_deleted=include_deleted, include_expired=True)
        n = 0
        for record, _ in self.store.iter_all(filters):
            out.write(json.dumps(record.model_dump(mode="json"), ensure_ascii=False) + "\n")
            n += 1
        return n

    def import_jsonl(
        self, lines: Iterable[str], *, user_id: str | None = None, agent_id: str | None = None,
        dedup: bool = False, progress: Progress | None = None, chunk: int = 512,
    ) -> dict[str, int]:
        """Import an export. Every line is validated before anything is written; ids already present are skipped."""
        self._require_writes()
        items_by_line: list[tuple[int, NewMemory]] = []
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("expected a JSON object")
                data.pop("embedding", None)
                items_by_line.append((n, NewMemory.model_validate(data)))
            except (ValueError, PydanticValidationError) as exc:
                detail = _pydantic_message(exc) if isinstance(exc, PydanticValidationError) else str(exc)
                raise ValidationError(f"line {n}: {detail}") from None
        items = [item for _, item in items_by_line]
        now = utcnow()
        seen: dict[str, int] = {}
        for (n, item), fresh in zip(items_by_line, _uuid4s(len(items_by_line))):  # validation, nothing written yet
            record = self._new_record(item, now, user_id, agent_id, f"line {n}: ", fresh)
            if item.id:
                if record.id in seen:
                    raise ValidationError(f"line {n}: id {record.id} repeats line {seen[record.id]}")
                seen[record.id] = n
                item.id = record.id
        existing = set(self.store.fetch(list(seen)))
        todo = [i for i in items if not (i.id and i.id in existing)]
        created = duplicates = skipped = 0
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            if stored := self.store.fetch([i.id for i in part if i.id]):  # by another import running beside this one
                part = [i for i in part if i.id not in stored]
                skipped += len(stored)
            results = self.add_many(part, user_id=user_id, agent_id=agent_id, dedup=dedup, actor="import") if part else []
            created += sum(r.action == "created" for r in results)
            duplicates += sum(r.action == "duplicate" for r in results)
            if progress:
                progress(min(start + chunk, len(todo)), len(todo))
        skipped += len(items) - len(todo)
        return {"read": len(items), "created": created, "duplicates": duplicates, "skipped": skipped}

    # -- helpers -------------------------------------------------------------------------------
    def _filters(
        self, caller: Caller, scope: str | list[str] | None, *, category: str | list[str] | None = None,
        tags: Sequence[str] | None = None, session_id: str | None = None, since: datetime | None = None,
        until: datetime | None = None, include_deleted: bool = False, only_deleted: bool = False,
        include_expired: bool = False,
    ) -> Filters:
        categories = None if category is None else ([category] if isinstance(category, str) else list(category))
        for c in categories or []:
            self._check_category(c)
        _check_text(list(tags or []), "a tag")
        _check_text(session_id, "session_id")
        return Filters(
            scopes=read_scopes(caller, scope), categories=categories, tags=list(tags) if tags else None,
            session_id=session_id, since=_check_when(since, "since") if since is not None else None,
            until=_check_when(until, "until") if until is not None else None,
            include_deleted=include_deleted, only_deleted=only_deleted, include_expired=include_expired,
        )

    def _resolve(self, memory_id: str, caller: Caller, scope: str | list[str] | None = None) -> MemoryRecord:
        """Id or unique prefix → record, in the scopes the caller reads. Other scopes' memories are "not found"."""
        if not isinstance(memory_id, str):
            raise ValidationError(f"memory id must be a string, got {type(memory_id).__name__}")
        prefix = memory_id.strip().lower()
        if not _ID_PREFIX.match(prefix) or len(prefix.replace("-", "")) < 8:
            raise ValidationError(f"invalid memory id {memory_id!r}: give the id or at least 8 of its first hex characters")
        filters = Filters(scopes=read_scopes(caller, scope), include_deleted=True, include_expired=True)
        matches = self.store.ids_with_prefix(prefix, filters)
        if not matches:
            raise NotFoundError(f"no memory with id {memory_id!r}")
        if len(matches) > 1 and prefix not in matches:
            raise AmbiguousIdError(memory_id, matches)
        found = prefix if prefix in matches else matches[0]
        return self.store.fetch([found])[found]

    def _current(self, memory_id: str) -> MemoryRecord:
        """In a write transaction: the memory as stored now. Another process may have changed it since
        it was resolved, or erased it, and a change must neither undo theirs nor bring it back."""
        current = self.store.fetch_for_update(memory_id)
        if current is None:
            raise NotFoundError(f"memory {memory_id} was erased while it was being changed")
        return current

    def _require_writes(self) -> None:
        if not self.config.writes.enabled:
            raise WritesDisabledError("writes are disabled (writes.enabled = false); this store is read-only")

    def _check_content(self, content: Any) -> str:
        if not isinstance(content, str) or not content.strip():
            raise ValidationError("content must not be empty")
        _check_text(content, "content")
        if len(content) > MAX_CONTENT_CHARS:
            raise ValidationError(f"content is {len(content)} characters; the limit is {MAX_CONTENT_CHARS}")
        return content.strip()

    def _check_category(self, category: str) -> str:
        if category not in self.config.categories:
            raise ValidationError(f"unknown category {category!r}: use one of {', '.join(self.config.categories)}")
        return category

    def _check_tags(self, tags: list[str]) -> list[str]:
        if not tags:
            return []
        for tag in tags:
            if not isinstance(tag, str) or not tag.strip() or len(tag) > 100:
                raise ValidationError(f"invalid tag {tag!r}: tags are non-empty strings of at most 100 characters")
            _check_text(tag, "a tag")
        return list(dict.fromkeys(t.strip() for t in tags))

    def _check_new_id(self, memory_id: str) -> str:
        if not _is_uuid(memory_id.lower()):
            raise ValidationError(f"invalid memory id {memory_id!r}: ids are UUIDs")
        return memory_id.lower()


def _uuid4s(n: int) -> list[str]:
    """`n` random (version 4) UUIDs as text: one urandom call, 6x faster than `str(uuid.uuid4())` each.

    One call's ids share their first byte, so a batch writes to one 256th of each index on ids
    (memories.id, history.memory_id) instead of dirtying a page per id: at 100k memories, 1,000
    adds wrote 2,600 pages and now write 1,080. Each id keeps 114 random bits, and 8-character
    prefixes stay distinct within a batch (24 random bits: 0.03 expected clashes in 1,000 ids)."""
    hexes = os.urandom(16 * n).hex()
    lead = hexes[:2]
    return [
        f"{lead}{h[2:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"
        for h in (hexes[i : i + 32] for i in range(0, 32 * n, 32))
    ]


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def _check_int(value: Any, name: str, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValidationError(f"{name} must be between {lo:,} and {hi:,}, got {value!r}")


def _check_when(value: Any, name: str) -> datetime:
    """A caller's time in UTC: a datetime (naive = UTC) or ISO-8601 text, within what UTC can hold."""
    try:
        if isinstance(value, str):
            return parse_when(value)
        if isinstance(value, datetime):
            return checked_utc(value)
    except ValueError as exc:
        raise ValidationError(f"{name}: {exc}") from None
    raise ValidationError(f"{name} must be a datetime or ISO-8601 text, got {type(value).__name__}")


def _check_visibility(value: str) -> Visibility:
    try:
        return Visibility(value)
    except ValueError:
        raise ValidationError(f"unknown visibility {value!r}: use private, shared or secret") from None


def _check_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    try:
        size = len(json.dumps(metadata, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"metadata must be JSON-serialisable: {exc}") from None
    except RecursionError:
        raise ValidationError("metadata is nested too deeply") from None
    if size > MAX_METADATA_CHARS:
        raise ValidationError(f"metadata is {size} characters as JSON; the limit is {MAX_METADATA_CHARS}")
    _check_text(metadata, "metadata")
    return metadata


def _check_text(value: Any, name: str) -> None:
    """PostgreSQL stores no NUL (U+0000) in text or JSON, so neither backend accepts one: a store
    must move between them, and the error is the caller's, not a server's 500. Lone surrogates
    (how Python hands over bytes that are not UTF-8, e.g. in argv) cannot be stored or embedded.
    Walks JSON values."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(f"{name} must not contain NUL characters")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValidationError(f"{name} is not valid Unicode text (bytes that are not UTF-8?)") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, name)
            _check_text(item, name)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_text(item, name)


def _pydantic_message(exc: PydanticValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        msg = err["msg"]
        if err["type"] in ("less_than_equal", "greater_than_equal") and "input" in err:
            msg = f"must be between 0 and 1, got {err['input']!r}"
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Visibility):
        return value.value
    return value


def _actor(user_id: str | None, agent_id: str | None) -> str:
    """Who made a change, as history keeps it: an agent acting for a user is both."""
    who = [f"user:{user_id}"] if user_id else []
    who += [f"agent:{agent_id}"] if agent_id else []
    return " ".join(who) or "local"
