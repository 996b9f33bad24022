"""The extraction answer: its JSON schema (strict structured-output mode: every key required, nulls
allowed, no other keys) and its validation, whose errors are plain sentences a model can act on in
its one repair attempt."""

from __future__ import annotations

import json
import re
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import pydantic_message
from ..retrieval.when import relative_time

SENTIMENTS = ("neutral", "confirmation", "correction", "frustration", "reminder", "update")
ACTIONS = ("new", "repeat", "update")
VISIBILITIES = ("private", "shared", "secret")
#: categories that are no fact a conversation states
NOT_FACTS = ("session_summary", "file_chunk")
_KNOWN = re.compile(r"F([1-9][0-9]*)")


class ExtractedFact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=1000)
    category: str
    entities: list[str]
    importance: float = Field(ge=0, le=1)
    confidence: float = Field(ge=0, le=1)
    valid_from: date | None
    sentiment: Literal["neutral", "confirmation", "correction", "frustration", "reminder", "update"]
    source: list[int] = Field(min_length=1)
    action: Literal["new", "repeat", "update"]
    existing: str | None
    visibility: Literal["private", "shared", "secret"] | None

    @property
    def known_index(self) -> int | None:
        """The shown fact `existing` names, 1-based (F3 → 3), or None."""
        m = _KNOWN.fullmatch(self.existing or "")
        return int(m[1]) if m else None


class Extraction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    facts: list[ExtractedFact]
    summary: str | None


def fact_categories(categories: list[str]) -> list[str]:
    """The config's categories a fact may have."""
    return [c for c in categories if c not in NOT_FACTS]


def answer_schema(categories: list[str]) -> dict[str, Any]:
    """The answer's JSON schema for the config's `categories`, accepted by OpenAI's strict
    json_schema mode and Anthropic's tool input."""
    categories = fact_categories(categories)
    nullable = lambda t: {"type": [t, "null"]}  # noqa: E731
    fact: dict[str, Any] = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "category": {"type": "string", "enum": list(categories)},
            "entities": {"type": "array", "items": {"type": "string"}},
            "importance": {"type": "number"},
            "confidence": {"type": "number"},
            "valid_from": {**nullable("string"), "description": "YYYY-MM-DD"},
            "sentiment": {"type": "string", "enum": list(SENTIMENTS)},
            "source": {"type": "array", "items": {"type": "integer"}},
            "action": {"type": "string", "enum": list(ACTIONS)},
            "existing": {**nullable("string"), "description": "F<n> of a known fact"},
            "visibility": {"type": ["string", "null"], "enum": [*VISIBILITIES, None]},
        },
        "additionalProperties": False,
    }
    fact["required"] = list(fact["properties"])
    return {
        "type": "object",
        "properties": {"facts": {"type": "array", "items": fact}, "summary": nullable("string")},
        "required": ["facts", "summary"],
        "additionalProperties": False,
    }


def validate(answer: str | dict[str, Any], *, categories: list[str], messages: int, known: int) -> tuple[Extraction | None, list[str]]:
    """The answer read and checked against the segment it is about (`messages` numbered 1…n, `known`
    facts F1…Fn): (the extraction, []) or (None, the errors in words)."""
    if isinstance(answer, str):
        try:
            answer = json.loads(_unfenced(answer))
        except ValueError as exc:
            return None, [f"the answer is not valid JSON ({exc})"]
    if not isinstance(answer, dict):
        return None, [f"the answer must be a JSON object with keys facts and summary, got {type(answer).__name__}"]
    try:
        extraction = Extraction.model_validate(answer)
    except ValidationError as exc:
        return None, [pydantic_message([e]) for e in exc.errors()]  # one error a line: each can be fixed on its own
    categories = fact_categories(categories)
    errors: list[str] = []
    for n, fact in enumerate(extraction.facts, 1):
        where = f"facts[{n - 1}]"
        if fact.category not in categories:
            errors.append(f"{where}.category {fact.category!r} is not one of: {', '.join(categories)}")
        if (words := relative_time(fact.text)) is not None:
            errors.append(f"{where}.text says {words!r}: write the absolute date instead (e.g. 'On 2026-03-02 …')")
        if bad := [s for s in fact.source if not 1 <= s <= messages]:
            errors.append(f"{where}.source {bad} is outside the messages 1…{messages}")
        # A repeat or update of a fact that was not shown is not an error worth a second call: small models
        # copy the prompt's example ("update", "F1") when no facts are known; `decide` makes it a new fact.
    return (None, errors) if errors else (extraction, [])


def _unfenced(text: str) -> str:
    """JSON a model wrapped in a Markdown code fence despite the instructions."""
    m = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", text, re.DOTALL)
    return m[1] if m else text

