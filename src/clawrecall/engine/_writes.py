"""The one write path: everything that creates, changes or erases a memory goes through `Writes`.

Each write validates its input, applies the caller's scope check, embeds, deduplicates (adds),
and records history in the same transaction as the change. The doors, imports, and every writer
still to come (extraction, importers, a knowledge base) call these methods, never the store.
"""

from __future__ import annotations

import json
import logging
from contextlib import closing, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from .._blas import one_blas_thread
from .._time import utcnow
from ..config import Config
from ..errors import EmbeddingError, NotFoundError, ValidationError
from ..models import MASK, AddResult, MemoryRecord, NewMemory, Visibility
from ..scopes import Caller, check_change, check_visibility_change, may_erase, sees
from ..storage import Filters, HistoryDraft, Store
from ..storage.text import lexically_close
from ._changes import erasure_where
from ._embedding import Embedding, Progress
from ._reads import resolve
from ._secrets import Secrets
from ._validate import (
    check_category,
    check_content,
    check_field,
    check_metadata,
    check_share,
    check_tags,
    check_visibility,
    check_when,
    new_ids,
    new_record,
    require_writes,
)

if TYPE_CHECKING:
    import numpy as np

_DEDUP_BLOCK = 256  # rows of a batch compared at once: bounded memory for any batch size
#: what the memory that supersedes another keeps of it unless the caller gives its own
log = logging.getLogger("clawrecall.writes")

_TEXT = ("content", "title", "keys")  # what sealing hides
_INHERITED = ("title", "category", "tags", "importance", "confidence", "scope", "user_id", "agent_id", "visibility", "metadata")


