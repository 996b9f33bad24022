"""The one retrieval pipeline, shared by every backend and every door.

    candidate legs (vector, bm25, trigram; each over-fetching)
      → fusion (weighted min-max scores, or RRF) → session neighbours → rerank (optional) → recency boost
      → time named in the query → importance weight → recurrence weight → source weight → master weight → length normalisation → time decay → noise filter → MMR diversity
      → absolute score (relevance.py) → minimum score → limit

Only the candidate legs touch the store; every later stage is a pure function of the
candidates, so a stage can be tested, switched off or re-weighted on its own.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Literal, Mapping, cast

import numpy as np

from .._time import age_days, age_string, utcnow
from ..config import RelevanceConfig, RetrievalConfig
from ..errors import EmbeddingError
from ..models import Discussed, MemoryRecord, SearchHit, SearchHits, SearchMode, Source
from ..storage import Candidate, Filters, Store
from ..storage.text import COVERAGE_READ, common_words, has_cjk, trigrams, without_words
from .noise import is_noise, is_small_talk
from .relevance import apply_relevance
from .rerank import Reranker
from .scored import Scored
from .when import When, find

log = logging.getLogger("clawrecall.retrieval")
_WARNED: set[tuple[str | None, str]] = set()  # (model, calibrated for) pairs logged, once per process

Mode = SearchMode
LEGS = ("vector", "bm25", "trigram")
# Common words: counted over the newest memories of the searched scopes, at most every 5 minutes per scope set.
COMMON_SAMPLE, COMMON_MIN, COMMON_TTL_S = 100, 50, 300.0
# A query embedding that takes this long has the keyword legs run beside it on SQLite too (`Store.beside`)
BESIDE_EMBEDDING_MS = 2.0


class RetrievalPipeline:
    def __init__(
        self,
        cfg: RetrievalConfig,
        store: Store,
        embed_queries: Callable[[list[str]], np.ndarray],
        reranker: Reranker | None = None,
        model: str | None = None,
        cosine_for: Callable[[float], float] = lambda cosine: cosine,
        query_ms: Callable[[list[str]], float] = lambda texts: 0.0,
    ):
        self.cfg = cfg
        self.store = store
        self.embed_queries = embed_queries
        self.query_ms = query_ms  # about how long embedding these queries takes now (`Embedder.query_ms`)
        self.cosine_for = cosine_for  # the model's cosine for all-MiniLM-L6-v2's (`Embedder.cosine_for`)
        self.reranker = reranker
        self.model = model  # the embedding model: the absolute score's calibration belongs to one
        self._common: dict[tuple[tuple[str, ...] | None, tuple[str, ...]], tuple[float, set[str]]] = {}

    def search(
        self, query: str, filters: Filters, *, limit: int, mode: Mode = "hybrid", explain: bool = False,
        diverse: bool = True, now: datetime | None = None, min_score: float | None = None,
    ) -> SearchHits:
        """The best `limit` hits whose absolute score reaches `min_score` (default: the config's). A hybrid search
        whose query cannot be embedded (the provider down) runs on its keyword legs and says so (`without_vectors`)."""
        cfg = self.cfg
        now = now or utcnow()
        # a time the query names lifts hits from then; the legs search the rest of the query
        when = find(query, filters.as_of or now) if cfg.time_query_weight > 0 else None
        if when is not None and when.names_no_topic:
            return self._said_within(when, filters, limit=limit, now=now, explain=explain, diverse=diverse,
                                     min_score=min_score)
        if when is not None and when.query:
            query = when.query
        pool = max(cfg.candidates, limit * 2)  # each leg over-fetches; fusion and MMR pick from the pool
        head = limit * 2  # what the final stages look at (LoCoMo recall@10 0.7488 with it, 0.7505 with the pool)
        wanted = [name for name in LEGS if getattr(cfg, name).enabled] if mode == "hybrid" else [mode]
        rescore = mode == "hybrid" and cfg.trigram.enabled  # the trigram leg rescores the others' candidates
        keywords = functools.partial(self._keyword_legs, query, list(wanted), filters, pool, limit, rescore)
        vector_query = self._vector_query(query, filters) if "vector" in wanted else query
        # the keyword legs need no query vector: they run beside the embedding and the vector leg (PostgreSQL;
        # on SQLite a large scope, or a query whose embedding takes long: a model leaves the GIL while it runs);
        # with no vector leg there is nothing to run beside, and with no keyword leg nothing to run
        slow = "vector" in wanted and self.query_ms(list(dict.fromkeys((vector_query, query)))) >= BESIDE_EMBEDDING_MS
        keyword_legs = self.store.beside(keywords, filters, slow=slow) if "vector" in wanted and wanted != ["vector"] else None
        without_vectors = None
        try:
            embedded = self._query_vectors(query, vector_query) if "vector" in wanted else {}
        except EmbeddingError as exc:
            if mode != "hybrid" or wanted == ["vector"]:
                raise  # a vector search cannot run without its vector
            log.warning("search ran on its keyword legs only: %s", exc)  # the store still answers by words
            without_vectors, embedded = str(exc), {}
        # the vector leg's "no match" when it returns every row (`fuse`): MiniLM's 0 on this model's scale
        vector_floor = self.cosine_for(0.0) if embedded and cfg.fusion == "weighted" else 0.0
        early: dict[str, MemoryRecord] = {}
        with self.store.pinned():  # the vector leg and, while the keyword legs still run, its hits' records
            found = {"vector": self.store.vector_candidates(embedded[vector_query], filters, pool)} if embedded else {}
            if keyword_legs is not None and not keyword_legs.done() and found.get("vector"):
                # (a large scope's keyword leg outlasts the embedding and the vector leg: read these while it runs,
                # not after it)
                early = self.store.memories.fetch([c.id for c in found["vector"]])
        via = {c.id: c.via for c in found.get("vector", []) if c.via is not None}  # long messages found by a window
        # ... and that window's length: such a message matched by the window's length, not by its bulk
        window_chars = {c.id: c.via_chars for c in found.get("vector", []) if c.via_chars is not None}
        keyword_found, records, shares = keyword_legs.result() if keyword_legs is not None else keywords()
        records = early | records
        found |= keyword_found
        legs = {name: found[name] for name in wanted if name in found}
        # the reads after the legs share one pooled connection (PostgreSQL), taken once the legs are done:
        # a search waiting on its embedding provider holds none
        with self.store.pinned():
            records |= self.store.memories.fetch(list({c.id for hits in legs.values() for c in hits} - records.keys()))
            if rescore and "trigram" not in legs:
                legs["trigram"] = trigram_rescore(query, records.values(), shares)
            weights = {name: getattr(cfg, name).weight for name in legs}
            items = fuse(legs, weights, records, method=cfg.fusion, k=cfg.rrf_k, pool=pool, vector_floor=vector_floor)
            late = None
            if cfg.neighbor_weight > 0 and items:
                # a reranker may lift any of its top_k into the result: their neighbours count too
                lift = cfg.rerank.top_k if mode == "hybrid" and self.reranker is not None else 0
                items, late = apply_neighbors(items, self.store, filters, weight=cfg.neighbor_weight, top=max(head, lift))
            if mode == "hybrid" and self.reranker is not None:
                if late is not None:  # the reranker reorders its top_k, neighbours among them: each is read now
                    items, late = late.placed(items, late.scored(self.store.memories.fetch(list(late.gains)))), None
                items = apply_rerank(items, query, self.reranker, top_k=cfg.rerank.top_k, weight=cfg.rerank.weight)
            # how often conversations stated each fact: ranks here, and the hits say it
            discussed: dict[str, tuple[int, Any, Any]] = {}
            score = functools.partial(self._score, now=now, when=when, filters=filters, matched=window_chars,
                                      discussed=discussed)
            items = score(items)
            items.sort(key=lambda s: s.score, reverse=True)
            # Only the head can reach the result; later stages need not look further.
            items = apply_noise(items, noise=cfg.noise_filter, keep=head)
            if late is not None and late.gains:
                items = self._join_neighbours(items, late, score, when=when, filters=filters, head_size=head)
            calibration = self.cfg.relevance.for_model(self.model or "")
            uncalibrated = self._uncalibrated(embedded, calibration)
            mmr = diverse and cfg.mmr_threshold is not None and len(items) > 1
            # the head's vectors serve MMR and the absolute score; a search that needs neither reads none
            vectors = head_vectors(self.store, [s.memory.id for s in items], via) if items and (mmr or not uncalibrated) else {}
            if mmr and cfg.mmr_threshold is not None:
                items = apply_mmr(items, vectors, threshold=cfg.mmr_threshold, limit=limit)
            items = apply_relevance(items, query, None if uncalibrated else embedded[query], vectors,
                                    calibration or cfg.relevance, uncalibrated=uncalibrated)
            floor = cfg.min_score if min_score is None else min_score
            items = [s for s in items if s.relevance >= floor][:limit]
            origins = hit_origins(self.store, [s.memory for s in items])
            hits = SearchHits(
                to_hit(s, now, discussed, origins, score=s.relevance, matched=list(s.legs), explain=explain,
                       # the vector leg may have ranked with a reduced query (`_vector_query`), which overrates a memory
                       # about someone else ("Bob's birthday" for "Alice's"): callers gate on the whole query's cosine
                       similarity=s.steps["relevance"]["cosine"] if "vector" in s.legs else None)
                for s in items
            )
            hits.without_vectors = without_vectors
            return hits

    def _said_within(
        self, when: When, filters: Filters, *, limit: int, now: datetime, explain: bool, diverse: bool,
        min_score: float | None,
    ) -> SearchHits:
        """A query that names a time and no topic ("what did we talk about yesterday?"): what was said or
        stored then, without the legs, which have no words to search. Memories and messages, not file
        chunks unless only they are asked for (a file's time is when it was read in). Ranked by source
        weight (a memory leads the messages it came from), then each conversation in turn, newest first;
        near-copies last, noise and small talk ("thanks!", "bye") left out. A hit's score is its ranking
        score, as in the keyword-only modes: with no query to compare, it cannot be an estimated relevance."""
        cfg = self.cfg
        start = max(when.start, filters.since) if filters.since else when.start
        end = when.end - timedelta(microseconds=1)  # `until` includes its moment; a time range does not
        window = replace(filters, since=start, until=min(end, filters.until) if filters.until else end)
        pool = max(cfg.candidates, limit * 2)
        items: list[Scored] = []
        with self.store.pinned():
            for kind in [k for k in filters.kinds if k != "chunk"] or filters.kinds:  # chunks if nothing else is asked
                # a pool per kind, and per conversation for messages: a busy day's messages must not crowd
                # out the memories that lead them, nor a busy conversation the others
                of_kind = replace(window, kinds=(kind,))
                conversations = [] if kind != "message" else [  # every message has a session
                    (scope, session) for scope, session in self.store.memories.latest_sessions(of_kind, limit=min(limit, 50))
                    if session is not None]
                each = max(4, 2 * -(-limit // max(len(conversations), 1)))  # what a turn each can use, and spare
                parts = [(of_kind, pool)] if kind != "message" else [
                    (replace(of_kind, scopes=[scope], session_id=session), each) for scope, session in conversations]
                for part, size in parts:
                    listed = self.store.memories.find(part, limit=size, offset=0, order="newest")
                    items += [Scored(record, 1.0, steps={"when": 1.0}) for record in listed]
            if len(filters.kinds) > 1:
                items = apply_source_weights(items, cfg.source_weights)
            if cfg.noise_filter:
                items = [s for s in items if s.memory.kind != "message" or not is_small_talk(s.memory.content)]
            items = by_conversation(sorted(items, key=lambda s: (s.score, s.memory.created_at), reverse=True))
            items = apply_noise(items, noise=cfg.noise_filter, keep=limit * 2)
            if diverse and cfg.mmr_threshold is not None and len(items) > 1:
                items = apply_mmr(items, self.store.vectors([s.memory.id for s in items]),
                                  threshold=cfg.mmr_threshold, limit=limit)
            floor = cfg.min_score if min_score is None else min_score
            items = [s for s in items if s.score >= floor][:limit]
            discussed = self.store.occurrences.summary([s.memory.id for s in items if s.memory.kind == "memory"])
            origins = hit_origins(self.store, [s.memory for s in items])
        return SearchHits(to_hit(s, now, discussed, origins, score=s.score, matched=["time"], explain=explain)
                          for s in items)

    def _score(
        self, items: list[Scored], *, now: datetime, when: When | None, filters: Filters, matched: dict[str, int],
        discussed: dict[str, tuple[int, Any, Any]],
    ) -> list[Scored]:
        """The stages that score each item on its own, after fusion and its neighbours; `discussed` gains the
        items' occurrences."""
        cfg = self.cfg
        items = apply_recency(items, now, half_life_days=cfg.recency_half_life_days, weight=cfg.recency_weight)
        if when is not None:
            items = apply_when(items, when, weight=cfg.time_query_weight)
        items = apply_importance(items, weight=cfg.importance_weight)
        discussed |= self.store.occurrences.summary([s.memory.id for s in items if s.memory.kind == "memory"])
        items = apply_recurrence(items, discussed, weight=cfg.recurrence_weight)
        if len(filters.kinds) > 1:
            items = apply_source_weights(items, cfg.source_weights)
        if filters.reader_agent is not None:
            items = apply_master(items, filters.reader_agent, weight=cfg.master_weight)
        items = apply_length_norm(items, anchor=cfg.length_norm_anchor, matched=matched)
        return apply_time_decay(items, now, half_life_days=cfg.time_decay_half_life_days,
                                timeless=set(cfg.timeless_categories))

    def _join_neighbours(
        self, head: list[Scored], late: Neighbours, score: Callable[[list[Scored]], list[Scored]], *,
        when: When | None, filters: Filters, head_size: int,
    ) -> list[Scored]:
        """The head with the neighbours that were not candidates and can reach it. A neighbour enters with its
        gain, which `_score`'s stages raise at most to (gain + what they add) × what they multiply by at most:
        one that cannot beat the head's last score cannot displace it (adding items only raises that score),
        so it is not read (`bench/long_turns.py` at `limit=50`: of ~165 such neighbours a search, ~130 are read
        and ~21 reach the head; at `limit=10`, 10 of 37 and 0.25)."""
        cfg = self.cfg
        added = cfg.recency_weight + (cfg.time_query_weight if when is not None else 0.0)
        most = (1 + cfg.recurrence_weight * RECURRENCE_CAP) * max(1.0, cfg.master_weight)
        if len(filters.kinds) > 1:
            most *= max(cfg.source_weights.get(cast(Source, kind), 1.0) for kind in filters.kinds)
        floor = head[-1].score if len(head) >= head_size else -math.inf
        # (an equal score may still displace the head's last item: it takes the place it had after the gains)
        ids = [i for i, gain in late.gains.items() if (gain + added) * most >= floor]
        if not ids:
            return head
        fresh = [s for s in score(late.scored(self.store.memories.fetch(ids))) if s.score >= floor]
        joined = late.placed(head, apply_noise(fresh, noise=cfg.noise_filter, keep=len(fresh)))
        joined.sort(key=lambda s: s.score, reverse=True)
        return joined[:head_size]

    def _uncalibrated(self, embedded: dict[str, np.ndarray], calibration: RelevanceConfig | None) -> str | None:
        """Why this search cannot score on the absolute scale, or None when it can."""
        if not embedded:
            return "a keyword-only search has no query vector"
        if calibration is None:
            if (self.model, self.cfg.relevance.model) not in _WARNED:
                _WARNED.add((self.model, self.cfg.relevance.model))
                log.warning(
                    "scores are ranking scores, not calibrated relevance: retrieval.relevance was fitted for %s, "
                    "this store embeds with %s (fit it with bench/relevance.py --fit)", self.cfg.relevance.model, self.model,
                )
            return f"retrieval.relevance was fitted for {self.cfg.relevance.model}, not {self.model}"
        return None

    def _query_vectors(self, query: str, vector_query: str) -> dict[str, np.ndarray]:
        """The vector leg's query and, when it differs, the whole query (for the absolute score), in one
        call: a batch of two costs less than two runs (MiniLM on one core: 7.7 ms, not 9.2)."""
        texts = list(dict.fromkeys((vector_query, query)))
        return dict(zip(texts, self.embed_queries(texts)))

    def _keyword_legs(
        self, query: str, wanted: list[str], filters: Filters, pool: int, limit: int, rescore: bool
    ) -> tuple[dict[str, list[Candidate]], dict[str, MemoryRecord], dict[str, float]]:
        """The keyword legs, their hits' records and, when the trigram leg will rescore the candidates, those
        records' trigram shares (all read here, beside the vector leg). In hybrid mode the trigram leg
        searches the whole store only when the others cannot do its job — CJK text (no word breaks for
        BM25) or too few keyword hits (typos) — and otherwise rescores the other legs' candidates (see
        `trigram_rescore`): an OR of many trigrams over a large store costs more than every other stage together."""
        out: dict[str, list[Candidate]] = {}
        if "bm25" in wanted:
            out["bm25"] = self.store.text_candidates(query, filters, pool)
        if "trigram" in wanted and (len(wanted) == 1 or has_cjk(query) or len(out.get("bm25", [])) < limit):
            out["trigram"] = self.store.fuzzy_candidates(query, filters, pool)
        records = self.store.memories.fetch(list({c.id for hits in out.values() for c in hits}))
        return out, records, trigram_shares(query, records.values()) if rescore and "trigram" not in out else {}

    def _vector_query(self, query: str, filters: Filters) -> str:
        """The query the vector leg embeds: without the words most searched memories contain.

        BM25 gives such a word (a name in every memory of a conversation, "user" in every note
        about the user) almost no weight, but in a small embedding model a name can dominate
        the query vector, which then finds any memory with that name instead of the one about
        the question. Measured on LoCoMo in docs/retrieval.md."""
        if self.cfg.vector_common_share <= 0:
            return query
        return without_words(query, self._common_words(filters))

    def warm(self, filters: Filters) -> None:
        """Compute now what a search of these scopes and kinds would compute on its first run (the common
        words of `_vector_query`): the write path calls it after new rows' vectors are stored, off the
        request path, so the first search after writes costs what a later one does."""
        if self.cfg.vector_common_share > 0:
            self._common_words(filters, fresh=True)

    def _common_words(self, filters: Filters, *, fresh: bool = False) -> set[str]:
        """The common words of the scopes' newest texts, counted at most every `COMMON_TTL_S` (or now: `fresh`)."""
        key = (tuple(sorted(filters.scopes)) if filters.scopes is not None else None, filters.kinds)
        now = time.monotonic()
        cached = self._common.get(key)
        if fresh or cached is None or now - cached[0] > COMMON_TTL_S:
            sample = self.store.memories.find(Filters(scopes=filters.scopes, kinds=filters.kinds), limit=COMMON_SAMPLE, offset=0,
                                     order="newest")
            words = common_words((m.content for m in sample), self.cfg.vector_common_share) if len(sample) >= COMMON_MIN else set()
            if len(self._common) >= 256:
                self._common.clear()
            cached = self._common[key] = (now, words)
        return cached[1]


def head_vectors(store: Store, ids: list[str], via: dict[str, str]) -> dict[str, np.ndarray]:
    """The hits' vectors; a long message found by one of its windows has that window's: the absolute score
    and MMR judge the part of it that matched (its own vector holds only its start)."""
    windows = [via[i] for i in ids if i in via]
    vectors = store.vectors(ids + windows)
    for i in ids:
        if i in via and via[i] in vectors:
            vectors[i] = vectors.pop(via[i])
    return vectors


def hit_origins(store: Store, records: list[MemoryRecord]) -> dict[str, dict[str, Any]]:
    """Where each message and file chunk came from: a message's session, role and time; a chunk's file
    and lines or pages. Memories have none."""
    messages = store.messages.of([r.id for r in records if r.kind == "message"])
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.kind == "message" and (m := messages.get(record.id)) is not None:
            out[record.id] = {"session_id": m.session_id, "message_id": m.id, "role": m.role, "segment_id": m.segment_id,
                              "channel": m.channel, "at": m.created_at.isoformat().replace("+00:00", "Z")}  # as pydantic writes times
        elif record.kind == "chunk":
            meta = record.metadata
            out[record.id] = {"file_id": record.source_id,
                              **{k: meta[k] for k in ("path", "lines", "pages", "chunk") if k in meta}}
    return out


def to_hit(
    item: Scored, now: datetime, discussed: dict[str, tuple[int, Any, Any]], origins: dict[str, dict[str, Any]], *,
    score: float, matched: list[str], explain: bool, similarity: float | None = None,
) -> SearchHit:
    """A scored item as the hit a search returns, with `score` as its final score."""
    n = discussed.get(item.memory.id)
    return SearchHit(
        memory=item.memory,
        score=round(score, 6),
        age=age_string(item.memory.created_at, now),
        similarity=similarity,
        matched=matched,
        explain={"legs": item.legs, **item.steps, "ranking": item.score, "final": score} if explain else None,
        discussed=Discussed(count=n[0], first_at=n[1], last_at=n[2]) if n else None,
        origin=origins.get(item.memory.id),
    )


# -- stages ------------------------------------------------------------------------------


def by_conversation(items: list[Scored]) -> list[Scored]:
    """Items of equal score taken from each session in turn (the newest first within each, sessions in
    the order of their first item): a recap of a day covers each of its conversations before a second
    line of any."""
    out: list[Scored] = []
    for _, same in itertools.groupby(items, key=lambda s: s.score):
        sessions: dict[tuple[str, str | None], list[Scored]] = {}  # a session id names one conversation per scope
        for item in same:
            sessions.setdefault((item.memory.scope, item.memory.session_id), []).append(item)
        out += [item for turn in itertools.zip_longest(*sessions.values()) for item in turn if item is not None]
    return out


def fuse(
    legs: dict[str, list[Candidate]],
    weights: dict[str, float],
    records: dict[str, MemoryRecord],
    *,
    method: Literal["rrf", "weighted"] = "rrf",
    k: int = 60,
    pool: int | None = None,
    vector_floor: float = 0.0,
) -> list[Scored]:
    """Merge the legs into one score in [0, 1].

    Weighted (the default): Σ w·s / Σ w, where each leg's scores are min-max scaled over
    that leg's candidates for this query, so cosine and unbounded BM25 share one scale and a
    leg's confidence (how far its best hit stands out) still counts. A keyword leg that returned
    fewer than `pool` candidates returned every match it has: it scales from 0 (no match),
    not from its weakest match, which would otherwise score 0 and fall below any minimum. For
    the vector leg every row is a match: it scales from `vector_floor`, cosine 0 as all-MiniLM-L6-v2
    measures it on this model's scale (multilingual-e5-small: 0.70); from 0, the cosines of a model
    that puts everything near 0.8 would all scale to ~1 and the vector leg would rank nothing.
    RRF: Σ w/(k + rank), divided by its best possible value Σ w/(k + 1).
    Both keep later stages (additive recency, hard minimum) on the same 0–1 scale.
    """
    by_id: dict[str, Scored] = {}
    for name, hits in legs.items():
        w = weights[name]
        scores = [c.score for c in hits]
        lo, hi = (min(scores), max(scores)) if scores else (0.0, 0.0)
        if pool is not None and len(hits) < pool:
            lo = min(lo, vector_floor if name == "vector" else 0.0)
        for rank, cand in enumerate(hits, start=1):
            record = records.get(cand.id)
            if record is None:  # removed between the leg and the fetch
                continue
            item = by_id.setdefault(cand.id, Scored(record, 0.0))
            item.legs[name] = {"rank": rank, "score": round(cand.score, 6)}
            if method == "rrf":
                item.score += w / (k + rank)
            else:
                item.score += w * ((cand.score - lo) / (hi - lo) if hi > lo else 1.0)
    # Legs that found nothing do not count against the others: a query with no keyword match
    # can still give its best semantic match a score near 1.
    answered = [weights[name] for name, hits in legs.items() if hits]
    norm = sum(w / (k + 1) for w in answered) if method == "rrf" else sum(answered)
    items = list(by_id.values())
    for item in items:
        item.score = item.score / norm if norm else 0.0
        item.steps["fused"] = item.score
    items.sort(key=lambda s: s.score, reverse=True)
    return items


def trigram_rescore(query: str, records: Iterable[MemoryRecord], known: Mapping[str, float] | None = None) -> list[Candidate]:
    """The trigram leg over known candidates: each one's `trigram_shares` (those in `known` already counted,
    by the keyword legs' thread), best first."""
    records, known = list(records), known or {}
    shares = {**trigram_shares(query, [r for r in records if r.id not in known]), **known}
    scored = [Candidate(r.id, shares[r.id]) for r in records if shares.get(r.id, 0.0) > 0]
    scored.sort(key=lambda c: c.score, reverse=True)
    return scored


def trigram_shares(query: str, records: Iterable[MemoryRecord]) -> dict[str, float]:
    """The share of the query's keyword trigrams each record contains in its first `COVERAGE_READ` characters
    (what keyword coverage reads: a long turn costs what a short one does)."""
    grams = trigrams(query)
    if not grams:
        return {}
    out = {}
    for record in records:
        text = record.content[:COVERAGE_READ].lower()
        out[record.id] = sum(1 for g in grams if g in text) / len(grams)
    return out


@dataclass
class Neighbours:
    """The session neighbours of the head that were not candidates: each one's gain and the hit it is next to,
    and every item's place once the gains were added, which later breaks ties between equal scores. They are
    read only if they can reach the head (`RetrievalPipeline._join_neighbours`)."""

    gains: dict[str, float]
    source: dict[str, str]
    place: dict[str, int]

    def scored(self, records: dict[str, MemoryRecord]) -> list[Scored]:
        """Those of `records` (one removed since it was found is not), scored by their gains alone."""
        return [Scored(records[i], gain, steps={"fused": 0.0, "neighbors": gain, "neighbor_of": self.source[i]})
                for i, gain in self.gains.items() if i in records]

    def placed(self, items: list[Scored], more: list[Scored]) -> list[Scored]:
        """`items` and `more` in their places after the gains."""
        out = items + more
        out.sort(key=lambda s: self.place[s.memory.id])
        return out


def apply_neighbors(
    items: list[Scored], store: Store, filters: Filters, *, weight: float, top: int
) -> tuple[list[Scored], Neighbours | None]:
    """Conversation context: a turn right before or after a strong hit in the same session often holds the
    answer the hit only points at ("Did you go?" → "Yes, last Friday"). Each neighbour gains `weight` × the
    hit's score: a candidate at once, sorted in; one that was not a candidate is returned apart, unread
    (`Neighbours`). Memories without a session are unaffected.
    """
    head = [s for s in items[:top] if s.memory.session_id is not None]
    if not head:
        return items, None
    neighbours = store.memories.session_neighbors([s.memory.id for s in head], filters)
    by_id = {s.memory.id: s for s in items}
    gains: dict[str, float] = {}
    source: dict[str, str] = {}  # the best hit a neighbour is next to: that hit's relevance carries over to it
    for item in head:
        for other in neighbours.get(item.memory.id, []):
            gains[other] = gains.get(other, 0.0) + weight * item.steps["fused"]
            source.setdefault(other, item.memory.id)
    for memory_id, gain in gains.items():
        if memory_id in by_id:
            by_id[memory_id].steps["neighbors"] = gain
            by_id[memory_id].steps["neighbor_of"] = source[memory_id]
            by_id[memory_id].score += gain
    # by id: the order the store reads them in, as ties were broken when every neighbour was read here
    late = {i: gains[i] for i in sorted(gains) if i not in by_id}
    # every item's place among the candidates and the new neighbours (scored by their gains), sorted as one list
    order = [(s.score, s.memory.id) for s in by_id.values()] + [(gain, i) for i, gain in late.items()]
    place = {order[n][1]: at for at, n in enumerate(sorted(range(len(order)), key=lambda n: order[n][0], reverse=True))}
    out = list(by_id.values())
    out.sort(key=lambda s: s.score, reverse=True)
    return out, Neighbours(late, {i: source[i] for i in late}, place)


def apply_rerank(items: list[Scored], query: str, reranker: Reranker, *, top_k: int, weight: float) -> list[Scored]:
    """Blend a cross-encoder score into the top `top_k`: (1−w)·fused + w·ce. Failure keeps the order."""
    head = items[:top_k]
    if len(head) < 2:
        return items
    scores = reranker.score(query, [s.memory.content for s in head])
    if scores is None:
        return items
    for item, ce in zip(head, scores):
        item.steps["rerank"] = ce
        item.score = (1 - weight) * item.score + weight * ce
    head.sort(key=lambda s: s.score, reverse=True)
    return head + items[top_k:]


def apply_recency(items: list[Scored], now: datetime, *, half_life_days: float, weight: float) -> list[Scored]:
    """Additive boost for new memories: + w·exp(−age/half_life) (seed 002)."""
    if weight <= 0:
        return items
    for item in items:
        boost = weight * math.exp(-age_days(item.memory.created_at, now) / half_life_days)
        item.steps["recency"] = boost
        item.score += boost
    return items


def apply_when(items: list[Scored], when: When, *, weight: float) -> list[Scored]:
    """+ w for a memory said, or true from, within the time the query names. A boost, not a filter: a
    memory about May recorded in June, or a fact true since April, may still be the answer."""
    for item in items:
        if item.memory.created_at in when or item.memory.valid_from in when:
            item.steps["when"] = weight
            item.score += weight
    return items


def apply_importance(items: list[Scored], *, weight: float) -> list[Scored]:
    """× (1 − w + w·importance): importance 1 keeps the score, importance 0 costs `w` of it."""
    if weight <= 0:
        return items
    for item in items:
        factor = 1 - weight + weight * item.memory.importance
        item.steps["importance"] = factor
        item.score *= factor
    return items


RECURRENCE_CAP = 3.0  # log2 of the occurrences past which a fact gains no more (8 times)


def apply_recurrence(items: list[Scored], discussed: dict[str, tuple[int, Any, Any]], *, weight: float) -> list[Scored]:
    """× (1 + w·min(log2 n, 3)) for a fact stated n ≥ 2 times (memento-local's capped log2): a
    recurring topic is a core value or an unresolved issue, not a duplicate to squash."""
    if weight <= 0:
        return items
    for item in items:
        n = discussed.get(item.memory.id, (0,))[0]
        if n >= 2:
            factor = 1 + weight * min(math.log2(n), RECURRENCE_CAP)
            item.steps["recurrence"] = {"occurrences": n, "factor": round(factor, 4)}
            item.score *= factor
    return items


def apply_source_weights(items: list[Scored], weights: Mapping[Source, float]) -> list[Scored]:
    """× the weight of the hit's source (memory, message, file chunk) in a search over several."""
    for item in items:
        factor = weights.get(cast(Source, item.memory.kind), 1.0)
        if factor != 1.0:
            item.steps["source"] = factor
            item.score *= factor
    return items


def apply_master(items: list[Scored], agent: str, *, weight: float) -> list[Scored]:
    """× `weight` for another agent's shared memory (the master knowledge base): an agent's own
    memories, and its user's own words, rank before what another agent learnt (docs/agents.md)."""
    for item in items:
        if item.memory.agent_id not in (None, agent):
            item.steps["master"] = weight
            item.score *= weight
    return items


def apply_length_norm(items: list[Scored], *, anchor: int, matched: dict[str, int] | None = None) -> list[Scored]:
    """Long memories match many queries by bulk alone: × 1/(1 + 0.5·log2(len/anchor)), floor 0.3. `matched`:
    the length that counts for a hit found by a part of it (a long message's window), not by all of it."""
    if anchor <= 0:
        return items
    matched = matched or {}
    for item in items:
        ratio = max(matched.get(item.memory.id, len(item.memory.content)) / anchor, 1.0)
        factor = max(0.3, 1.0 / (1.0 + 0.5 * math.log2(ratio)))
        if factor != 1.0:
            item.steps["length"] = factor
            item.score *= factor
    return items


def apply_time_decay(items: list[Scored], now: datetime, *, half_life_days: float, timeless: set[str]) -> list[Scored]:
    """× (0.5 + 0.5·exp(−age/half_life)); timeless categories (decisions, rules…) keep their score."""
    if half_life_days <= 0:
        return items
    for item in items:
        if item.memory.category in timeless:
            continue
        factor = 0.5 + 0.5 * math.exp(-age_days(item.memory.created_at, now) / half_life_days)
        item.steps["decay"] = factor
        item.score *= factor
    return items


def apply_noise(items: list[Scored], *, noise: bool, keep: int) -> list[Scored]:
    """Seed 002's noise filter, over sorted items, stopping once `keep` survive."""
    out: list[Scored] = []
    for item in items:
        if noise and is_noise(item.memory.content):
            continue
        out.append(item)
        if len(out) >= keep:
            break
    return out


def apply_mmr(items: list[Scored], vectors: dict[str, np.ndarray], *, threshold: float, limit: int | None = None) -> list[Scored]:
    """Greedy diversity: a hit nearly identical (cosine > threshold) to one already kept is moved to the end.

    Once `limit` hits are kept the rest cannot reach the result, so they are not compared.
    """
    kept: list[Scored] = []
    deferred: list[Scored] = []
    dims = next((len(v) for v in vectors.values()), 0)
    kept_vecs = np.empty((min(len(items), limit or len(items)), dims), dtype=np.float32)
    n = 0
    for pos, item in enumerate(items):
        if limit is not None and len(kept) >= limit:
            return kept + deferred + items[pos:]
        vec = vectors.get(item.memory.id)
        if vec is not None and n and float(np.max(kept_vecs[:n] @ vec)) > threshold:
            item.steps["mmr_deferred"] = 1.0
            deferred.append(item)
            continue
        kept.append(item)
        if vec is not None:
            kept_vecs[n] = vec
            n += 1
    return kept + deferred
