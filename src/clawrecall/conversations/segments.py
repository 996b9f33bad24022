"""When a conversation's open segment closes, and what a closed one leaves on disk (memento-local's segmenter).

A segment closes after a pause (no message for `pause_minutes`), at `max_turns` user turns, on a
topic shift, or when the session ends. The topic shift is deterministic: the mean vector of the
`topic_window` messages before a user message against that of the window starting at it; the
lowest cosine of a dip below `topic_threshold` is a shift (bench/segments.py measures the threshold).
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from ..models import Message, Segment

if TYPE_CHECKING:
    import numpy as np

    from ..config import ConversationsConfig

TITLE_CHARS = 80


def pause_closes(segment: Segment, at: datetime, cfg: ConversationsConfig) -> bool:
    """Whether a message at `at` comes after the segment's pause (it then opens a new one)."""
    return at - segment.ended_at > timedelta(minutes=cfg.pause_minutes)


def topic_shift(vectors: np.ndarray, starts_turn: Sequence[bool], window: int, threshold: float) -> int | None:
    """The first position where the topic shifts, or None.

    `vectors` are the segment's messages in order (unit length), `starts_turn` whether each is a user
    message (a shift is placed only before one). A position needs `window` messages on both sides.
    The shift is the lowest point of a dip below the threshold: the window that straddles a shift
    already dips, and cutting there would move the old topic's last turn into the new segment. So a
    position below the threshold waits for the next one, and is passed over if that one is lower.
    """
    previous: tuple[int, float] | None = None
    for i, cos in window_cosines(vectors, starts_turn, window):
        if previous is not None and cos >= previous[1]:
            return previous[0]
        previous = (i, cos) if cos < threshold else None
    return None


def window_cosines(vectors: np.ndarray, starts_turn: Sequence[bool], window: int) -> Iterator[tuple[int, float]]:
    """Each position a shift may be placed at, with the cosine between the mean vectors of the `window`
    messages before it and the `window` starting at it (what `topic_threshold` is compared with)."""
    import numpy as np

    for i in range(window, len(vectors) - window + 1):
        if not starts_turn[i]:
            continue
        before = vectors[i - window : i].mean(axis=0)
        after = vectors[i : i + window].mean(axis=0)
        yield i, float(before @ after / (np.linalg.norm(before) * np.linalg.norm(after) + 1e-12))


def title(messages: Sequence[Message]) -> str:
    """The segment's first user words, cut at a word boundary."""
    return cut(next((m.content for m in messages if m.role == "user"), messages[0].content if messages else ""))


def cut(text: str) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= TITLE_CHARS:
        return flat
    cut = flat[:TITLE_CHARS].rsplit(" ", 1)[0]
    return (cut or flat[:TITLE_CHARS]) + "…"


def slug(text: str, words: int = 6) -> str:
    """Lowercase words joined by hyphens, letters of any script kept; `conversation` when none are left."""
    normal = unicodedata.normalize("NFKC", text).lower()
    parts = re.findall(r"[^\W_]+", normal)[:words]
    out = "-".join(parts)[:60].strip("-")
    return out or "conversation"


def file_name(segment: Segment) -> str:
    """`YYYY-MM-DD-HH-MM-slug-<id8>.jsonl`: memento-local's name, plus the id so two segments of one minute differ."""
    return f"{segment.started_at:%Y-%m-%d-%H-%M}-{slug(segment.title or '')}-{segment.id[:8]}.jsonl"


def write_file(folder: Path, segment: Segment, messages: Sequence[Message]) -> str:
    """Write the closed segment's JSONL (a header line, then one line per message) atomically; its name."""
    folder.mkdir(parents=True, exist_ok=True)
    name = file_name(segment)
    target = folder / name
    tmp = folder / f".{name}.tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(json.dumps({"segment": segment.model_dump(mode="json", exclude={"file"})}, ensure_ascii=False) + "\n")
        for m in messages:
            out.write(json.dumps(m.model_dump(mode="json", exclude={"dedup_key"}), ensure_ascii=False) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, target)
    return name
