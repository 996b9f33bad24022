"""JSONL export and import: every field of every memory, out and back in through the write path."""

from __future__ import annotations

import json
from typing import IO, Iterable

from pydantic import ValidationError as PydanticValidationError

from .._time import utcnow
from ..config import Config
from ..errors import ValidationError, pydantic_message
from ..models import NewMemory
from ..scopes import Caller
from ..storage import Store
from ._embedding import Progress
from ._reads import read_filters
from ._validate import new_ids, new_record, require_writes
from ._writes import Writes


class Transfer:
    """Backups a store reads back: one JSON object per memory, oldest first."""

    def __init__(self, store: Store, config: Config, writes: Writes):
        self.store = store
        self.config = config
        self.writes = writes

    def export_jsonl(self, out: IO[str], caller: Caller, scope: str | list[str] | None, *, include_deleted: bool) -> int:
        filters = read_filters(
            caller, scope, self.config.categories, access=self.config.access, include_deleted=include_deleted,
            include_expired=True,
        )
        n = 0
        for record, _ in self.store.iter_all(filters):
            out.write(json.dumps(record.model_dump(mode="json", exclude={"kind"}), ensure_ascii=False) + "\n")
            n += 1
        return n

    def import_jsonl(
        self, lines: Iterable[str], caller: Caller, *, dedup: bool, progress: Progress | None, chunk: int
    ) -> dict[str, int]:
        """Every line is validated before anything is written; ids already present are skipped."""
        require_writes(self.config)
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
                detail = pydantic_message(exc, NewMemory) if isinstance(exc, PydanticValidationError) else str(exc)
                raise ValidationError(f"line {n}: {detail}") from None
        items = [item for _, item in items_by_line]
        now = utcnow()
        seen: dict[str, int] = {}
        for (n, item), fresh in zip(items_by_line, new_ids(len(items_by_line))):  # validation, nothing written yet
            record = new_record(item, now, caller, self.config, f"line {n}: ", fresh)
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
            results = self.writes.add_many(part, caller, dedup=dedup, actor="import") if part else []
            created += sum(r.action == "created" for r in results)
            duplicates += sum(r.action == "duplicate" for r in results)
            if progress:
                progress(min(start + chunk, len(todo)), len(todo))
        skipped += len(items) - len(todo)
        return {"read": len(items), "created": created, "duplicates": duplicates, "skipped": skipped}
