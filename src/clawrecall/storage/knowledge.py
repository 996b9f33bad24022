"""What the store keeps about facts besides their `memories` rows: `store.occurrences`, each time a
conversation stated a fact. "Discussed 3 times, first on …, last on …" is counted from it, so no
counter can drift from the rows it counts."""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from ..models import Occurrence
from .base import chunks
from .executor import TableRows
from .schema import FACT_OCCURRENCES


class Occurrences(TableRows[Occurrence]):
    table = FACT_OCCURRENCES
    model = Occurrence

    def summary(self, memory_ids: Sequence[str]) -> dict[str, tuple[int, datetime, datetime]]:
        """memory id → (count, first, last) for the ids that have occurrences; one query per 500 ids."""
        from_ts = self._store.dialect.from_db["time"]
        out: dict[str, tuple[int, datetime, datetime]] = {}
        for chunk in chunks(memory_ids):
            where, params = self._in("memory_id", chunk)
            rows = self._store.run(
                f"SELECT t.memory_id, count(*), min(t.at), max(t.at) FROM fact_occurrences t WHERE {where} GROUP BY t.memory_id",
                params,
            )
            out.update((str(r[0]), (int(r[1]), from_ts(r[2]), from_ts(r[3]))) for r in rows)
        return out

    def of(self, memory_id: str) -> list[Occurrence]:
        """A fact's occurrences, oldest first."""
        return self._read(f"WHERE t.memory_id = {self._store.dialect.p} ORDER BY t.at, t.id", (memory_id,))

    def owned(self, memory_ids: Sequence[str], scope: str) -> list[str]:  # type: ignore[override]
        """Ids of the occurrences of these facts, or in this scope (a person's, for erasure)."""
        p = self._store.dialect.p
        ids = {str(r[0]) for r in self._store.run(f"SELECT id FROM fact_occurrences WHERE scope = {p}", (scope,))}
        ids.update(self._ids_where("memory_id", memory_ids))
        return sorted(ids)

    def stored(self, ids: Sequence[str]) -> set[str]:
        """Which of these occurrence ids are stored."""
        return set(self._ids_where("id", ids))

    def in_segments(self, segment_ids: Sequence[str]) -> list[str]:
        """Ids of the occurrences said in these segments (their snippets quote the segments' messages)."""
        return self._ids_where("segment_id", segment_ids)

    def delete(self, ids: Sequence[str]) -> None:
        s = self._store
        with s.transaction():
            s.run_many(f"DELETE FROM fact_occurrences WHERE id = {s.dialect.p}", [(i,) for i in ids])