class Writes:
    """Adds, updates, soft deletes and erasures of memories, each with its history."""

    def __init__(self, store: Store, config: Config, embedding: Embedding, secrets: Secrets):
        self.store = store
        self.config = config
        self.embedding = embedding
        self.secrets = secrets  # a secret is sealed before anything (history, the embedder) sees its text

    def add_many(
        self,
        items: Iterable[NewMemory | Mapping[str, Any]],
        caller: Caller,
        *,
        dedup: bool | None = None,
        progress: Progress | None = None,
        actor: str | None = None,
        embeddings: np.ndarray | None = None,
        dry_run: bool = False,
        embed_later: bool | None = None,
    ) -> list[AddResult]:
        """Validate every item (nothing is written if one is bad) while a local model embeds them, insert in one transaction.

        `dry_run` does all of it but the insert: the results say what would be created and what is a duplicate.
        `embed_later` (default `writes.embed_later`): when the provider fails, write them anyway without a vector
        and undeduplicated; the backfill embeds them later, and the keyword legs find them meanwhile."""
        require_writes(self.config)
        if isinstance(items, (str, bytes, Mapping, NewMemory)):
            raise ValidationError(f"add_many takes a list of items, got {type(items).__name__}")
        items = list(items)
        records, ids = self.new_records(items, caller)  # first: a secret's text must never reach the embedder
        named = [(_label(len(items), i + 1), r.id) for i, r in enumerate(records) if r.id != ids[i]]  # only imports name ids
        return self.add_records(records, named, caller, dedup=dedup, progress=progress, actor=actor,
                                embeddings=embeddings, dry_run=dry_run, embed_later=embed_later)

    def add_records(
        self, records: list[MemoryRecord], named: list[tuple[str, str]], caller: Caller, *, dedup: bool | None,
        progress: Progress | None, actor: str | None, embeddings: np.ndarray | None, dry_run: bool,
        embed_later: bool | None,
    ) -> list[AddResult]:
        """`add_many` of records `new_records` made: an import validates every line once, before any batch
        is written. `named`: (how an error names it, id) of each record whose id the caller chose."""
        require_writes(self.config)
        if not records:
            return []
        if named and (embeddings is None or dry_run):  # before embedding: a bad batch fails at once
            self._check_named_ids(named)  # (a write checks again under the lock: enough when nothing is embedded)
        stream = self.embedding.start([r.content for r in records]) if embeddings is None else None
        with closing(stream) if stream is not None else nullcontext():
            # While a local model embeds: what history keeps and what the caller gets (a duplicate's are replaced).
            after = [r.model_dump_json() for r in records]
            results = [AddResult(action="created", id=r.id, memory=r) for r in records]
            vectors: np.ndarray | None
            if embeddings is None:
                assert stream is not None
                try:
                    vectors = self.embedding.collect(stream, [r.content for r in records], progress)
                except EmbeddingError as exc:
                    if dry_run or not (self.config.writes.embed_later if embed_later is None else embed_later):
                        raise  # a dry run must say what is a duplicate
                    log.warning("embedding failed (%s): %d memories kept without a vector, embedded later", exc, len(records))
                    vectors = None
            else:
                vectors = self.embedding.given(embeddings, len(records))
        dedup = (self.config.dedup.enabled if dedup is None else dedup) and vectors is not None
        duplicates = self._find_duplicates(records, vectors) if dedup and vectors is not None else {}
        keep: list[int] = []
        for i in range(len(records)):
            if i in duplicates:
                existing, similarity = duplicates[i]
                results[i] = AddResult(action="duplicate", id=existing, existing_id=existing, similarity=round(similarity, 4))
            else:
                keep.append(i)
        if keep and not dry_run:
            actor = actor or actor_of(caller)
            with self.store.transaction():
                if named:
                    self._check_named_ids(named)  # again, under the write lock: another process may have stored them since
                self.insert_new([records[i] for i in keep], None if vectors is None else vectors[keep], actor,
                                [after[i] for i in keep])
        return results

    def new_records(
        self, items: list[NewMemory | Mapping[str, Any]], caller: Caller, now: datetime | None = None,
        labels: list[str] | None = None,
    ) -> tuple[list[MemoryRecord], list[str]]:
        """The records `items` would be, validated and scope-checked but not written (secrets sealed), and the
        ids they were offered (an import may name its own); a bad item raises, naming its place in a batch
        (`labels`: how to name each, "line 7: "; by default "item 3: ")."""
        now = now or utcnow()
        ids = new_ids(len(items))
        model = self.embedding.model_name
        labels = labels or [_label(len(items), n) for n in range(1, len(items) + 1)]
        return [self.secrets.seal(new_record(item, now, caller, self.config, label, fresh, model))
                for item, label, fresh in zip(items, labels, ids)], ids

    def insert_new(self, records: list[MemoryRecord], vectors: np.ndarray | None, actor: str,
                   after: list[str] | None = None) -> None:
        """Write new records with their vectors (None: the backfill's to make) and their "add" history, in the
        caller's transaction (or one of their own): not deduplicated, nothing embedded. `after`: their history
        snapshots, if made. A sealed secret takes no vector (one made of its mask is dropped)."""
        require_writes(self.config)
        after = after or [r.model_dump_json() for r in records]
        sealed = [r for r in records if r.sealed is not None]
        with self.store.transaction():
            if sealed:
                self.store.memories.insert(sealed, None)
                keep = [n for n, r in enumerate(records) if r.sealed is None]
                if keep:
                    self.store.memories.insert([records[n] for n in keep], None if vectors is None else vectors[keep])
            else:
                self.store.memories.insert(records, vectors)
            self.embedding.confirm_unchanged()  # a re-embedding may have swapped models since these were embedded
            self.store.history.add([HistoryDraft(r.id, "add", None, a, actor, r.created_at) for r, a in zip(records, after)])

    def set_keys(self, records: list[MemoryRecord], vectors: np.ndarray) -> None:
        """Give rows new keys (what else they are found by; docs/extraction.md) and the vectors made of
        their content and those keys, in the caller's transaction. What is shown never changes."""
        require_writes(self.config)
        model = self.embedding.model_name
        with self.store.transaction():
            for record, vector in zip(records, vectors):
                current = self._current(record.id)
                self.store.memories.update(current.model_copy(update={"keys": record.keys, "embedding_model": model,
                                                             "updated_at": utcnow()}), vector)
            self.embedding.confirm_unchanged()

    def record(self, records: list[MemoryRecord], vectors: np.ndarray | None = None) -> None:
        """Rows of the conversation record (messages, file chunks), stored without a vector (the backfill
        embeds them after the caller has its answer) unless given theirs. Their own tables keep their history."""
        require_writes(self.config)
        self.store.memories.insert(records, vectors)

    def unrecord(self, ids: list[str]) -> None:
        """Remove rows of the record for good (a re-ingested or removed file's old chunks): text, vector
        and index entries; their own tables say what happened."""
        require_writes(self.config)
        self.store.memories.remove(ids)

    def _check_named_ids(self, named: list[tuple[str, str]]) -> None:
        """Ids an item names must be new: not repeated in the batch, not stored (deleted ones included)."""
        first: dict[str, str] = {}
        for where, memory_id in named:
            if memory_id in first:
                raise ValidationError(f"{where}id {memory_id} repeats {first[memory_id]}")
            first[memory_id] = where.removesuffix(": ")
        if taken := self.store.memories.fetch(list(first)):
            where, memory_id = next((w, i) for w, i in named if i in taken)
            raise ValidationError(f"{where}a memory with id {memory_id} already exists")

    def _find_duplicates(self, records: list[MemoryRecord], vectors: np.ndarray) -> dict[int, tuple[str, float]]:
        """Item index → (id, similarity) of a near-identical memory in its scope: an earlier item of this
        batch that is itself kept, else the nearest stored memory. One matrix product per block of a scope.
        Only current memories count, as the stored ones `nearest` compares with: an item deleted, expired or
        superseded (an import's history) is neither a duplicate nor what makes another one a duplicate. Close
        vectors alone are not enough (`lexically_close`): a model gives every text it cannot read (a script it
        has no tokens for, emoji) nearly the same vector, and those texts were dropped as one another's."""
        import numpy as np

        threshold = self.embedding.embedder.cosine_for(self.config.dedup.threshold)
        now = utcnow()
        by_scope: dict[str, list[int]] = {}
        for i, record in enumerate(records):
            if (record.deleted_at is None and (record.expires_at is None or record.expires_at > now) and record.is_current
                    and record.sealed is None):  # a secret's mask is every secret's: never compared
                by_scope.setdefault(record.scope, []).append(i)
        out: dict[int, tuple[str, float]] = {}
        for scope, rows in by_scope.items():
            group = vectors[rows]
            stored = self.store.nearest(group, scope, threshold)
            texts = self.store.memories.fetch([hit.id for hit in stored if hit is not None])
            stored = [hit if hit is not None and hit.id in texts and sees(records[row].agent_id, texts[hit.id])
                      and lexically_close(records[row].content, texts[hit.id].content)
                      else None for row, hit in zip(rows, stored)]
            kept = np.array([hit is None for hit in stored])  # final for every item not close to an earlier one
            for start in range(0, len(rows), _DEDUP_BLOCK):
                stop = min(start + _DEDUP_BLOCK, len(rows))
                with one_blas_thread():
                    sims = group[start:stop] @ group[:stop].T
                sims[np.arange(start, stop)[:, None] <= np.arange(stop)] = -np.inf  # earlier items only
                for p in np.flatnonzero((sims >= threshold).any(axis=1)) + start:
                    # rare, and in order: which earlier items were kept decides
                    earlier = np.where(kept[:p], sims[p - start, :p], -np.inf)
                    for best in np.argsort(-earlier):
                        if earlier[best] < threshold:
                            break
                        if lexically_close(records[rows[p]].content, records[rows[best]].content):
                            out[rows[p]] = records[rows[best]].id, float(earlier[best])
                            kept[p] = False
                            break
            for row, hit in zip(rows, stored):
                if hit is not None and row not in out:
                    out[row] = hit.id, hit.score
        return out

    def update(self, memory_id: str, caller: Caller, scope: str | list[str] | None, fields: Mapping[str, Any]) -> MemoryRecord:
        """Change the fields given (a `None` value changes nothing); a new content is re-embedded. History keeps the old values.
        A memory made secret is sealed and keeps no vector, index entry or history of its text; a secret made
        readable (by its user) is opened, indexed and embedded again."""
        require_writes(self.config)
        old = resolve(self.store, memory_id, caller, scope, self.config.access)
        check_change(caller, old, access=self.config.access)
        changes = self._changes(fields)
        if "visibility" in changes:
            check_visibility_change(caller, old, changes["visibility"])
        shown = self.secrets.reveal(old)
        requested = {k: v for k, v in changes.items() if getattr(shown, k) != v}
        if not requested:
            return old
        secret = requested.get("visibility", old.visibility) == Visibility.secret
        embed = not secret and ("content" in requested or old.sealed is not None)
        vector = self.embedding.passages([requested.get("content", shown.content)])[0] if embed else None  # before the lock
        now = utcnow()
        with self.store.transaction():
            stored = self._current(old.id)
            current = self.secrets.reveal(stored)
            changes = {k: v for k, v in requested.items() if getattr(current, k) != v}
            if not changes:
                return stored
            new = current.model_copy(update={**changes, "updated_at": now})
            if vector is not None:
                new.embedding_model = self.embedding.model_name
            hidden = secret or stored.sealed is not None  # history never holds a secret's text, before or after
            before = json.dumps({k: _jsonable(getattr(current, k), hidden and k in _TEXT) for k in changes})
            after = json.dumps({k: _jsonable(getattr(new, k), hidden and k in _TEXT) for k in changes})
            new = self.secrets.seal(new)
            self.store.memories.update(new, vector)
            if vector is not None:
                self.embedding.confirm_unchanged()
            if secret and stored.sealed is None:
                self.secrets.hide([new.id])
            self.store.history.add([HistoryDraft(new.id, "update", before, after, actor_of(caller), now)])
        return new

    def supersede(
        self, memory_id: str, caller: Caller, scope: str | list[str] | None, content: str, *,
        valid_from: datetime | None, fields: Mapping[str, Any],
    ) -> MemoryRecord:
        """Close a memory and open the one that replaces it, in one transaction; nothing is deleted. The
        old one stays, true until `valid_from` (default: now) and pointing to the new one, which points
        back and keeps the old one's scope, category, tags and the rest unless `fields` name them, and its owner
        when the administrator supersedes it (else the caller is the new version's owner).
        Not deduplicated: a corrected fact is often nearly the text it corrects ("250 W" → "260 W")."""
        require_writes(self.config)
        record = self.successor(memory_id, caller, scope, content, valid_from=valid_from, fields=fields)
        vector = None if record.sealed is not None else self.embedding.passages([record.content])[0]  # before the lock
        self.close_and_open(record, vector, actor_of(caller))
        return record

    def successor(
        self, memory_id: str, caller: Caller, scope: str | list[str] | None, content: str, *,
        valid_from: datetime | None, fields: Mapping[str, Any],
    ) -> MemoryRecord:
        """The memory that would supersede `memory_id`, checked but neither embedded nor written
        (`close_and_open` writes it): what `supersede` and a batch of extracted updates share."""
        old = resolve(self.store, memory_id, caller, scope, self.config.access)
        check_change(caller, old, access=self.config.access)
        if fields.get("visibility") is not None:
            check_visibility_change(caller, old, fields["visibility"])
        now = utcnow()
        start = now if valid_from is None else check_when(valid_from, "valid_from")
        if start > now:
            raise ValidationError(f"valid_from {start.isoformat()} is in the future: supersede a memory once the change is true")
        _check_supersedable(old, start)
        shown = self.secrets.reveal(old)  # a secret's successor keeps its title, not the mask's
        item = {name: getattr(shown, name) for name in _INHERITED}
        if not caller.administrator:  # the new words are the caller's: only the administrator writes for another owner
            del item["user_id"], item["agent_id"]
        item |= {k: v for k, v in fields.items() if v is not None} | {"content": content, "valid_from": start}
        record = new_record(item, now, caller, self.config, "", new_ids(1)[0], self.embedding.model_name)
        record.supersedes = old.id
        return self.secrets.seal(record)

    def close_and_open(self, record: MemoryRecord, vector: np.ndarray | None, actor: str) -> None:
        """Close the memory `record` supersedes and write `record` (from `successor`), in the caller's
        transaction or one of its own; the old one is checked again as stored now. A sealed secret takes no vector."""
        require_writes(self.config)
        assert record.supersedes is not None
        start, now = record.valid_from, record.created_at
        with self.store.transaction():
            current = self._current(record.supersedes)
            _check_supersedable(current, start)
            closed = current.model_copy(update={"valid_to": start, "superseded_by": record.id, "updated_at": now})
            self.store.memories.update(closed, None)
            self.store.memories.insert([record], None if vector is None or record.sealed is not None else vector[None, :])
            self.embedding.confirm_unchanged()
            self.store.history.add([
                HistoryDraft(closed.id, "supersede", json.dumps({"valid_to": None, "superseded_by": None}),
                             json.dumps({"valid_to": _jsonable(start), "superseded_by": record.id}), actor, now),
                HistoryDraft(record.id, "add", None, record.model_dump_json(), actor, now),
            ])

    def _changes(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """An update's fields, checked; those given as `None` are left out."""
        given = {k: v for k, v in fields.items() if v is not None}
        changes: dict[str, Any] = {}
        if "content" in given:
            changes["content"] = check_content(given["content"])
        if "title" in given:
            changes["title"] = check_field(given["title"], "title")
        if "category" in given:
            changes["category"] = check_category(given["category"], self.config.categories)
        if "tags" in given:
            changes["tags"] = check_tags(list(given["tags"]))
        for name in ("importance", "confidence"):
            if name in given:
                changes[name] = check_share(given[name], name)
        if "visibility" in given:
            changes["visibility"] = check_visibility(given["visibility"])
        if "metadata" in given:
            changes["metadata"] = check_metadata(dict(given["metadata"]))
        if "expires_at" in given:
            changes["expires_at"] = check_when(given["expires_at"], "expires_at")
        return changes

    def set_deleted(self, memory_id: str, caller: Caller, scope: str | list[str] | None, when: datetime | None) -> MemoryRecord:
        """Soft delete (`when`) or undelete (`None`); a memory already in that state is returned as it is."""
        require_writes(self.config)
        old = resolve(self.store, memory_id, caller, scope, self.config.access)
        check_change(caller, old, access=self.config.access, erase=when is not None)
        if (old.deleted_at is None) == (when is None):
            return old
        now = utcnow()
        with self.store.transaction():
            current = self._current(old.id)
            if (current.deleted_at is None) == (when is None):
                return current
            new = current.model_copy(update={"deleted_at": when, "updated_at": now})
            self.store.memories.update(new, None)
            self.store.history.add([
                HistoryDraft(
                    new.id, "delete" if when else "undelete", json.dumps({"deleted_at": _jsonable(current.deleted_at)}),
                    json.dumps({"deleted_at": _jsonable(when)}), actor_of(caller), now,
                )
            ])
        return new

    def forget(self, memory_id: str, caller: Caller, scope: str | list[str] | None) -> str:
        """Hard delete (GDPR): content, vector, index rows and the content kept in history are gone."""
        require_writes(self.config)
        record = resolve(self.store, memory_id, caller, scope, self.config.access)
        check_change(caller, record, access=self.config.access, erase=True)
        with self.store.transaction():
            self.erase([record.id], "forget", actor_of(caller))
            self.store.search_log.forget([record.id])  # a search that found it may spell it in its query
        return record.id

    def erase(self, ids: list[str], action: str, actor: str, *, where: bool = True) -> None:
        """Remove memories for good; their history keeps only who erased them (`action`), when, and (`where`)
        where they were, no content: the change feed tells those who could read one that it is gone. Erasing
        a person keeps no `where` (a scope or an agent may name them)."""
        now = utcnow()
        with self.store.transaction():
            records = self.store.memories.fetch(ids) if where else {}
            self.store.memories.remove(ids)
            self.store.history.erase(ids)
            self.store.history.add([
                HistoryDraft(i, action, None, json.dumps(erasure_where(r)) if (r := records.get(i)) else None, actor, now)
                for i in ids
            ])

    def delete_bulk(self, filters: Filters, caller: Caller, *, dry_run: bool) -> int:
        """Soft-delete every memory that passes `filters` (active ones: the filters leave deleted ones
        out) and that the caller may erase (`may_erase`: reading a scope is not erasing in it), each
        with its history row; how many (that would be, with `dry_run`)."""
        if dry_run:
            return self.store.memories.count(filters) if caller.administrator else len(self.erasable(self.store.memories.ids(filters), caller))
        require_writes(self.config)
        now = utcnow()
        before, after = json.dumps({"deleted_at": None}), json.dumps({"deleted_at": _jsonable(now)})
        with self.store.transaction():
            ids = self.erasable(self.store.memories.ids(filters), caller)
            self.store.memories.mark_deleted(ids, now)
            self.store.history.add([HistoryDraft(i, "delete", before, after, actor_of(caller), now) for i in ids])
        return len(ids)

    def each(self, filters: Filters, caller: Caller, dry_run: bool, change: Callable[[MemoryRecord], Any],
             allowed: Callable[[MemoryRecord], bool]) -> int:
        """A bulk change made one memory at a time by the verb that changes one (`change`: its checks, its
        history, its change event), to each memory `filters` pass that `allowed` (the verb's checks, asked
        first) accepts; how many (would be, with `dry_run`)."""
        if not dry_run:
            require_writes(self.config)
        ids, done = self.store.memories.ids(filters), 0
        for start in range(0, len(ids), 500):
            records = self.store.memories.fetch(ids[start : start + 500])
            for record in (r for i in ids[start : start + 500] if (r := records.get(i)) is not None and allowed(r)):
                if not dry_run:
                    change(record)
                done += 1
        return done

    def erasable(self, ids: list[str], caller: Caller) -> list[str]:
        """Those of `ids` the caller may erase (`may_erase`), in their order: every one for the administrator."""
        if caller.administrator:
            return ids
        out: list[str] = []
        for start in range(0, len(ids), 500):
            records = self.store.memories.fetch(ids[start : start + 500])
            out += [i for i in ids[start : start + 500]
                    if (r := records.get(i)) is not None and may_erase(caller, r, access=self.config.access)]
        return out

    def _current(self, memory_id: str) -> MemoryRecord:
        """In a write transaction: the memory as stored now. Another process may have changed it since
        it was resolved, or erased it, and a change must neither undo theirs nor bring it back."""
        current = self.store.memories.fetch_for_update(memory_id)
        if current is None:
            raise NotFoundError(f"memory {memory_id} was erased while it was being changed")
        return current


def _label(size: int, n: int) -> str:
    """How an error names item `n` of a batch of `size` (a single item needs no name)."""
    return "" if size == 1 else f"item {n}: "


def _check_supersedable(record: MemoryRecord, start: datetime) -> None:
    """Only a current, live memory is superseded, and only after it began to be true."""
    if record.kind != "memory":
        raise ValidationError(f"{record.id} is a conversation {record.kind}, not a memory: only memories are superseded")
    if record.deleted_at is not None:
        raise ValidationError(f"memory {record.id} is deleted: undelete it first")
    if record.superseded_by is not None or record.valid_to is not None:
        then = f" by {record.superseded_by}" if record.superseded_by else ""
        raise ValidationError(f"memory {record.id} was already superseded{then}: supersede the current version")
    if start <= record.valid_from:
        raise ValidationError(f"valid_from {start.isoformat()} must be after the superseded memory's "
                              f"valid_from ({record.valid_from.isoformat()})")


def actor_of(caller: Caller) -> str:
    """Who made a change, as history keeps it: an agent acting for a user is both."""
    who = [f"user:{caller.user_id}"] if caller.user_id else []
    who += [f"agent:{caller.agent_id}"] if caller.agent_id else []
    return " ".join(who) or "local"


def _jsonable(value: Any, masked: bool = False) -> Any:
    if masked:
        return MASK if value is not None else None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Visibility):
        return value.value
    return value
