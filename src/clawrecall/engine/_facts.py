"""Facts: a segment's extracted facts applied to the store (docs/extraction.md).

The model's slow work happens elsewhere (the extraction job); here is what it needs before and
after: the known facts to show it (`known`, `prompt`), its answer turned into decisions (`decide`),
and the decisions written (`apply`): new facts, repeats, supersedes, occurrences and the source
messages' keys, all in one transaction, the job's own when it passes one. Every memory row goes
through `Writes`; this module writes only occurrences, which are its own.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..config import Config
from ..errors import EmbeddingError, NotFoundError, ValidationError
from ..extraction import prompt as prompts
from ..extraction.decide import Decision, decide
from ..extraction.schema import ExtractedFact, Extraction, fact_categories
from ..conversations.text import detect_category, keepable, strip_envelope
from ..models import MemoryRecord, Message, Occurrence, Segment, Visibility, embedded_text
from ..scopes import Caller, household, new_visibility, validate_scope
from ..storage import Filters, Store
from ._embedding import Embedding
from ._validate import new_ids, require_writes
from ._writes import Writes, actor_of

if TYPE_CHECKING:
    from ..retrieval.pipeline import RetrievalPipeline

SNIPPET_CHARS = 300  # what an occurrence keeps of what was said
SOURCE_TYPE = "extraction"
SUMMARY_SOURCE = "session_summary"  # a summary's source_type; its source_id is the session id
FALLBACK_CONFIDENCE = 0.5  # a fact the rules found in one message, undated and unchecked by a model


@dataclass
class ApplyResult:
    """What `apply` wrote: ids of facts created (new and kept beside another), repeated and superseded
    (old → new), how many occurrences, and how many messages got keys."""

    created: list[str] = field(default_factory=list)
    kept_both: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)
    updated: list[tuple[str, str]] = field(default_factory=list)
    occurrences: int = 0
    keyed: int = 0


class Facts:
    def __init__(self, store: Store, config: Config, writes: Writes, embedding: Embedding,
                 pipeline: Callable[[], RetrievalPipeline]):
        self.store = store
        self.config = config
        self.writes = writes
        self.embedding = embedding
        self._pipeline = pipeline

    # -- before the model -----------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Whether closed segments are extracted: an LLM is configured and `extraction.enabled`."""
        return self.config.llm.provider != "none" and self.config.extraction.enabled

    def wanted(self, segment: Segment) -> bool:
        """Whether a segment is one for the model: extraction is active, the segment closed, with enough turns
        (`extraction.min_turns`); the rules find a shorter one's facts."""
        cfg = self.config.extraction
        return self.active and segment.closed_at is not None and segment.turn_count >= cfg.min_turns

    def known(self, scope: str, segment_text: str, limit: int, agent_id: str | None = None) -> list[MemoryRecord]:
        """The current facts of `scope` most like the segment that its agent sees (scopes.household),
        through the one search pipeline; never secret ones (they are shown to a model), nor summaries.
        `EmbeddingError` when the provider fails."""
        validate_scope(scope)
        if limit <= 0 or not segment_text.strip():
            return []
        filters = Filters(scopes=[scope], categories=fact_categories(self.config.categories),
                          **household(Caller(agent_id=agent_id), access=self.config.access))  # type: ignore[arg-type]
        # the end of a long segment: what it came to is what the model is asked about
        hits = self._pipeline().search(segment_text[-4000:], filters, limit=min(2 * limit, 1000), diverse=False,
                                       min_score=0.0)
        if hits.without_vectors:  # the facts nearest in meaning cannot be found now, nor the answer's applied
            raise EmbeddingError(hits.without_vectors)
        return [h.memory for h in hits if h.memory.visibility != Visibility.secret][:limit]

    def prompt(self, segment: Segment, messages: list[Message] | None = None) -> prompts.Prompt:
        """The extraction prompt of a segment: its messages (read from the store unless given) and the
        `extraction.known_facts` known facts most like them."""
        messages = self.store.messages.in_segment(segment.id) if messages is None else messages
        text = "\n".join(m.content for m in messages if m.role in prompts.ROLES)
        known = self.known(segment.scope, text, self.config.extraction.known_facts, segment.agent_id)
        return prompts.build(segment, messages, known, categories=self.config.categories, config=self.config.extraction)

    # -- after it ---------------------------------------------------------------------------------
    def decide(self, segment: Segment, prompt: prompts.Prompt, extraction: Extraction) -> list[Decision]:
        """The decisions for a validated answer to `prompt`; a new fact nearly identical to a shown one
        (cosine ≥ `dedup.threshold`) is a repeat of it."""
        return decide(extraction, prompt.shown, prompt.known, config=self.config.extraction,
                      level=self._level(segment), near=self._near([f.text for f in extraction.facts], prompt.known,
                                      [i for i, f in enumerate(extraction.facts) if f.action == "new"]))

    def apply(
        self, segment: Segment, messages: list[Message], decisions: list[Decision], *,
        within: Callable[[], AbstractContextManager[Any]] | None = None, caller: Caller | None = None,
    ) -> ApplyResult:
        """Write a segment's decisions. Everything is embedded first; then one transaction (the one
        `within()` opens, e.g. a job's lease commit; else the store's) writes it all, or nothing.
        The facts belong to the segment's owner; `caller` (default: that owner) is who writes them."""
        require_writes(self.config)
        ids = {m.id for m in messages}
        if stray := sorted({m.id for d in decisions for m in d.sources} - ids):
            raise ValidationError(f"decisions name messages that are not the segment's: {', '.join(stray)}")
        caller = caller or _owner(segment)
        actor = actor_of(caller)
        result = ApplyResult()
        added: list[tuple[Decision, dict[str, Any]]] = []
        successors: list[tuple[Decision, MemoryRecord]] = []
        for d in decisions:
            if d.action == "update":
                assert d.existing is not None
                try:
                    successors.append((d, self.writes.successor(
                        d.existing.id, caller, segment.scope, d.fact.text, valid_from=d.valid_from,
                        fields={**self._fields(segment, d), **self._source(segment)},
                    )))
                    continue
                except (ValidationError, NotFoundError):  # changed since it was shown: keep both
                    d = Decision("keep_both", d.fact, d.existing, d.visibility, d.sources, d.valid_from,
                                 "the fact it updates changed meanwhile")
            if d.action in ("new", "keep_both"):
                added.append((d, {"content": d.fact.text, "scope": segment.scope, "valid_from": d.valid_from,
                                  **self._source(segment), **self._fields(segment, d)}))
        records, _ = self.writes.new_records([item for _, item in added], caller) if added else ([], [])
        secret = {d.fact.text for (d, _), r in zip(added, records) if r.sealed is not None}
        secret |= {d.fact.text for d, r in successors if r.sealed is not None}
        keyed = self._keyed(decisions, secret) if self.config.extraction.augment_keys else []
        texts = [r.content for r in records] + [r.content for _, r in successors] + [embedded_text(m.content, m.keys) for m in keyed]
        vectors = self.embedding.passages(texts) if texts else None  # before the transaction
        occurrences: list[Occurrence] = []
        for (d, _), record in zip(added, records):
            (result.kept_both if d.action == "keep_both" else result.created).append(record.id)
            occurrences.append(_occurrence(segment, d, record.id))
        for d, record in successors:
            result.updated.append((record.supersedes or "", record.id))
            occurrences.append(_occurrence(segment, d, record.id))
        for d in decisions:
            if d.action == "repeat" and d.existing is not None:
                result.repeated.append(d.existing.id)
                occurrences.append(_occurrence(segment, d, d.existing.id))
        with within() if within is not None else self.store.transaction():
            n = len(records)
            if records:
                assert vectors is not None
                self.writes.insert_new(records, vectors[:n], actor)
            for i, (_, record) in enumerate(successors):
                assert vectors is not None
                self.writes.close_and_open(record, vectors[n + i], actor)
            if keyed:
                assert vectors is not None
                self.writes.set_keys(keyed, vectors[n + len(successors):])
            if occurrences:
                self.store.occurrences.insert(occurrences)
        result.occurrences, result.keyed = len(occurrences), len(keyed)
        return result

    def rule_fallback(
        self, segment: Segment, messages: list[Message], caller: Caller | None = None, *,
        within: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> ApplyResult:
        """The rule-based capture (`conversations.text.keepable`) over a segment's user messages, applied as new
        facts (or repeats of near-identical known ones): for a segment too short for the model, or when no
        model answer could be used. `caller` defaults to the segment's owner."""
        cfg = self.config.hooks.capture
        said = [m for m in messages if m.role == "user"]
        facts: list[ExtractedFact] = []
        shown: list[Message] = []
        for m in said:
            text = keepable(strip_envelope(m.content), cfg)
            if text is not None:
                category = detect_category(text)
                shown.append(m)
                facts.append(ExtractedFact(
                    text=text, category=category if category in self.config.categories else "other", entities=[],
                    importance=cfg.importance, confidence=FALLBACK_CONFIDENCE, valid_from=None, sentiment="neutral",
                    source=[len(shown)], action="new", existing=None, visibility=None,
                ))
        if not facts:
            return ApplyResult()
        text = "\n".join(m.content for m in shown)
        known = self.known(segment.scope, text, self.config.extraction.known_facts, segment.agent_id)
        extraction = Extraction(facts=facts, summary=None)
        near = self._near([f.text for f in facts], known, list(range(len(facts))))
        decisions = decide(extraction, shown, known, config=self.config.extraction, near=near,
                           level=self._level(segment))
        return self.apply(segment, messages, decisions, within=within, caller=caller)

    def summarize(
        self, segment: Segment, text: str, *, segment_ids: list[str] | None = None,
        within: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> MemoryRecord:
        """The session's one `session_summary` memory, linked by its session id and (metadata) the segments
        it covers; a later summary of the same session supersedes the earlier one."""
        require_writes(self.config)
        caller = _owner(segment)
        segment_ids = segment_ids or [segment.id]
        fields = {"category": "session_summary", "importance": 0.5, "metadata": {"segment_ids": segment_ids},
                  "session_id": segment.session_id}
        found = self.store.memories.find(Filters(scopes=[segment.scope], source_type=SUMMARY_SOURCE,
                                        source_ids=[segment.session_id]), limit=1, offset=0, order="newest")
        earlier = found[0] if found else None
        if earlier is not None:
            record = self.writes.successor(earlier.id, caller, segment.scope, text, valid_from=None, fields=fields)
        else:
            [record], _ = self.writes.new_records([{
                "content": text, "scope": segment.scope, "source_type": SUMMARY_SOURCE,
                "source_id": segment.session_id, **fields,
            }], caller)
        vector = self.embedding.passages([record.content])[0]
        with within() if within is not None else self.store.transaction():
            if earlier is not None:
                self.writes.close_and_open(record, vector, actor_of(caller))
            else:
                self.writes.insert_new([record], vector[None, :], actor_of(caller))
        return record

    # -- helpers ----------------------------------------------------------------------------------
    def _level(self, segment: Segment) -> Callable[[str], str]:
        """A category's visibility for the segment's facts: its agent's rules first (`access.agents`), then
        the store's (`extraction.visibility`), as for a memory written by hand."""
        ext = self.config.extraction.visibility
        return lambda category: new_visibility(_owner(segment), segment.agent_id, category, None,
                                               access=self.config.access, default=ext.default, rules=ext.rules)

    @staticmethod
    def _source(segment: Segment) -> dict[str, Any]:
        """Where an extracted fact comes from: the segment, in its session."""
        return {"source_type": SOURCE_TYPE, "source_id": segment.id, "session_id": segment.session_id}

    def _fields(self, segment: Segment, d: Decision) -> dict[str, Any]:
        f = d.fact
        metadata: dict[str, Any] = {"entities": f.entities, "segment_id": segment.id,
                                    "message_ids": [m.id for m in d.sources]}
        if d.action == "keep_both" and d.existing is not None:
            metadata["related"] = d.existing.id  # the fact it may update: a person decides
        return {"category": f.category, "importance": f.importance, "confidence": f.confidence,
                "visibility": d.visibility, "metadata": metadata}

    def _keyed(self, decisions: list[Decision], secret: set[str]) -> list[MemoryRecord]:
        """The source messages' rows with their keys joined by the facts they gave (each text once), but
        for the `secret` ones: a message's keys are indexed and embedded."""
        texts: dict[str, list[str]] = {}
        for d in decisions:
            if d.fact.text in secret:
                continue
            for m in d.sources:
                texts.setdefault(m.id, [])
                if d.fact.text not in texts[m.id]:
                    texts[m.id].append(d.fact.text)
        rows = self.store.memories.fetch(list(texts))
        out = []
        for message_id, facts in texts.items():
            row = rows.get(message_id)
            if row is None or row.kind != "message":
                continue
            have = row.keys.split("\n") if row.keys else []
            keys = have + [t for t in facts if t not in have]
            if keys != have:
                out.append(row.model_copy(update={"keys": "\n".join(keys)}))
        return out

    def _near(self, texts: list[str], known: list[MemoryRecord], which: list[int]) -> dict[int, int]:
        """Index of a text (of `which`) → index of the known fact it nearly repeats (cosine ≥ dedup.threshold)."""
        if not which or not known:
            return {}
        stored = self.store.vectors([k.id for k in known])
        have = [i for i, k in enumerate(known) if k.id in stored]
        if not have:
            return {}
        import numpy as np

        vectors = self.embedding.passages([texts[i] for i in which])
        sims = vectors @ np.stack([stored[known[i].id] for i in have]).T
        out = {}
        for row, i in enumerate(which):
            best = int(np.argmax(sims[row]))
            if sims[row, best] >= self.config.dedup.threshold:
                out[i] = have[best]
        return out


def _owner(segment: Segment) -> Caller:
    """Whom a segment's facts belong to: the segment's user and agent, in its session."""
    return Caller(user_id=segment.user_id, agent_id=segment.agent_id, session_id=segment.session_id)


def _occurrence(segment: Segment, d: Decision, memory_id: str) -> Occurrence:
    said = " … ".join(" ".join(m.content.split()) for m in d.sources)
    return Occurrence(
        id=new_ids(1)[0], memory_id=memory_id, scope=segment.scope, segment_id=segment.id, session_id=segment.session_id,
        at=d.said_at, snippet=said if len(said) <= SNIPPET_CHARS else said[: SNIPPET_CHARS - 1] + "…",
        sentiment=d.fact.sentiment, message_ids=[m.id for m in d.sources],
    )

