"""JSONL export and import: every field of every memory, out and back in through the write path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from pydantic import ValidationError as PydanticValidationError

from .._gc import collector_paused
from ..config import Config
from ..errors import ValidationError, pydantic_message
from ..models import AddResult, Imported, MemoryRecord, NewMemory, OnDuplicate
from ..scopes import Caller, read_scopes
from ..storage import Store
from ._embedding import Progress
from ._journal import journal
from ._reads import read_filters
from ._validate import require_writes
from ._writes import Writes

if TYPE_CHECKING:
    import numpy as np

_Row = tuple[int, MemoryRecord, str]  # a line's (an item's) number, its record, and the id it was given (its own if it names none)


class Transfer:
    """Backups a store reads back: one JSON object per memory, oldest first."""

    def __init__(self, store: Store, config: Config, writes: Writes):
        self.store = store
        self.config = config
        self.writes = writes

    def export_jsonl(
        self, out: IO[str], caller: Caller, scope: str | list[str] | None, *, include_deleted: bool, secrets: bool,
    ) -> int:
        filters = read_filters(
            caller, scope, self.config.categories, access=self.config.access, include_deleted=include_deleted,
            include_expired=True, include_superseded=True, secrets=secrets,
        )
        n = 0
        for stored, _ in self.store.memories.iter_all(filters):
            record = self.writes.secrets.reveal(stored)  # asked for with `secrets`: exported as text, as imported
            # keys are made by extraction from the facts, which the export carries themselves
            out.write(json.dumps(record.model_dump(mode="json", exclude={"kind", "keys"}), ensure_ascii=False) + "\n")
            n += 1
        return n

    def export_journal(self, folder: Path, caller: Caller, scope: str | list[str] | None, *, secrets: bool) -> dict[str, int]:
        """Write the journal (`_journal`) of the memories the caller reads under `folder`; files of other
        days are left as they are. Answers how many files and memories were written."""
        filters = read_filters(
            caller, scope, self.config.categories, access=self.config.access, include_deleted=False,
            include_expired=True, include_superseded=True, secrets=secrets,
        )
        records = [record for record, _ in self.store.memories.iter_all(filters)]
        files = journal(records)
        for name, text in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return {"files": len(files), "memories": len(records)}

    @collector_paused()
    def import_jsonl(
        self, lines: Iterable[str], caller: Caller, *, on_duplicate: OnDuplicate, dry_run: bool,
        progress: Progress | None, chunk: int, vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None,
    ) -> Imported:
        """Every line is validated before anything is written. A line whose id is stored is skipped (by a
        memory the caller may not read: imported under a new id, as if the id were unused), and so (`on_duplicate="skip"`) is one nearly identical to a stored memory or an earlier line,
        so running an import again adds nothing. `vectors` (by item id) are stored for their items instead of
        embedding them: another system's, made by the store's model. Returns the counts and, per line left out, why."""
        numbered: list[tuple[int, NewMemory]] = []
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("expected a JSON object")
                data.pop("embedding", None)
                numbered.append((n, NewMemory.model_validate(data)))
            except (ValueError, PydanticValidationError) as exc:
                detail = pydantic_message(exc, NewMemory) if isinstance(exc, PydanticValidationError) else str(exc)
                raise ValidationError(f"line {n}: {detail}") from None
        return self._import(numbered, "line", caller, on_duplicate=on_duplicate, dry_run=dry_run, progress=progress,
                            chunk=chunk, vectors=vectors)

    @collector_paused()
    def import_items(
        self, items: Iterable[NewMemory | Mapping[str, Any]], caller: Caller, *, on_duplicate: OnDuplicate,
        dry_run: bool, progress: Progress | None, chunk: int,
        vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None,
    ) -> Imported:
        """`import_jsonl` of items a program holds already (another system's rows, as NewMemory fields): each
        validated once, into the record written, with no JSON text between the reader and the write. Items are
        named by their place ("item 7"), where lines are by their line."""
        return self._import(list(enumerate(items, start=1)), "item", caller, on_duplicate=on_duplicate,
                            dry_run=dry_run, progress=progress, chunk=chunk, vectors=vectors)

    def _import(
        self, numbered: Sequence[tuple[int, NewMemory | Mapping[str, Any]]], what: str, caller: Caller, *,
        on_duplicate: OnDuplicate, dry_run: bool, progress: Progress | None, chunk: int,
        vectors: Mapping[str, Sequence[float] | np.ndarray] | None,
    ) -> Imported:
        """The import of lines or items (`what`: how the answer and its errors name one), each with its number."""
        require_writes(self.config)
        if on_duplicate not in ("skip", "keep"):
            raise ValidationError(f"on_duplicate must be skip or keep, got {on_duplicate!r}")
        # each validated once, into the record written (secrets sealed): nothing is written if one is bad
        records, fresh = self.writes.new_records([item for _, item in numbered], caller,
                                                 labels=[f"{what} {n}: " for n, _ in numbered])
        rows = [(n, record, given) for (n, _), record, given in zip(numbered, records, fresh)]
        seen: dict[str, int] = {}
        for n, record, given in rows:
            if record.id != given:  # named by the line
                if record.id in seen:
                    raise ValidationError(f"{what} {n}: id {record.id} repeats {what} {seen[record.id]}")
                seen[record.id] = n
        existing = self._held(rows, caller)
        left_out = [_stored(what, n, r.id) for n, r, _ in rows if r.id in existing]
        todo = [row for row in rows if row[1].id not in existing]
        created = 0
        number_of: dict[str, int] = {}  # an id this import gave: a later near-duplicate of it names its line
        size = max(len(todo), 1) if dry_run else chunk  # a dry run compares every line with every other, as one batch
        for start in range(0, len(todo), size):
            part = todo[start : start + size]
            if stored := self._held(part, caller):  # by another import running beside this one
                left_out += [_stored(what, n, r.id) for n, r, _ in part if r.id in stored]
                part = [row for row in part if row[1].id not in stored]
            theirs = [row for row in part if vectors and row[1].id in vectors]  # with the source's vectors
            part = [row for row in part if not (vectors and row[1].id in vectors)] + theirs
            results = self._write(part[: len(part) - len(theirs)], what, caller, on_duplicate, dry_run, None)
            if theirs:
                import numpy as np

                assert vectors is not None
                results += self._write(theirs, what, caller, on_duplicate, dry_run,
                                       np.array([vectors[r.id] for _, r, _ in theirs], dtype=np.float32))
            for (n, _, _), result in zip(part, results):
                if result.action == "created":
                    created += 1
                    number_of[result.id] = n
                else:
                    left_out.append({what: n, "reason": "duplicate", "existing_id": result.existing_id,
                                     f"existing_{what}": number_of.get(result.id), "similarity": result.similarity})
            if progress:
                progress(min(start + size, len(todo)), len(todo))
        left_out.sort(key=lambda d: d[what])
        return Imported(
            read=len(numbered), created=created, duplicates=sum(d["reason"] == "duplicate" for d in left_out),
            skipped=sum(d["reason"] == "id_exists" for d in left_out), dry_run=dry_run, left_out=left_out,
        )

    def _write(self, rows: list[_Row], what: str, caller: Caller, on_duplicate: OnDuplicate, dry_run: bool,
               embeddings: np.ndarray | None) -> list[AddResult]:
        if not rows:
            return []
        return self.writes.add_records(
            [r for _, r, _ in rows], [(f"{what} {n}: ", r.id) for n, r, given in rows if r.id != given], caller,
            dedup=on_duplicate == "skip", progress=None, actor="import", dry_run=dry_run, embeddings=embeddings,
            embed_later=False,  # an import skips duplicates and is run again to finish: it needs its vectors now
        )

    def _held(self, rows: list[_Row], caller: Caller) -> set[str]:
        """The ids lines name that a memory the caller may read holds. A line naming an id another caller's
        memory holds gets the id it was given instead: whether it is stored is none of this caller's
        business, and every other door answers "not found" for it."""
        named = [r for _, r, given in rows if r.id != given]
        stored = self.store.memories.fetch([r.id for r in named])
        readable = read_scopes(caller, None, access=self.config.access)
        for _, record, given in rows:
            if record.id in stored and readable is not None and stored[record.id].scope not in readable:
                record.id = given
        return {r.id for r in named if r.id in stored}


def _stored(what: str, n: int, memory_id: str | None) -> dict[str, Any]:
    return {what: n, "reason": "id_exists", "id": memory_id}
