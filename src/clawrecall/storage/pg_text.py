"""PostgreSQL's keyword leg, served from this process's memory for the scopes it searches: each
scope's words (its rows' `fts`) as postings, scored with `ts_rank`'s own arithmetic, so a search
returns the ids and scores the SQL leg (`PostgresStore.text_candidates`) returns.

Why: the SQL leg visits every row that has a query word, and a common word in a large scope is
tens of thousands of rows (a user's 120,000 with "project" in 27,000: ~90 ms, the whole of a
search's time over). Held here, the same ranking is a few array operations over those rows'
postings (~2 ms).

How it stays exact: before each search the scope takes what changed since its last read
(`pg_changes.py`: the rows written and the ids that left, by any process, committed late or not).
A scope is held from its second search in the process (a one-off command reads it in SQL), within
`postgres.text_cache_mb`; the scopes searched least recently make room. A search this cannot
answer as SQL would goes to SQL: inside a transaction, a filter only SQL checks, a word PostgreSQL
reads as more than one lexeme.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from array import array
from collections import OrderedDict
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .base import Candidate
from .filters import INDEX_COLUMNS, Filters, checked_in_sql, index_tests
from .pg_changes import ScopeGate, Snapshot, read_changes
from .schema import MEMORIES

if TYPE_CHECKING:
    from .postgres import PostgresStore

log = logging.getLogger(__name__)

_TIME = {c for c in INDEX_COLUMNS if MEMORIES.column(c).type == "time"}
_COLUMNS = ("m.id::text", "m.seq", "m.fts::text", *(
    f"extract(epoch FROM m.{c})::float8" if c in _TIME else f"m.{c}" for c in INDEX_COLUMNS))
_ENTRY = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")  # a tsvector's text: 'lexeme':1,5 'other':3
_ROW_BYTES = 200  # a held row besides its arrays and postings: its id, and its key in the slot map
_LEXEME_BYTES = 120  # a lexeme in a scope's lexicon: its text and its entry
_PENDING_BYTES = 250  # a pending posting: its tuple in its lexeme's list, often a new lexeme's entry too
_READ_NOW = 2_000  # rows of a scope read at its second search (~25 ms); a larger one is read in the background (1.5 s for 120k)
_TERMS = 50_000  # query words remembered with their lexeme


def _rank_by_count() -> np.ndarray:
    """`ts_rank(fts, 'lexeme', 1)` before the length normalisation, by how many times the row has the
    lexeme (at most 256 positions are kept), in float32 as PostgreSQL computes it (`calc_rank_or`:
    every position of weight D, 0.1)."""
    w = np.float32(0.1)
    out = np.zeros(257, dtype=np.float32)
    resj = np.float32(0)
    for j in range(1, 257):
        resj = np.float32(resj + np.float32(w / np.float32(j * j)))
        out[j] = np.float32(float(np.float32(np.float32(w + resj) - w)) / 1.64493406685)
    return out


_RANK = _rank_by_count()


class _Unheld(Exception):
    """A row this cannot score as PostgreSQL does (a weighted position): its scope stays in SQL."""


class _Scope:
    """One scope's rows: slots with their id, order (`seq`), length norm and filter columns, and each
    lexeme's postings (slot, count). A changed row takes a new slot; the old one is dead until a
    compaction renumbers the slots and drops its postings."""

    def __init__(self) -> None:
        self._codes: dict[str, dict[str, int]] = {c: {} for c in INDEX_COLUMNS if c not in _TIME}
        self.since = Snapshot(0, 0, ())  # what the last read saw (`pg_changes.py`)
        self.size = 0
        self.ids: list[str | None] = []
        self.slots: dict[str, int] = {}
        self.fts_hash = np.zeros(0, dtype=np.int64)  # each row's hash of its `fts` text: an edit that kept the words stays in place
        self.alive = np.zeros(0, dtype=bool)
        self.seq = np.zeros(0, dtype=np.int64)
        self.norm = np.zeros(0, dtype=np.float64)
        self.cols = {c: np.zeros(0, dtype=np.float64 if c in _TIME else np.int32) for c in INDEX_COLUMNS}
        # the postings, by lexeme: lexeme i's slots and counts are `post_slots[starts[i]:starts[i + 1]]`, …
        self.lexicon: dict[str, int] = {}
        self.starts = np.zeros(1, dtype=np.int64)
        self.post_slots = np.zeros(0, dtype=np.int32)
        self.post_counts = np.zeros(0, dtype=np.int16)
        self.pending: dict[str, list[tuple[int, int]]] = {}  # … and those of rows added since the last compaction
        self.pending_count = 0
        self.dead = 0

    # `filters.Columns`: what a rule's test reads
    def __getitem__(self, column: str) -> np.ndarray:
        return self.cols[column][: self.size]

    def codes(self, column: str, values: Sequence[str]) -> np.ndarray:
        known = self._codes.get(column, {})
        return np.array([known[v] for v in values if v in known], dtype=np.int32)

    def nbytes(self) -> int:
        arrays = (self.alive.nbytes + self.seq.nbytes + self.norm.nbytes + self.fts_hash.nbytes
                  + sum(c.nbytes for c in self.cols.values()))
        postings = (self.starts.nbytes + self.post_slots.nbytes + self.post_counts.nbytes
                    + _LEXEME_BYTES * len(self.lexicon) + _PENDING_BYTES * self.pending_count)
        return arrays + postings + _ROW_BYTES * len(self.ids)

    @classmethod
    def whole(cls, rows: list[tuple], since: Snapshot) -> _Scope:
        """A scope read whole (`_COLUMNS`), its arrays made at once: row by row, a large scope took 300 MB
        for a moment to hold 40."""
        held = cls()
        lexemes: dict[str, int] = {}
        which, slots, counts, lengths = array("i"), array("i"), array("h"), array("i")
        for slot, row in enumerate(rows):
            length = 0
            for lexeme, positions in _ENTRY.findall(row[2] or ""):
                count = _count(positions)
                length += count
                which.append(lexemes.setdefault(lexeme, len(lexemes)))
                slots.append(slot)
                counts.append(count)
            lengths.append(length)
        held.size = len(rows)
        held.ids = [r[0] for r in rows]
        held.slots = {memory_id: slot for slot, memory_id in enumerate(held.ids)}  # type: ignore[misc]
        held.fts_hash = np.array([hash(r[2] or "") for r in rows], dtype=np.int64)
        held.alive = np.ones(held.size, dtype=bool)
        held.seq = np.array([r[1] for r in rows], dtype=np.int64)
        held.norm = np.array([_norm(n) for n in lengths], dtype=np.float64)
        for i, column in enumerate(INDEX_COLUMNS, start=3):
            if column in _TIME:
                held.cols[column] = np.array([np.nan if r[i] is None else r[i] for r in rows], dtype=np.float64)
            else:
                codes = held._codes[column]
                held.cols[column] = np.array([codes.setdefault(r[i], len(codes) + 1) for r in rows], dtype=np.int32)
        held.lexicon = {_unescape(lexeme): i for lexeme, i in lexemes.items()}
        held._set_postings(np.array(which, dtype=np.int32), np.array(slots, dtype=np.int32), np.array(counts, dtype=np.int16))
        held.since = since
        return held

    def apply(self, rows: list[tuple], departed: Sequence[str]) -> None:
        """Rows written since the last read (`_COLUMNS`) replace what is held of them; `departed` ids go."""
        for memory_id in departed:
            self._kill(memory_id)
        for row in rows:
            memory_id, fts = row[0], row[2] or ""
            fts_hash = hash(fts)
            slot = self.slots.get(memory_id)
            if slot is not None and self.fts_hash[slot] == fts_hash:
                self._set_columns(slot, row)  # the same words (a vector arrived, a deletion): in place
                continue
            self._kill(memory_id)
            words = [(lexeme, _count(positions)) for lexeme, positions in _ENTRY.findall(fts)]
            slot = self._slot(memory_id, row[1], sum(c for _, c in words), fts_hash)
            self._set_columns(slot, row)
            for lexeme, count in words:
                self.pending.setdefault(_unescape(lexeme), []).append((slot, count))
            self.pending_count += len(words)
        if self.dead + self.pending_count > 0.25 * max(self.size, 1_000):
            self.compact()

    def _slot(self, memory_id: str, seq: int, length: int, fts_hash: int) -> int:
        slot = self.size
        if slot == len(self.alive):
            grown = max(16, 2 * slot)
            self.alive = np.resize(self.alive, grown)
            self.seq = np.resize(self.seq, grown)
            self.norm = np.resize(self.norm, grown)
            self.fts_hash = np.resize(self.fts_hash, grown)
            self.cols = {c: np.resize(a, grown) for c, a in self.cols.items()}
        self.size += 1
        self.ids.append(memory_id)
        self.fts_hash[slot] = fts_hash
        self.slots[memory_id] = slot
        self.alive[slot] = True
        self.seq[slot] = seq
        self.norm[slot] = _norm(length)
        return slot

    def _set_columns(self, slot: int, row: tuple) -> None:
        for column, value in zip(INDEX_COLUMNS, row[3:]):
            if column in _TIME:
                self.cols[column][slot] = np.nan if value is None else value
            else:
                codes = self._codes[column]
                self.cols[column][slot] = codes.setdefault(value, len(codes) + 1)

    def _kill(self, memory_id: str) -> None:
        slot = self.slots.pop(memory_id, None)
        if slot is not None:
            self.alive[slot] = False
            self.ids[slot] = None
            self.dead += 1

    def _set_postings(self, which: np.ndarray, slots: np.ndarray, counts: np.ndarray) -> None:
        """The postings from each one's lexeme id, slot and count, in any order."""
        order = np.argsort(which, kind="stable")
        self.starts = np.searchsorted(which[order], np.arange(len(self.lexicon) + 1)).astype(np.int64)
        self.post_slots, self.post_counts = slots[order], counts[order]

    def compact(self) -> None:
        """Renumber the live slots from 0 and fold the pending postings in, dead ones dropped."""
        live = self.alive[: self.size]
        new = (np.cumsum(live, dtype=np.int64) - 1).astype(np.int32)
        which = [np.repeat(np.arange(len(self.starts) - 1, dtype=np.int32), np.diff(self.starts))]
        slots, counts = [self.post_slots], [self.post_counts]
        for lexeme, items in self.pending.items():
            added = np.array(items, dtype=np.int64).reshape(-1, 2)
            which.append(np.full(len(added), self.lexicon.setdefault(lexeme, len(self.lexicon)), dtype=np.int32))
            slots.append(added[:, 0].astype(np.int32))
            counts.append(added[:, 1].astype(np.int16))
        every_slot = np.concatenate(slots)
        keep = live[every_slot]
        kept = np.flatnonzero(live)
        self.ids = [self.ids[s] for s in kept]
        self.fts_hash = self.fts_hash[kept]
        self.slots = {memory_id: n for n, memory_id in enumerate(self.ids)}  # type: ignore[misc]
        self.size = len(kept)
        self.alive = np.ones(self.size, dtype=bool)
        self.seq, self.norm = self.seq[kept], self.norm[kept]
        self.cols = {c: a[kept] for c, a in self.cols.items()}
        self.pending, self.pending_count, self.dead = {}, 0, 0
        self._set_postings(np.concatenate(which)[keep], new[every_slot[keep]], np.concatenate(counts)[keep])

    def matches(self, lexeme: str, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The allowed slots that have `lexeme` (dead ones are not allowed), with how many times: the
        arrays', then those pending."""
        i = self.lexicon.get(lexeme)
        if i is None or i + 1 >= len(self.starts):  # a lexeme only pending has no range yet
            slots, counts = np.zeros(0, np.int32), np.zeros(0, np.int16)
        else:
            slots, counts = self.post_slots[self.starts[i]:self.starts[i + 1]], self.post_counts[self.starts[i]:self.starts[i + 1]]
        if lexeme in self.pending:
            added = np.array(self.pending[lexeme], dtype=np.int64).reshape(-1, 2)
            slots = np.concatenate([slots, added[:, 0].astype(np.int32)])
            counts = np.concatenate([counts, added[:, 1].astype(np.int16)])
        keep = allowed[slots]
        return slots[keep], counts[keep]


def _count(positions: str) -> int:
    """How many positions a tsvector entry has (`ts_rank`'s term frequency): 1 when it has none."""
    if not positions:
        return 1
    if not positions.replace(",", "").isdigit():
        raise _Unheld  # a weight letter
    return positions.count(",") + 1


def _unescape(lexeme: str) -> str:
    return lexeme.replace("''", "'").replace("\\\\", "\\") if "'" in lexeme or "\\" in lexeme else lexeme


def _norm(length: int) -> float:
    """What `ts_rank(…, 1)` divides by: log2(1 + the row's length), computed as PostgreSQL does."""
    return math.log(length + 1) / math.log(2.0) if length else 1.0


class ScopeText:
    """The scopes one store holds (`PostgresStore._held_text`), least recently searched first."""

    def __init__(self, store: PostgresStore, max_mb: float):
        self._store = store
        self.max_mb = max_mb
        self._lock = threading.Lock()
        self._held: OrderedDict[str, _Scope] = OrderedDict()
        self._gate = ScopeGate(store)
        self._loading: dict[str, threading.Thread] = {}  # large scopes read in the background
        self._unheld: set[str] = set()  # scopes with rows this cannot score
        self._lexemes: OrderedDict[str, str | None] = OrderedDict()  # query word -> its lexeme ('' none)

    def candidates(self, terms: list[str], filters: Filters, k: int) -> list[Candidate] | None:
        """The SQL leg's answer for these keywords, or None where this does not serve."""
        scopes = list(dict.fromkeys(filters.scopes or []))
        if not scopes or self.max_mb <= 0 or checked_in_sql(filters) or k <= 0:
            return None
        with self._lock:
            if any(s in self._unheld or s in self._loading for s in scopes):
                return None
            if self._gate.first_search(scopes, self._held):
                return None
            lexemes = self._lexemes_of(terms)
            if lexemes is None or not all(self._hold(s) for s in scopes):
                return None
            try:
                found = read_changes(self._store, {s: self._held[s].since for s in scopes}, _COLUMNS)
                for scope, changes in found.items():
                    if changes.stale:  # read whole again: now if small, else in the background while SQL answers
                        del self._held[scope]
                        if not self._hold(scope):
                            return None
                        continue
                    held = self._held[scope]
                    held.apply(changes.rows, changes.departed)
                    held.since = changes.since
                    self._held.move_to_end(scope)
            except _Unheld:
                for scope in scopes:
                    if self._held.pop(scope, None) is not None:
                        self._unheld.add(scope)
                return None
            except BaseException:
                for scope in scopes:  # a refresh cut short leaves nothing half held
                    self._held.pop(scope, None)
                raise
            self._evict(keep=scopes)
            return _rank([self._held[s] for s in scopes], lexemes, filters, k)

    def _lexemes_of(self, terms: list[str]) -> list[str] | None:
        """Each word's lexeme as `to_tsquery` makes it ('' for a stopword); None if one makes more."""
        missing = [t for t in terms if t not in self._lexemes]
        if missing:
            cfg = self._store.ts_config
            rows = self._store.run(f"SELECT t, to_tsquery('{cfg}', t)::text FROM unnest(%s::text[]) t", (missing,))
            for term, query in rows:
                match = re.fullmatch(r"'((?:[^']|'')*)'", query)
                self._lexemes[term] = "" if not query else (_unescape(match.group(1)) if match else None)
            while len(self._lexemes) > _TERMS:
                self._lexemes.popitem(last=False)
        out = [self._lexemes.get(t) for t in terms]
        return None if any(x is None for x in out) else out  # type: ignore[return-value]

    def _hold(self, scope: str) -> bool:
        """Whether the scope is held (read now if small enough); a large one starts its read in the background."""
        if scope in self._held:
            return True
        rows = self._gate.rows(scope)
        if rows * _ROW_BYTES * 2 > self.max_mb * 1_000_000:
            return False  # counted again in a minute
        self._gate.holding(scope)
        if rows > _READ_NOW:
            self._loading[scope] = thread = threading.Thread(
                target=self._read_beside, args=(scope,), name="clawrecall-pg-text", daemon=True)
            thread.start()
            return False
        try:
            self._held[scope] = _read(self._store, scope)
        except _Unheld:
            self._unheld.add(scope)
            return False
        return True

    def _read_beside(self, scope: str) -> None:
        try:
            held = _read(self._store, scope)
        except _Unheld:
            with self._lock:
                self._unheld.add(scope)
        except Exception as exc:  # the store closed, the server went away: SQL answers, a later search tries again
            log.debug("reading scope %s into memory failed: %s", scope, exc)
        else:
            with self._lock:
                self._held[scope] = held
                self._evict(keep=[scope])
        finally:
            with self._lock:
                self._loading.pop(scope, None)

    def _evict(self, keep: list[str]) -> None:
        budget = self.max_mb * 1_000_000
        total = sum(h.nbytes() for h in self._held.values())
        for scope in [s for s in self._held if s not in keep]:  # least recently searched first
            if total <= budget:
                break
            total -= self._held.pop(scope).nbytes()


def _read(store: PostgresStore, scope: str) -> _Scope:
    """A scope read whole (no lock held: parsing a large one takes a second)."""
    changes = read_changes(store, {scope: None}, _COLUMNS)[scope]
    return _Scope.whole(changes.rows, changes.since)


def _rank(held: list[_Scope], lexemes: list[str], filters: Filters, k: int) -> list[Candidate]:
    """The SQL leg's ranking: each word's `ts_rank(fts, word, 1)` (float32) times ln(1 + N/df), N the
    rows allowed that match any word and df those that match this one, summed in word order; ties by seq."""
    tests = index_tests(filters)
    found = []
    for part in held:
        allowed = part.alive[: part.size].copy()
        for test in tests:
            allowed &= test(part)
        found.append([part.matches(lex, allowed) if lex else None for lex in lexemes])
    n = 0
    hit_masks = []
    for part, each in zip(held, found):
        hit = np.zeros(part.size, dtype=bool)
        for m in each:
            if m is not None:
                hit[m[0]] = True
        hit_masks.append(hit)
        n += int(hit.sum())
    if n == 0:
        return []
    df = [sum(len(m[0]) for each in found if (m := each[i]) is not None) for i in range(len(lexemes))]
    weight = [math.log(1 + n / max(d, 1)) for d in df]
    out: list[tuple[float, int, str]] = []
    for part, each, hit in zip(held, found, hit_masks):
        scores = np.zeros(part.size, dtype=np.float64)
        for i, m in enumerate(each):
            if m is None or not len(m[0]):
                continue
            slots, counts = m
            rank = (_RANK[counts].astype(np.float64) / part.norm[slots]).astype(np.float32)
            scores[slots] += rank.astype(np.float64) * weight[i]
        rows = np.flatnonzero(hit)
        if len(rows) > k:  # the k best, ties (many, for a word every row has as often) broken by seq
            kth = np.partition(scores[rows], len(rows) - k)[len(rows) - k]
            rows = rows[scores[rows] >= kth]
            rows = rows[np.lexsort((part.seq[rows], -scores[rows]))[:k]]
        out.extend((float(scores[r]), int(part.seq[r]), part.ids[r]) for r in rows)  # type: ignore[misc]
    out.sort(key=lambda x: (-x[0], x[1]))
    return [Candidate(memory_id, score) for score, _, memory_id in out[:k]]
