"""What each extracted fact does to the store, by rules rather than by the model's word alone.

The model proposes new / repeat / update; the rules keep what it cannot be trusted with: an
`existing` that was never shown is a new fact, an update it is unsure of keeps both facts (a wrong
supersede would hide a true fact), and a "new" fact that says what a known one says, or an "update"
that says it again but for its date, is a repeat; a question copied from the chat is no fact at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timezone
from typing import Callable, Literal, Mapping

from .._time import as_utc
from ..config import ExtractionConfig
from ..models import MemoryRecord, Message
from .schema import ExtractedFact, Extraction

Action = Literal["new", "repeat", "update", "keep_both"]
_STRICTNESS = {"shared": 0, "private": 1, "secret": 2}
# the date a fact opens with, as the prompt asks facts to be written: "On 2026-03-02 …", "In May 2026, …"
_DATE = re.compile(
    r"^\s*(?:on|in|as of|since)\s+(?:\d{4}-\d{2}(?:-\d{2})?|(?:\d{1,2}\s+)?[a-z]+\.?(?:\s+\d{1,2}(?:st|nd|rd|th)?)?,?\s+\d{4})"
    r",?\s+"
)


@dataclass(frozen=True)
class Decision:
    """One fact's effect. `new` and `keep_both` add a fact (`keep_both` beside `existing`, which stays
    current); `repeat` adds an occurrence to `existing`; `update` supersedes `existing` from `valid_from`."""

    action: Action
    fact: ExtractedFact
    existing: MemoryRecord | None
    visibility: str
    sources: list[Message]  # the messages it came from, in order
    valid_from: datetime  # when it became true: the model's date, else when its source was said
    reason: str | None = None  # why the rules overrode the model's action

    @property
    def said_at(self) -> datetime:
        """When it was said: its last source message."""
        return self.sources[-1].created_at


def decide(
    extraction: Extraction, shown: list[Message], known: list[MemoryRecord], *, config: ExtractionConfig,
    near: Mapping[int, int] | None = None, level: Callable[[str], str] | None = None,
) -> list[Decision]:
    """Decisions for a validated extraction. `shown` and `known` are the prompt's numbered messages and
    facts; `near` maps a fact's index to the index of a known fact its text nearly repeats (0-based);
    `level` gives a category's ruled visibility (the writing agent's rules: `scopes.new_visibility`),
    by default the config's own rules."""
    near = near or {}
    level = level or (lambda category: config.visibility.rules.get(category, config.visibility.default))
    out: list[Decision] = []
    for i, fact in enumerate(extraction.facts):
        if fact.text.rstrip().endswith("?"):  # a question copied from the chat states nothing
            continue
        sources = [shown[n - 1] for n in sorted(set(fact.source))]
        valid_from = _valid_from(fact, sources)
        k = fact.known_index
        existing = known[k - 1] if k is not None and k <= len(known) and fact.action != "new" else None
        action: Action = fact.action
        reason = None
        if action != "new" and existing is None:
            action, reason = "new", f"{fact.existing or 'no fact'} is not a known fact"
        elif action == "update" and existing is not None and _undated(fact.text) == _undated(existing.content):
            action, reason = "repeat", f"it restates F{k} but for its date"
        elif action == "update" and fact.confidence < config.update_min_confidence:
            action, reason = "keep_both", f"confidence {fact.confidence} is below {config.update_min_confidence}"
        elif action == "update" and existing is not None and valid_from <= as_utc(existing.valid_from):
            valid_from = as_utc(sources[-1].created_at)  # the model's date is older than what it updates
            if valid_from <= as_utc(existing.valid_from):
                action, reason = "keep_both", "it was said no later than the fact it would update began"
        elif action == "new" and i in near:
            existing, action, reason = known[near[i]], "repeat", f"it repeats F{near[i] + 1}"
        out.append(Decision(action, fact, existing, visibility(fact, level(fact.category)), sources, valid_from, reason))
    return out


def _undated(text: str) -> str:
    """A fact's words without its opening date and punctuation, lower-cased: small models "update" a known fact
    by restating it with the day it was said again, which is a repeat."""
    text = _DATE.sub(" ", text.lower(), count=1)
    return " ".join(re.findall(r"\w+", text))


def visibility(fact: ExtractedFact, ruled: str) -> str:
    """The category's ruled level; the model's hint may only make it stricter."""
    hint = fact.visibility or ruled
    return max(ruled, hint, key=_STRICTNESS.__getitem__)


def _valid_from(fact: ExtractedFact, sources: list[Message]) -> datetime:
    """The model's date (start of that day, UTC) if it is not after the source was said, else the source's time."""
    said = as_utc(sources[-1].created_at)
    if fact.valid_from is not None:
        day = datetime.combine(fact.valid_from, time(), timezone.utc)
        if day <= said:
            return day
    return said
