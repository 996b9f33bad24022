"""`mem.insight`: the search log's reports and a memory's recalls.

Who reads what: a search is logged under its caller's own scope (`log.owner_scope`), and a caller
reads the log rows of the scopes it may read (the one scope check, `read_scopes`): its own searches;
the administrator every row. A memory's recalls are readable by whoever may read the memory, with
the query shown only of the searches the caller may read.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Callable, Iterable

from .._time import utcnow
from ..config import Config
from ..errors import ValidationError
from ..insight.cleanup import REASONS, text_reasons
from ..insight.log import SearchRecorder
from ..models import (
    KINDS, CleanupItem, CleanupReport, Cluster, Coverage, LoggedSearch, MemoryRecord, Occurrence, PeriodCount,
    Provenance, QueryCount, Recall, RecallCount,
)
from ..scopes import Caller, as_caller, household, may_read, read_scopes
from ..storage import Filters, Store
from ..storage.insight import SearchLog, coverage
from ._embedding import Embedding
from ._extraction import EXTRACT
from ._facts import SOURCE_TYPE as EXTRACTED
from ._facts import SUMMARY_SOURCE
from ._validate import check_int, check_when

if TYPE_CHECKING:
    import numpy as np

Resolve = Callable[[str, Caller, "str | list[str] | None"], MemoryRecord]
Delete = Callable[[str, Caller], MemoryRecord]


class Insight:
    def __init__(self, store: Store, config: Config, recorder: SearchRecorder, embedding: Embedding, resolve: Resolve,
                 delete: Delete):
        self._store = store
        self._embedding = embedding
        self._config = config
        self._resolve = resolve
        self._delete = delete
        self._recorder = recorder

    def _log(self) -> SearchLog:
        """The search log, with the searches noted but not yet written written first: one shows at once."""
        self._recorder.flush()
        return self._store.search_log

    def _scopes(self, caller: Caller | None, user_id: str | None, agent_id: str | None,
                scope: str | list[str] | None) -> tuple[Caller, list[str] | None]:
        who = as_caller(caller, user_id, agent_id)
        return who, read_scopes(who, scope, access=self._config.access)

    def searches(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, since: datetime | None = None, limit: int = 100,
    ) -> list[LoggedSearch]:
        """The latest logged searches the caller may read, newest first."""
        _, scopes = self._scopes(caller, user_id, agent_id, scope)
        check_int(limit, "limit", 1, 10_000)
        return self._log().recent(scopes, _since(since), limit)

    def popular(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, since: datetime | None = None, limit: int = 20,
    ) -> list[QueryCount]:
        """The queries asked most (equal but for case: one), most first."""
        return self._queries(caller, user_id, agent_id, scope, since, limit, empty=False)

    def unanswered(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, since: datetime | None = None, limit: int = 20,
    ) -> list[QueryCount]:
        """The queries that found nothing, most asked first: what memory is missing."""
        return self._queries(caller, user_id, agent_id, scope, since, limit, empty=True)

    def _queries(self, caller: Caller | None, user_id: str | None, agent_id: str | None, scope: str | list[str] | None,
                 since: datetime | None, limit: int, *, empty: bool) -> list[QueryCount]:
        _, scopes = self._scopes(caller, user_id, agent_id, scope)
        check_int(limit, "limit", 1, 10_000)
        rows = self._log().queries(scopes, _since(since), limit, empty=empty)
        return [QueryCount(query=q, count=n, last_at=last, mean_results=round(mean, 2)) for q, n, last, mean in rows]

    def searched(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, since: datetime | None = None, bucket: str = "day",
    ) -> list[PeriodCount]:
        """Searches logged per day (or month), oldest first: how much memory is asked."""
        _, scopes = self._scopes(caller, user_id, agent_id, scope)
        return [PeriodCount(period=p, count=n) for p, n in self._log().per_period(scopes, _since(since), _bucket(bucket))]

    def added(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, since: datetime | None = None, bucket: str = "month",
    ) -> list[PeriodCount]:
        """Rows added per month (or day) by category and source (memory, fact, message, chunk),
        oldest first, of those the caller reads (an agent: its household's; secrets never); deleted ones left out."""
        who, scopes = self._scopes(caller, user_id, agent_id, scope)
        filters = replace(self._filters(who, scopes), kinds=KINDS, since=_since(since))
        return [PeriodCount(period=p, category=c, source=k, count=n)
                for p, c, k, n in self._store.memories.added_per_period(filters, _bucket(bucket), EXTRACTED)]

    def recalled(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, since: datetime | None = None, limit: int = 20,
    ) -> list[RecallCount]:
        """The memories (and messages, chunks) the caller's logged searches found most, most first; those
        since deleted or now out of the caller's reach are left out."""
        who, scopes = self._scopes(caller, user_id, agent_id, scope)
        check_int(limit, "limit", 1, 10_000)
        counts = self._log().recalled(scopes, _since(since), limit)
        found = self._store.memories.fetch([mid for mid, _, _ in counts])
        return [RecallCount(memory=m, count=n, last_at=last) for mid, n, last in counts
                if (m := found.get(mid)) is not None and m.deleted_at is None and self._reads(who, m)]

    def never_recalled(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, days: float = 30, limit: int = 100,
    ) -> list[MemoryRecord]:
        """Current memories older than `days` that no logged search found in the last `days`, oldest first."""
        _, scopes = self._scopes(caller, user_id, agent_id, scope)
        check_int(limit, "limit", 1, 10_000)
        _check_days(days)
        ids = self._log().never_recalled(scopes, utcnow() - timedelta(days=days), limit)
        found = self._store.memories.fetch(ids)
        return [found[i] for i in ids if i in found]

    def recalls(
        self, memory_id: str, *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, scope: str | list[str] | None = None,
    ) -> list[Recall]:
        """Every logged time a search found this memory, newest first: when, score and rank; the query and
        door only of the searches the caller may read (another user's question stays theirs)."""
        who = as_caller(caller, user_id, agent_id)
        memory = self._resolve(memory_id, who, scope)
        out = []
        for hit, search in self._log().recalls_of(memory.id):
            shown = who.administrator or (search.scope is not None and may_read(who, search.scope, access=self._config.access))
            out.append(Recall(at=hit.at, score=hit.score, rank=hit.rank, door=search.door if shown else None,
                              query=search.query if shown else None))
        return out

    def occurrences(
        self, memory_id: str, *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, scope: str | list[str] | None = None,
    ) -> list[Occurrence]:
        """A fact's occurrences (each time a conversation said it again), oldest first, if the caller may read the fact."""
        memory = self._resolve(memory_id, as_caller(caller, user_id, agent_id), scope)
        return self._store.occurrences.of(memory.id)

    def why(
        self, memory_id: str, *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, scope: str | list[str] | None = None,
    ) -> Provenance:
        """Why this memory is stored and why it was recalled: its origin (the capture rule, the extraction job
        and the messages and segment it came from, the file, the tool, the import), its history, and every
        logged search that found it. Readable by whoever may read the memory; the parts in other scopes are
        left out."""
        who = as_caller(caller, user_id, agent_id)
        memory = self._resolve(memory_id, who, scope)
        s = self._store
        history = s.history.of(memory.id)
        first = history[0] if history else None
        imported = first is not None and "import" in (first.action, first.actor)  # JSONL import's writes: actor "import"
        origin = "import" if imported else memory.source_type or "add"
        segment = file = job = None
        messages = []
        if origin == EXTRACTED and memory.source_id:
            segment = s.segments.get(memory.source_id)
            job = s.jobs.for_subject(EXTRACT, memory.source_id)
            ids = [str(i) for i in memory.metadata.get("message_ids", [])]
            found = s.messages.of(ids)
            messages = [found[i] for i in ids if i in found]
        elif origin == "file" and memory.source_id:
            file = s.files.get(memory.source_id)
        kept = [m for m in messages if self._reads_scope(who, m.scope)]
        return Provenance(
            memory=memory, origin=origin, explanation=_explain(memory, origin), history=history,
            added_by=first.actor if first else None, added_at=first.at if first else memory.created_at,
            segment=segment if segment is not None and self._reads_scope(who, segment.scope) else None,
            messages=kept, occurrences=s.occurrences.of(memory.id),
            job=job if job is not None and self._reads_scope(who, job.scope) else None,
            file=file if file is not None and self._reads_scope(who, file.scope) else None,
            recalls=self.recalls(memory.id, caller=who, scope=scope),
        )

    def coverage(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None,
    ) -> list[Coverage]:
        """Embedding coverage per kind of row (memory, fact, message, chunk, window) in the scopes the caller
        reads: rows, rows with a vector by the store's model, rows waiting for the backfill, rows whose vector
        another model made. A content change re-embeds in the write that makes it, so no row's vector is
        older than its text (docs/insight.md)."""
        _, scopes = self._scopes(caller, user_id, agent_id, scope)
        fingerprint = self._embedding.stored_fingerprint()
        current = None if fingerprint is None else f"{fingerprint.provider}/{fingerprint.model}"
        kinds: dict[str, Coverage] = {}
        for kind, model, rows, vectors in coverage(self._store, scopes, EXTRACTED):
            c = kinds.setdefault(kind, Coverage(kind=kind, total=0, embedded=0, percent=100.0, waiting=0, other_model=0))
            c.total += rows
            c.waiting += rows - vectors
            if vectors and model is not None:
                c.models[model] = c.models.get(model, 0) + vectors
                if model == current:
                    c.embedded += vectors
                else:
                    c.other_model += vectors
        for c in kinds.values():
            c.percent = round(100 * c.embedded / c.total, 2) if c.total else 100.0
        order = ["memory", "fact", "message", "chunk", "window"]
        return sorted(kinds.values(), key=lambda c: (order.index(c.kind) if c.kind in order else len(order), c.kind))

    def clusters(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, threshold: float = 0.8, limit: int = 20,
    ) -> list[Cluster]:
        """Groups of current memories that say nearly the same thing (cosine ≥ `threshold`, nova-memory's
        0.8), per scope, largest first; in the memories the caller reads (an agent: its household's)."""
        who, scopes = self._scopes(caller, user_id, agent_id, scope)
        check_int(limit, "limit", 1, 10_000)
        _check_threshold(threshold)
        return self._clusters(self._store.memories.vectors_by_scope(self._filters(who, scopes)), threshold, limit)

    def cleanup(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, days: float = 90, duplicate_threshold: float = 0.95,
        limit: int = 1_000,
    ) -> CleanupReport:
        """The memories worth deleting, oldest first, each with its reasons: noise, near-empty text, a
        template's placeholder, a question kept as a memory, a near-copy (cosine ≥ `duplicate_threshold`)
        of a memory kept, or — with the search log on — not found by any search in `days` days. Nothing
        is changed: `confirm_cleanup(ids)` deletes what a person confirmed."""
        who, scopes = self._scopes(caller, user_id, agent_id, scope)
        check_int(limit, "limit", 1, 100_000)
        _check_threshold(duplicate_threshold)
        _check_days(days)
        rows = list(self._store.memories.iter_all(self._filters(who, scopes)))
        reasons = {r.id: text_reasons(r.content) for r, _ in rows}
        copies: dict[str, str] = {}
        vectors = [(r.id, r.scope, v) for r, v in rows if v is not None]
        for cluster in self._clusters(vectors, duplicate_threshold, len(vectors), {r.id: r for r, _ in rows}):
            for memory_id in cluster.remove:
                copies[memory_id] = cluster.keep
                reasons[memory_id].append("duplicate")
        if self._config.insight.search_log:
            cutoff = utcnow() - timedelta(days=days)
            stale = set(self._log().never_recalled(scopes, cutoff, len(rows) or 1))
            for r, _ in rows:
                if r.id in stale:
                    reasons[r.id].append("never_recalled")
        flagged = [r for r, _ in rows if reasons[r.id]]
        counts = {reason: sum(reason in reasons[r.id] for r in flagged) for reason in REASONS}
        items = [CleanupItem(memory=r, reasons=reasons[r.id], duplicate_of=copies.get(r.id))
                 for r in sorted(flagged, key=lambda r: r.created_at)[:limit]]
        return CleanupReport(items=items, counts={k: v for k, v in counts.items() if v}, scanned=len(rows))

    def confirm_cleanup(
        self, ids: list[str], *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[MemoryRecord]:
        """Soft-delete the memories a person confirmed from a report (restorable until purged), through the
        one write path and its checks: each must be one the caller may delete."""
        who = as_caller(caller, user_id, agent_id)
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValidationError("ids must be a list of memory ids")
        return [self._delete(memory_id, who) for memory_id in dict.fromkeys(ids)]

    def _filters(self, who: Caller, scopes: list[str] | None) -> Filters:
        return Filters(scopes=scopes, **household(who, access=self._config.access))  # type: ignore[arg-type]

    def _clusters(self, rows: Iterable[tuple[str, str, np.ndarray]], threshold: float, limit: int,
                  records: dict[str, MemoryRecord] | None = None) -> list[Cluster]:
        """The `limit` largest groups of `rows` (id, scope, vector), grouped per scope; their memories are read
        from `records`, else from the store (only theirs: a 100k scope's records are not built)."""
        import numpy as np  # here: a read of the search log's reports loads no numpy

        from ..insight.clusters import groups

        by_scope: dict[str, tuple[list[str], list[np.ndarray]]] = {}
        for memory_id, scope, vector in rows:
            ids, vectors = by_scope.setdefault(scope, ([], []))
            ids.append(memory_id)
            vectors.append(vector)
        found = [(scope, [ids[i] for i in g.members], g.similarities)
                 for scope, (ids, vectors) in by_scope.items() for g in groups(np.stack(vectors), threshold)]
        found.sort(key=lambda f: (-len(f[1]), -sum(f[2]) / len(f[2]), f[0]))
        found = found[:limit]
        if records is None:
            records = self._store.memories.fetch([i for _, ids, _ in found for i in ids])
        out = []
        for scope, ids, sims in found:
            members = sorted((records[i] for i in ids), key=lambda m: (m.importance, m.updated_at), reverse=True)
            out.append(Cluster(scope=scope, size=len(members), memories=members, keep=members[0].id,
                               remove=[m.id for m in members[1:]], min_similarity=min(sims),
                               mean_similarity=round(sum(sims) / len(sims), 4)))
        return out

    def _reads(self, who: Caller, memory: MemoryRecord) -> bool:
        return self._reads_scope(who, memory.scope)

    def _reads_scope(self, who: Caller, scope: str) -> bool:
        return who.administrator or may_read(who, scope, access=self._config.access)


#: an origin in words, by the `source_type` the write paths give
_ORIGINS = {
    "capture": "kept by a capture rule from what was said at the end of a turn",
    EXTRACTED: "extracted by the LLM from a closed conversation segment",
    SUMMARY_SOURCE: "the summary of a session, from its segments' extractions",
    "file": "a chunk of an ingested file",
    "conversation": "a message of the conversation record",
    "tool": "stored by an agent through a memory tool",
    "openclaw-markdown": "imported from OpenClaw's Markdown memory files",
    "import": "imported from a JSONL export",
    "add": "added through the API, the CLI or REST",
}


def _explain(memory: MemoryRecord, origin: str) -> str:
    said = _ORIGINS.get(origin, f"stored with source {origin!r}")
    if origin == "import" and memory.source_type:
        return f"{said}; first {_ORIGINS.get(memory.source_type, memory.source_type)}"
    return f"{said} ({memory.source_id})" if memory.source_id and origin in ("tool", "openclaw-markdown") else said


def _check_threshold(threshold: float) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.5 <= threshold <= 1:
        raise ValidationError(f"a similarity threshold must be a number between 0.5 and 1, got {threshold!r}")


def _bucket(bucket: str) -> str:
    if bucket not in ("day", "month"):
        raise ValidationError(f"bucket is day or month, not {bucket!r}")
    return bucket


def _check_days(days: float) -> None:
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not 0 < days <= 36_500:
        raise ValidationError(f"days must be a number of days between 0 and 36,500, got {days!r}")


def _since(since: datetime | None) -> datetime | None:
    return None if since is None else check_when(since, "since")

