"""A re-embedding under way, as the store keeps it (`store.staged`): the new model's vectors wait in
`staged_vectors` until every row has one, then replace the live ones in one transaction.

Until then searches and writes use the old vectors and the old model; a crash or a provider that
fails leaves both tables as they were, and the next run embeds only the rows still missing. A
staged vector counts while its row's `updated_at` is the one it was made from: a row changed or
added meanwhile is embedded again before the swap. `meta.reembed_target` names the model the
staged vectors come from; a run for another model starts over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ..errors import StorageError
from ..models import embedded_text
from .executor import Executor
from .schema import STAGED_VECTORS

if TYPE_CHECKING:
    import numpy as np

TARGET_KEY = "reembed_target"
_T = STAGED_VECTORS.name


class StagedVectors:
    def __init__(self, store: Executor):
        self._store = store

    def target(self) -> str | None:
        """The fingerprint (JSON) of the model the staged vectors come from; None when no re-embedding is under way."""
        return self._store.get_meta(TARGET_KEY)

    def begin(self, target: str) -> None:
        """Stage for `target` from now on: vectors of another model are dropped (a run for the same one resumes)."""
        s = self._store
        with s.transaction():
            if s.get_meta(TARGET_KEY) != target:
                s.run(f"DELETE FROM {_T}")
                s.set_meta(TARGET_KEY, target)

    def pending(self, after: int, limit: int | None) -> list[tuple[int, str, str, Any]]:
        """(order, id, the text its vector is made of, updated_at as stored) of rows past `after` in insertion
        order without a current staged vector: never staged, or changed since. Not a sealed secret: it has no vector."""
        s = self._store
        p, oc = s.dialect.p, s.dialect.order_column
        rows = s.run(
            f"SELECT m.{oc}, m.id, m.content, m.updated_at, m.keys FROM memories m "
            f"LEFT JOIN {_T} s ON s.id = m.id AND s.updated_at = m.updated_at "
            f"WHERE s.id IS NULL AND m.{oc} > {p} AND m.sealed IS NULL ORDER BY m.{oc}" + (f" LIMIT {int(limit)}" if limit is not None else ""),
            (after,),
        )
        return [(r[0], str(r[1]), embedded_text(r[2], r[4]), r[3]) for r in rows]

    def stage(self, target: str, rows: Sequence[tuple[int, str, str, Any]], vectors: np.ndarray) -> None:
        """Keep the vectors of rows from `pending`; refused when another run has since begun for another model."""
        s = self._store
        p, vector = s.dialect.p, s.dialect.to_db["vector"]
        with s.transaction():
            self._still(target)
            s.run_many(
                f"INSERT INTO {_T} (id, updated_at, embedding) VALUES ({p}, {p}, {p}) "
                "ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at, embedding = excluded.embedding",
                sorted(((r[1], r[3], vector(v)) for r, v in zip(rows, vectors)), key=lambda row: row[0]),
            )

    def count(self) -> int:
        """Rows whose staged vector is current."""
        return int(self._store.run(
            f"SELECT count(*) FROM {_T} s JOIN memories m ON m.id = s.id AND m.updated_at = s.updated_at"
        )[0][0])

    def rows(self) -> int:
        """Staged rows of a re-embedding that began and has not finished, current or not."""
        if self.target() is None:  # rows left by a swap that committed (a crash before `clear`): nothing under way
            return 0
        return int(self._store.run(f"SELECT count(*) FROM {_T}")[0][0])

    def _still(self, target: str) -> None:
        """In a write transaction: the staging is still this run's (another run may have finished it, or begun for another model)."""
        if self._store.get_meta(TARGET_KEY) != target:
            raise StorageError("another `clawrecall reembed` finished this one's work or began for another model "
                               "meanwhile: this one stops, nothing of it was adopted (`clawrecall doctor` shows the store's model)")

    def swap(self, target: str, model: str) -> int:
        """In the caller's transaction, with every row staged: the staged vectors become the rows' own,
        named `model`, and the re-embedding is over. How many rows changed. The staged rows are left
        for `clear` after COMMIT (emptying the table is a second pass over it, not worth holding writers for)."""
        s = self._store
        p = s.dialect.p
        self._still(target)
        changed = s.rowcount(
            f"UPDATE memories SET embedding = (SELECT s.embedding FROM {_T} s WHERE s.id = memories.id), "
            f"embedding_model = {p} WHERE id IN (SELECT id FROM {_T})",
            (model,),
        )
        s.run(f"DELETE FROM meta WHERE key = {p}", (TARGET_KEY,))
        return changed

    def clear(self) -> None:
        s = self._store
        with s.transaction():
            s.run(f"DELETE FROM {_T}")
            s.run(f"DELETE FROM meta WHERE key = {s.dialect.p}", (TARGET_KEY,))

    def remove(self, ids: list[str]) -> None:
        """In a hard delete: a staged vector is made from the row's text and goes with it."""
        self._store.run(f"DELETE FROM {_T} WHERE id IN ({self._store.dialect.marks(len(ids))})", ids)
