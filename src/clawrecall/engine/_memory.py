"""`Memory`: the facade every door (Python, CLI, REST, MCP, hooks) goes through.

Its verbs check their arguments and hand the work to one part per job: `Writes` (the one write
path), `Embedding`, `Maintenance`, `Transfer`; searches go to the retrieval pipeline. New nouns
arrive as namespaces (`mem.startup`), not as more methods; what runs the store is `mem.upkeep`. The
machinery (the store, the pipeline, the parts) is private: the public surface is pinned by a test.
"""

from __future__ import annotations

import builtins
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterable, Mapping, Sequence, Unpack, overload

from .._time import utcnow
from ..config import Config, default_db_path, load_config
from ..errors import AmbiguousIdError, ConfigError, NotFoundError, ValidationError
from ..models import (
    KINDS, LISTED, MASK, AddResult, BackupSummary, CountFilters, Erased, HistoryEntry, Imported, Journal, ListFilters, ListOrder,
    DeleteFilters, MemoryChanges, MemoryFields, MemoryRecord, NewMemory, OnDuplicate, SearchFilters, SearchHits, SearchMode,
    Stats, UpdateFields,
)
from ..insight.log import SearchRecorder
from ..runtime import Runtime
from ..scopes import Caller, as_caller, check_change, check_visibility_change, passes
from ..storage import Store, open_store
from ..storage.backup import backup
from ..storage.filters import Filters
from ._backfill import Backfill
from ._changes import Changes
from ._conversations import Conversations
from ._embedding import Embedding, Progress
from ._erasure import Person, erase_person
from ._events import Events, wire
from ._extraction import Extraction
from ._facts import SOURCE_TYPE as FACT_SOURCE
from ._facts import Facts
from ._files import Files
from ._insight import Insight
from ._jobs import Jobs, Runner
from ._maintenance import Maintenance
from ._reads import covered, read_filters, resolve
from ._secrets import SecretKeys, Secrets
from ._startup import Startup
from ._transfer import Transfer
from ._upkeep import Upkeep
from ._validate import chat_turns, check_int, check_share, check_text, check_visibility, one_of
from ._writes import Writes

if TYPE_CHECKING:
    import numpy as np  # imported where vectors are made: `clawrecall stats` never needs it

    from ..retrieval.pipeline import RetrievalPipeline

_MAX_ROWS = 1_000_000_000  # list limit/offset: beyond what a store holds, within a 64-bit SQL integer


