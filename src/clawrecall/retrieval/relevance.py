"""The absolute score: how likely a hit is relevant, comparable across queries and stores.

The ranking stages before this one order hits well but only relative to each other: min-max
fusion gives the best hit of any query a score near 1, even when nothing stored is about the
query. This stage scores each hit by the two signals that carry an absolute meaning:

    score = sigmoid(intercept + cosine · c + coverage · k)

  * `c`: the cosine between the whole query and the hit (the embedding model's own scale);
  * `k`: the share of the query's keywords the hit contains (the same on every store).

The coefficients were fitted by logistic regression of "the answer is stored" against "it is
not" on the best hit of LoCoMo and synthetic questions (`bench/relevance.py --fit`), so a score
is the estimated probability that the query is answered by this hit's kind of match, and
`min_score` can say "nothing relevant". The hits keep the ranking's order. The coefficients
belong to the embedding model: a store embedded by another model needs its own fit
(docs/retrieval.md): with another model, and in the keyword-only modes (no query vector), a hit
keeps its ranking score, as does a hit without a stored vector. A conversation turn that the
session-neighbour stage brought in scores at least as well as the hit it is next to ("Did you
go?" → "Yes, last Saturday": the answer shares no words with the question).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..storage.text import keyword_coverage, keywords

if TYPE_CHECKING:
    import numpy as np

    from ..config import RelevanceConfig
    from .scored import Scored


def apply_relevance(
    items: list[Scored], query: str, query_vector: np.ndarray | None, vectors: dict[str, np.ndarray],
    cfg: RelevanceConfig, *, uncalibrated: str | None = None,
) -> list[Scored]:
    """Set each item's `relevance` (0–1); the items keep their ranking order. Without a query vector
    the ranking score stands in, and `uncalibrated` (shown by explain) says why."""
    words = keywords(query)
    for item in items:
        vector = vectors.get(item.memory.id)
        coverage = keyword_coverage(words, item.memory.content)
        if query_vector is None or vector is None:
            item.relevance = min(max(item.score, 0.0), 1.0)
            item.steps["relevance"] = {"cosine": None, "coverage": round(coverage, 6),
                                       "uncalibrated": uncalibrated or "this memory has no vector"}
            continue
        cosine = float(vector @ query_vector)
        item.relevance = _sigmoid(cfg.intercept + cfg.cosine * cosine + cfg.coverage * coverage)
        item.steps["relevance"] = {"cosine": round(cosine, 6), "coverage": round(coverage, 6)}
    by_id = {item.memory.id: item for item in items}
    for item in items:
        next_to = by_id.get(item.steps.get("neighbor_of", ""))
        if next_to is not None and next_to.relevance > item.relevance:
            item.steps["relevance"]["own"] = round(item.relevance, 6)  # what the hit scores by itself
            item.relevance = next_to.relevance
            item.steps["relevance"]["from_neighbor"] = next_to.memory.id
    return items


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0
