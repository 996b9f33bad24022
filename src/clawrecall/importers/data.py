"""Another system's data brought in: one driver for every source (`import --from SYSTEM SOURCE`).

A source module turns its store into items for the write path (NewMemory fields, JSON-ready), each
with an id derived from the system and the source row's own id (`stable_id`), so an import run again
adds nothing and one interrupted resumes where it stopped (each chunk commits). What a source leaves
out it says, with why; what it maps it names (`Mapping`), for the summary.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:
    from ..engine import Memory
    from ..scopes import Caller

_NAMESPACE = uuid.UUID("6f1c2a53-2d0e-4c55-9a7b-2f4b1f0c9e11")


def stable_id(system: str, table: str, source_id: str) -> str:
    """The same memory id for the same source row, every run."""
    return str(uuid.uuid5(_NAMESPACE, f"{system}:{table}:{source_id}"))


@dataclass
class Plan:
    """What a source yields: items to write, what became what, and what was left out and why."""

    items: list[dict[str, Any]] = field(default_factory=list)
    mapped: dict[str, str] = field(default_factory=dict)  # "facts.summary" -> "title"
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {"table", "id", "reason"}


Reader = Callable[[str], Plan]


def run(mem: Memory, system: str, read: Reader, source: str, *, caller: Caller, dry_run: bool,
        progress: Callable[[int, int], None] | None) -> dict[str, Any]:
    """Read the source whole (a bad row fails before anything is written), then write its items through
    the JSONL import: ids stored already are skipped, so a second run or a resumed one adds nothing twice."""
    plan = read(source)
    result = mem.import_jsonl(_lines(plan.items), caller=caller, on_duplicate="keep", dry_run=dry_run, progress=progress)
    return {"system": system, "source": source, "read": len(plan.items) + len(plan.skipped),
            "imported": result.created, "already_there": result.skipped, "dry_run": dry_run,
            "mapped": plan.mapped, "skipped": plan.skipped}


def _lines(items: list[dict[str, Any]]) -> Iterator[str]:
    for item in items:
        yield json.dumps(item, ensure_ascii=False, default=str)
