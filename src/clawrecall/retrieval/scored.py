"""A hit while the pipeline ranks it: the one type every stage takes, those in modules of their own
(relevance.py) too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..models import MemoryRecord


@dataclass
class Scored:
    memory: MemoryRecord
    score: float  # the ranking score: orders the hits of one query
    legs: dict[str, dict[str, float]] = field(default_factory=dict)
    steps: dict[str, Any] = field(default_factory=dict)
    relevance: float = 0.0  # the absolute score (relevance.py): comparable across queries