class Memory:
    """Long-term memory on one store. Open with `Memory.open()`; close with `close()` or `with`.

    Every verb, and every verb of its namespaces (`startup`, `conversations`, `files`, `jobs`,
    `insight`), takes the caller as `caller=Caller(...)` or, for short, as `user_id=`/`agent_id=`
    (not both); no caller at all is the local administrator. What runs the store rather than its
    memories (the sweep, the backfill, the embedding model, background work) is `mem.upkeep`.
    """

    def __init__(self, store: Store | None = None, config: Config | None = None, *, check_embedding: bool = True):
        """`Memory()` opens the default store with the default config, as `Memory.open()` does
        (mem0's habit); `Memory(store, config)` wraps a store already open."""
        opened = store is None
        if store is None:
            config = config or load_config(None)
            store = _open_store(None, config, create=True)
        elif config is None:
            raise ValidationError("Memory(store) needs its config too: Memory(store, config), or Memory.open(path)")
        self._store = store
        self.config = config
        self._embedding = Embedding(store, config)
        self._secrets = Secrets(store, config)
        self.secrets = SecretKeys(self._secrets)  # secret memories' key: rotate, status (docs/agents.md)
        self._writes = Writes(store, config, self._embedding, self._secrets)
        self._maintenance = Maintenance(store, config, self._embedding, self._writes)
        self._transfer = Transfer(store, config, self._writes)
        self._built_pipeline: RetrievalPipeline | None = None
        self.startup = Startup(store, config)
        self._runtime = Runtime()  # this store's background work and session state; close() drains it
        self.changes = Changes(store, config)  # the change feed: every change to a memory, scoped (`/v1/events`)
        events = Events()  # who handles what: `_events.wire` below, handler modules (`mem.upkeep.on`/`job`)
        self._backfill = Backfill(store, self._embedding, self._runtime, events)
        self.conversations = Conversations(store, config, self._writes, self._backfill, events)
        self.files = Files(store, config, self._writes, self._backfill)
        self.jobs = Jobs(store, config)  # background work: queued here, run by the runner's workers
        self._runner = Runner(store, config, events.jobs)
        self._facts = Facts(store, config, self._writes, self._embedding, lambda: self._pipeline)
        self._extraction = Extraction(store, config, self._facts, self.jobs)
        wire(events, self.conversations._check_topics, self._extraction, self._warm_searches)
        # the search log's reports and a memory's recalls; every search below is noted in its log
        self._recorder = SearchRecorder(store, config, self._runtime)
        self.insight = Insight(store, config, self._recorder, self._embedding,
                               lambda mid, who, scope: resolve(store, mid, who, scope, config.access, KINDS),
                               lambda mid, who: self.delete(mid, caller=who))
        self.upkeep = Upkeep(store, config, self._embedding, self._maintenance, self._backfill, self.conversations,
                             self._recorder, self._facts, self._extraction, self._runtime, events, self._runner,
                             self.changes)
        try:
            if check_embedding:
                self._embedding.check_fingerprint(static_only=True)
            self._secrets.seal_legacy()  # secrets stored before encryption: sealed once, when a key is at hand
        except BaseException:
            if opened:
                store.close()
            raise

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
        store = _open_store(path_or_url, cfg, create=create)
        try:
            return cls(store, cfg, check_embedding=check_embedding)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        self.upkeep.close_feeds()
        self.upkeep.stop_workers()
        self._runtime.stop()
        self._store.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _pipeline(self) -> RetrievalPipeline:
        """The one search pipeline, built on the first search so commands that never search stay light."""
        if self._built_pipeline is None:
            from ..retrieval.pipeline import RetrievalPipeline
            from ..retrieval.rerank import create_reranker

            provider, model, _ = self._embedding.configured_fingerprint()
            self._built_pipeline = RetrievalPipeline(
                self.config.retrieval, self._store, self._embedding.queries, create_reranker(self.config.retrieval.rerank),
                model=f"{provider}/{model}", cosine_for=lambda cosine: self._embedding.embedder.cosine_for(cosine),
                query_ms=lambda texts: self._embedding.embedder.query_ms(texts),
            )
        return self._built_pipeline

    def _warm_searches(self, ids: list[str]) -> None:
        """After new vectors (the backfill, off the request path): the default search of each owner of these
        rows warmed (`RetrievalPipeline.warm`), so the owner's first search after writing costs what a later one does."""
        owners = {(r.user_id, r.agent_id) for r in self._store.memories.fetch(ids).values()}
        for user_id, agent_id in owners:
            sources, roles = covered(None, None, self.config.retrieval, memory_only=False)
            self._pipeline.warm(read_filters(Caller(user_id, agent_id), None, self.config.categories,
                                             access=self.config.access, sources=sources, message_roles=roles))

    # -- writes ----------------------------------------------------------------------------
    @overload
    def add(
        self, content: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        **fields: Unpack[MemoryFields],
    ) -> AddResult: ...

    @overload
    def add(
        self, content: Sequence[Mapping[str, Any]], *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, **fields: Unpack[MemoryFields],
    ) -> builtins.list[AddResult]: ...

    def add(
        self, content: str | Sequence[Mapping[str, Any]], *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, **fields: Unpack[MemoryFields],
    ) -> AddResult | builtins.list[AddResult]:
        """Store one memory. A near-identical memory in the same scope returns `duplicate` and writes nothing.

        `fields` are `MemoryFields`: `category`, `title`, `tags`, `importance`, `confidence`, `visibility`,
        `metadata`, `source_type`/`source_id`, `created_at`, `expires_at`, `valid_from`, `scope`,
        `session_id`, `dedup`, `embed_later`.

        It belongs to the caller and its session unless `session_id` names another; `scope` defaults
        to the caller's user, else agent, else global. `content` may also be a chat, a list of
        `{"role", "content"}` messages as mem0 takes: each user and assistant turn is then one
        memory (its role in `metadata["role"]`; system turns are not stored) and a list of results
        comes back, one per stored turn. `valid_from`: since when it is true, when the source says
        (default: now). `embed_later` (default: `writes.embed_later`, true): if the embedding provider fails,
        store it anyway, without a vector and not deduplicated; keyword search finds it at once and the backfill
        (`mem.upkeep.backfill()`, `clawrecall serve`'s sweep) embeds it once the provider answers. False: the add fails."""
        given = _known("add", fields, MemoryFields)
        dedup, embed_later = given.pop("dedup", None), given.pop("embed_later", None)
        item = {key: given.get(key) for key in MemoryFields.__annotations__ if key not in ("dedup", "embed_later")}
        item["tags"] = [] if item["tags"] is None else item["tags"]
        who = as_caller(caller, user_id, agent_id)
        if not isinstance(content, (builtins.list, tuple)):
            return self._writes.add_many([{**item, "content": content}], who, dedup=dedup, embed_later=embed_later)[0]
        metadata = given.get("metadata")
        turns = chat_turns(content)
        items = [{**item, "content": text, "metadata": {**(metadata or {}), "role": role}} for role, text in turns]
        return self._writes.add_many(items, who, dedup=dedup, embed_later=embed_later) if items else []

    def add_many(
        self,
        items: Iterable[NewMemory | Mapping[str, Any]],
        *,
        caller: Caller | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        dedup: bool | None = None,
        progress: Progress | None = None,
        actor: str | None = None,
        embeddings: np.ndarray | None = None,
    ) -> list[AddResult]:
        """Validate every item (nothing is written if one is bad) while a local model embeds them, insert in one transaction.

        The caller applies to items that name no user, agent or session. `embeddings` (one row per
        item, made by the configured model) skips embedding: the bulk-load path.
        """
        return self._writes.add_many(
            items, as_caller(caller, user_id, agent_id), dedup=dedup, progress=progress, actor=actor, embeddings=embeddings
        )

    def update(
        self, memory_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | builtins.list[str] | None = None, **fields: Unpack[UpdateFields],
    ) -> MemoryRecord:
        """Change the given fields only; a new content is re-embedded. History keeps the old values.

        `fields` are `UpdateFields`: `content`, `title`, `category`, `tags`, `importance`, `confidence`,
        `visibility`, `metadata`, `expires_at`."""
        given = _known("update", fields, UpdateFields)
        changes = {key: given.get(key) for key in UpdateFields.__annotations__}
        return self._writes.update(memory_id, as_caller(caller, user_id, agent_id), scope, changes)

    def supersede(
        self, memory_id: str, content: str, *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, scope: str | builtins.list[str] | None = None, valid_from: datetime | None = None,
        **fields: Unpack[MemoryChanges],
    ) -> MemoryRecord:
        """Replace a fact that changed ("FTP is 250 W" → "FTP is 260 W"), keeping the old one: it stays,
        true until `valid_from` (default: now), and `as_of` an earlier time finds it. Returns the new
        memory; its `supersedes` names the old one, whose `superseded_by` names it.

        `update` corrects how a memory is written (same id, the old text only in history); `supersede`
        records that the world changed (a new memory with its own id, vector and validity).

        `fields` are `MemoryChanges`, set on the new version: `title`, `category`, `tags`, `importance`,
        `confidence`, `visibility`, `metadata`, `expires_at`."""
        given = _known("supersede", fields, MemoryChanges)
        changes = {key: given.get(key) for key in MemoryChanges.__annotations__}
        return self._writes.supersede(memory_id, as_caller(caller, user_id, agent_id), scope, content,
                                      valid_from=valid_from, fields=changes)

    def versions(
        self, memory_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None,
    ) -> list[MemoryRecord]:
        """Every version of a fact, the first first: the memories it superseded and those that superseded
        it (one version when it was never superseded)."""
        caller = as_caller(caller, user_id, agent_id)
        record = resolve(self._store, memory_id, caller, scope, self.config.access)
        chain = [record]
        while chain[0].supersedes and (earlier := self._version(chain[0].supersedes, caller, scope)) is not None:
            chain.insert(0, earlier)
        while chain[-1].superseded_by and (later := self._version(chain[-1].superseded_by, caller, scope)) is not None:
            chain.append(later)
        return chain

    def _version(self, memory_id: str, caller: Caller, scope: str | list[str] | None) -> MemoryRecord | None:
        """A linked version the caller may read (an erased one ends the chain)."""
        try:
            return resolve(self._store, memory_id, caller, scope, self.config.access)
        except NotFoundError:
            return None

    def delete(
        self, memory_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None,
    ) -> MemoryRecord:
        """Soft delete: hidden from search and lists, recoverable until purged (retention period)."""
        return self._writes.set_deleted(memory_id, as_caller(caller, user_id, agent_id), scope, utcnow())

    def undelete(
        self, memory_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None,
    ) -> MemoryRecord:
        return self._writes.set_deleted(memory_id, as_caller(caller, user_id, agent_id), scope, None)

    def forget(
        self, memory_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None,
    ) -> str:
        """Hard delete (GDPR): content, vector, index rows and the content kept in history are gone, and so are
        the logged searches that found it (written first, so none noted before comes back after)."""
        self._recorder.flush()
        return self._writes.forget(memory_id, as_caller(caller, user_id, agent_id), scope)

    def erase(
        self, *, user_id: str | None = None, agent_id: str | None = None, caller: Caller | None = None,
        dry_run: bool = False,
    ) -> Erased:
        """Erase a person for good (GDPR): every memory of the user or agent named (owned by it, or
        in its scope; deleted ones included), their history's old values, its name on the changes
        history says it made (now `user:(erased)`), its startup entries.

        Unlike other verbs, `user_id`/`agent_id` name whom to erase (as mem0's `delete_all` does),
        not who asks: that is `caller` (default: the administrator), who must be the administrator
        or the person itself. Returns the rows per kind in `erased`, e.g. `{"memories": 4, "history": 9,
        "history_actor": 9, "messages": 12, "segments": 2, "startup": 1}` (a closed segment's JSONL
        file goes with it); with `dry_run`, what would go, and nothing changes."""
        person = Person.named(user_id, agent_id)
        self._recorder.flush()  # the searches noted and not yet written are the person's too
        counts = erase_person(self._store, self._writes, person, caller or Caller(), dry_run=dry_run,
                              folder=self.conversations.folder())
        return Erased(erased=counts, dry_run=dry_run)

    def delete_bulk(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        dry_run: bool = False, **filters: Unpack[DeleteFilters],
    ) -> int:
        """Soft-delete every active memory that matches the filters, in the scopes the caller reads, that the
        caller may erase: its own words, or any in a scope it may write (memory-lancedb-pro's delete-bulk); how
        many (would be, with `dry_run`). At least one filter is required; `until` is "older than", `since`
        "newer than". Restorable until purged.

        `filters` are `DeleteFilters`: `scope`, `category`, `tags`, `session_id`, `since`, `until`, and `user`,
        `agent`, `visibility`, `source_type`, `source` (memory or fact) as `list` takes them."""
        caller = as_caller(caller, user_id, agent_id)
        return self._writes.delete_bulk(self._bulk("delete_bulk", caller, filters), caller, dry_run=dry_run)

    def undelete_bulk(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        dry_run: bool = False, **filters: Unpack[DeleteFilters],
    ) -> int:
        """Restore every deleted memory that matches the filters (as `delete_bulk` takes them), each as `undelete`
        would (so with write access to its scope); how many (would be, with `dry_run`)."""
        caller = as_caller(caller, user_id, agent_id)
        read = self._bulk("undelete_bulk", caller, filters, only_deleted=True, secrets=True)
        return self._writes.each(read, caller, dry_run, lambda r: self._writes.set_deleted(r.id, caller, r.scope, None),
                                 lambda r: passes(check_change, caller, r, access=self.config.access))

    def set_visibility_bulk(
        self, level: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        dry_run: bool = False, **filters: Unpack[DeleteFilters],
    ) -> int:
        """Give every active memory that matches the filters (as `delete_bulk` takes them; `visibility` is the
        level they have now) the level `level` (private, shared, secret), each as `update` would, with its
        refusals; how many change (would, with `dry_run`): those already at `level` are left as they are."""
        caller = as_caller(caller, user_id, agent_id)
        check_visibility(level)
        read = self._bulk("set_visibility_bulk", caller, filters, secrets=True)
        return self._writes.each(read, caller, dry_run,
                                 lambda r: self._writes.update(r.id, caller, r.scope, {"visibility": level}),
                                 lambda r: r.visibility != level and passes(check_change, caller, r, access=self.config.access)
                                 and passes(check_visibility_change, caller, r, level))

    def _bulk(self, verb: str, caller: Caller, filters: Mapping[str, Any], **more: Any) -> Filters:
        """A bulk change's filters (at least one), as the reads of its caller: memories and facts only."""
        f = _known(verb, filters, DeleteFilters)
        if all(v is None for v in f.values()):
            raise ValidationError(f"{verb} needs a filter ({', '.join(DeleteFilters.__annotations__)})")
        return self._read(caller, {**f, **more}, LISTED[:2])

    # -- maintenance -----------------------------------------------------------------------
    def purge(
        self, *, older_than_days: float | None = None, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None,
    ) -> int:
        """Hard-delete memories soft-deleted longer ago than the retention period (default 30 days)."""
        return self._maintenance.purge(as_caller(caller, user_id, agent_id), older_than_days)

    def backup(self, path: str | Path, *, progress: Progress | None = None) -> BackupSummary:
        """The whole store as one file (a tar; `.tar.gz` compresses), consistent while others write;
        `clawrecall restore` puts it into an empty store of either backend (docs/backups.md)."""
        return backup(self._store, path, progress)

    def reembed(self, *, progress: Progress | None = None, batch_size: int = 256) -> int:
        """Re-embed every row with the configured model and adopt it as the store's model, in one swap
        once all are done; an interrupted run is resumed. Returns how many rows it re-embedded."""
        return self._maintenance.reembed(progress=progress, batch_size=batch_size)

    # -- reads -----------------------------------------------------------------------------
    def search(
        self, query: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        limit: int = 10, **filters: Unpack[SearchFilters],
    ) -> SearchHits:
        """Hybrid search in the scopes the caller may read. Hits carry `.memory`, `.score`, `.age`.

        `filters` are `SearchFilters`: `scope`, `category`, `tags`, `session_id`, `since`, `until`,
        `include_deleted`, `as_of`, `secrets`, `mode` (hybrid, vector, bm25, trigram), `explain`, `diverse`,
        `min_score` (or `threshold`), `sources`, `exclude_session`, `message_roles`.

        `.score` is absolute: the estimated probability that the hit is relevant (docs/retrieval.md).
        Hits below `min_score` (default `retrieval.min_score`) are left out, so a query about nothing
        stored returns no hits (`threshold` is the same, under mem0's name). `diverse=False` skips the
        diversity stage, which moves near-copies of a better hit to the end: to see every copy of a
        memory, e.g. before erasing one.

        By default it searches what recall searches (`retrieval.sources`): memories, what users and
        assistants said in the conversation record (`message`) and ingested file chunks (`chunk`); a
        `category` or `tags` filter, which only memories carry, narrows that to memories. `sources` names
        what to search instead; each hit says its `source` and `origin`. `exclude_session` leaves out the
        messages of that session's current transcript (since it last ended: they are in the prompt
        already), `message_roles` messages of other roles (user, assistant, reasoning, tool_call,
        tool_result, system; by default user and assistant, or every role when `sources` is named).

        Only current memories are searched (not those another has superseded); `as_of` searches what was
        true then. A time in the query ("yesterday", "in May", "v květnu", "в мае")
        lifts what was said or became true in that time (docs/time.md).

        An agent finds its own memories, those no agent wrote and the other agents' shared ones;
        `secrets=True` adds its own secrets (docs/agents.md).

        When the embedding provider fails, a hybrid search runs on its keyword legs and the hits say why
        (`hits.without_vectors`); their scores are then ranking scores. A `vector` search fails."""
        caller = as_caller(caller, user_id, agent_id)
        f = _known("search", filters, SearchFilters)
        min_score, threshold, mode = f.get("min_score"), f.get("threshold"), f.get("mode", "hybrid")
        secrets = f.get("secrets", False)
        if threshold is not None:
            if min_score is not None and min_score != threshold:
                raise ValidationError("give min_score or threshold (the same thing), not both")
            min_score = threshold
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must not be empty")
        check_text(query, "query")
        check_int(limit, "limit", 1, 1000)
        mode = one_of(mode, SearchMode, "search mode")
        if min_score is not None:
            min_score = check_share(min_score, "min_score")
        category, tags, exclude_session = f.get("category"), f.get("tags"), f.get("exclude_session")
        sources, message_roles = covered(f.get("sources"), f.get("message_roles"), self.config.retrieval,
                                         memory_only=bool(category) or bool(tags))
        read = read_filters(
            caller, f.get("scope"), self.config.categories, access=self.config.access, category=category, tags=tags,
            session_id=f.get("session_id"), since=f.get("since"), until=f.get("until"),
            include_deleted=f.get("include_deleted", False), sources=sources, exclude_session=exclude_session,
            exclude_since=None if exclude_session is None else self.conversations._transcript_start(caller, exclude_session),
            message_roles=message_roles, as_of=f.get("as_of"), secrets=secrets,
        )
        query, started = query.strip()[:4000], time.perf_counter()
        hits = self._pipeline.search(query, replace(read, secrets=False), limit=limit, mode=mode,
                                     explain=f.get("explain", False), diverse=f.get("diverse", True), min_score=min_score)
        if secrets:  # never indexed nor embedded: the caller's own, opened and matched by their words here
            found = self._secrets.search(query, read, limit)
            hits[:] = sorted([*hits, *found], key=lambda h: h.score, reverse=True)[:limit]
        self._recorder.note(caller, read.scopes, MASK if secrets else query, mode, hits,
                            (time.perf_counter() - started) * 1000)  # a secret search's words may spell one
        return hits

    def get(
        self, memory_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, reveal: bool = True,
    ) -> MemoryRecord:
        """A memory by id or unique id prefix (8+ hex characters), deleted ones included; or any other
        search hit by its id (a recorded message, a file's chunk).

        Like every call by id, it looks in `scope` (default: the caller's own scopes, as a search
        would) and answers "not found" for a memory elsewhere. A secret the caller may read is shown
        opened: an id is an explicit request (`reveal=False`: masked, as a list shows it).
        """
        record = resolve(self._store, memory_id, as_caller(caller, user_id, agent_id), scope, self.config.access, KINDS)
        return self._secrets.reveal(record) if reveal else record

    def list(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        limit: int = 50, offset: int = 0, **filters: Unpack[ListFilters],
    ) -> builtins.list[MemoryRecord]:
        """Memories without searching, newest first; deleted, expired and superseded ones only when asked for.

        `filters` are `ListFilters`: `scope`, `category`, `tags`, `session_id`, `since`, `until`,
        `include_deleted`, `only_deleted`, `include_expired`, `include_superseded`, `as_of`, `secrets`,
        `source_type`, `source_id`, `sources` (memory, message, chunk), `source` (one of them, or fact: what the
        extraction made), `user`, `agent`, `visibility`, `order` (newest, oldest, updated, importance, recalls: most found by logged searches first).

        `as_of` lists what was true then. `source_type`/`source_id` (one id or any
        of several) find what an importer wrote before, so it can skip it by identity."""
        f = _known("list", filters, ListFilters)
        order = one_of(f.pop("order", "newest"), ListOrder, "order")
        check_int(limit, "limit", 1, _MAX_ROWS)
        check_int(offset, "offset", 0, _MAX_ROWS)
        read = self._read(as_caller(caller, user_id, agent_id), f)
        return self._store.memories.find(read, limit=limit, offset=offset, order=order)

    def _read(self, caller: Caller, f: Mapping[str, Any], sources: tuple[str, ...] = LISTED) -> Filters:
        """A list's, a count's or a bulk change's filters (`CountFilters`), checked, in the scopes the caller reads;
        `source` one of `sources`."""
        return read_filters(caller, f.get("scope"), self.config.categories, access=self.config.access,
                            **{k: v for k, v in _by_source(dict(f), sources).items() if k != "scope"})

    def count(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        **filters: Unpack[CountFilters],
    ) -> int:
        """How many memories `list` would list with the same filters (deleted, expired and superseded ones only
        when asked for). `filters` are `CountFilters`: `list`'s filters but `order`."""
        f = _known("count", filters, CountFilters)
        return self._store.memories.count(self._read(as_caller(caller, user_id, agent_id), f))

    def history(
        self, memory_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | builtins.list[str] | None = None,
    ) -> builtins.list[HistoryEntry]:
        """Every change to a memory. A forgotten memory's history keeps only who erased it, when and where it was."""
        caller = as_caller(caller, user_id, agent_id)
        try:
            record_id = resolve(self._store, memory_id, caller, scope, self.config.access).id
        except NotFoundError:
            if not caller.administrator:  # an erased memory's scope is gone with it: only the administrator sees its trace
                raise
            prefix = memory_id.strip().lower()
            matches = self._store.history.ids_with_prefix(prefix)
            if len(matches) > 1 and prefix not in matches:
                raise AmbiguousIdError(memory_id, matches) from None
            entries = self._store.history.of(prefix if prefix in matches else matches[0]) if matches else []
            if entries and entries[-1].action in ("forget", "purge"):
                return entries
            raise
        return self._store.history.of(record_id)

    def stats(self) -> Stats:
        s = self._store.memories.stats()
        return Stats(
            total=s.total, active=s.total - s.deleted - s.expired, deleted=s.deleted, expired=s.expired,
            by_category=s.by_category, by_scope=s.by_scope, by_kind=s.by_kind, users=s.users, embedding=self._embedding.stored_fingerprint(),
            schema_version=self._store.schema_version(), backend=self._store.backend, location=self._store.location,
            size_bytes=s.size_bytes, oldest=s.oldest, newest=s.newest, jobs=self.jobs.stats(caller=Caller()),
        )

    # -- JSONL import / export ---------------------------------------------------------------
    def export_jsonl(
        self, out: IO[str], *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | builtins.list[str] | None = None, include_deleted: bool = True, secrets: bool = False,
    ) -> int:
        """Write one JSON object per memory, with every field, oldest first; secret memories only with
        `secrets=True` (the caller's own; the administrator's: all)."""
        return self._transfer.export_jsonl(out, as_caller(caller, user_id, agent_id), scope, include_deleted=include_deleted,
                                           secrets=secrets)

    def export_journal(
        self, folder: str | Path, *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, scope: str | builtins.list[str] | None = None, secrets: bool = False,
    ) -> Journal:
        """Write the readable journal: `<scope>/memory/YYYY-MM-DD.md` under `folder`, one file per scope and
        day (decisions, preferences, facts, what changed), which OpenClaw's memory-core indexes and
        `clawrecall openclaw import` reads back. Deleted memories are left out; secret ones unless `secrets`."""
        written = self._transfer.export_journal(Path(folder), as_caller(caller, user_id, agent_id), scope, secrets=secrets)
        return Journal(**written)

    def import_jsonl(
        self, lines: Iterable[str], *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, on_duplicate: OnDuplicate = "skip", dry_run: bool = False,
        progress: Progress | None = None, chunk: int = 512, vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None,
    ) -> Imported:
        """Import JSONL (an export, or lines of your own). Every line is validated before anything is written.

        Lines whose id is stored are skipped, and near-duplicates of a stored memory or an earlier
        line too unless `on_duplicate="keep"`: running an import twice adds nothing. `dry_run`
        checks and counts, writing nothing. Returns `read`, `created` (would be, in a dry run),
        `skipped` (id stored), `duplicates`, and `left_out`: each line not imported, and why. `vectors`
        (by id) are stored instead of embedding those lines: vectors made by the store's own model."""
        return self._transfer.import_jsonl(
            lines, as_caller(caller, user_id, agent_id), on_duplicate=on_duplicate,
            dry_run=dry_run, progress=progress, chunk=chunk, vectors=vectors,
        )

    def import_items(
        self, items: Iterable[NewMemory | Mapping[str, Any]], *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, on_duplicate: OnDuplicate = "skip", dry_run: bool = False,
        progress: Progress | None = None, chunk: int = 512, vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None,
    ) -> Imported:
        """`import_jsonl` of memories a program holds (NewMemory, or its fields as a dict): the same checks,
        batches and answer, without writing them as JSON to read back. `left_out` names each by its place
        (`{"item": 3, ...}`). What `import --from SYSTEM` writes another system's rows with."""
        return self._transfer.import_items(
            items, as_caller(caller, user_id, agent_id), on_duplicate=on_duplicate,
            dry_run=dry_run, progress=progress, chunk=chunk, vectors=vectors,
        )


def _open_store(path_or_url: str | Path | None, cfg: Config, *, create: bool) -> Store:
    """The store a path or URL names, else the config's `db` or `database`, else the default file."""
    target = path_or_url or cfg.db or (cfg.database.url() if cfg.database else None) or default_db_path()
    return open_store(target, postgres=cfg.postgres, sqlite=cfg.sqlite, create=create)


def _by_source(filters: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """A filter's `source` (one of LISTED: a kind of row, or `fact`) as the `sources` and `source_type` reads take."""
    source = filters.pop("source", None)
    if source is None:
        return filters
    if source not in allowed:
        raise ValidationError(f"unknown source {source!r}: use {', '.join(allowed)}")
    return {**filters, "source_type": FACT_SOURCE} if source == "fact" else {**filters, "sources": [source]}


def _known(verb: str, given: Mapping[str, Any], fields: Any) -> dict[str, Any]:
    """A verb's keyword fields, each named by its TypedDict: a name it does not know is the TypeError Python
    raises for a misspelt keyword (a type checker says it before the call is made)."""
    names = fields.__required_keys__ | fields.__optional_keys__
    for key in given:
        if key not in names:
            raise TypeError(f"{verb}() got an unexpected keyword argument {key!r}")
    return dict(given)
