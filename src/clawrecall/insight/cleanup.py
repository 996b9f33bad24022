"""What makes a stored memory low-quality by its text alone (nova-memory's maintenance report): the same
rules that keep such text out of memory at capture and out of a recall block, applied to what is
already stored (memories written before the rules, imported, or added by hand)."""

from __future__ import annotations

from ..conversations.text import aside, is_placeholder
from ..retrieval.noise import is_noise, is_small_talk

#: every reason the clean-up report gives: these text rules, then a near-copy of a kept memory and no recall lately
REASONS = ("noise", "near_empty", "placeholder", "question", "duplicate", "never_recalled")
NEAR_EMPTY_CHARS = 12  # "ok", "n/a", "see above": shorter than any fact worth a line


def text_reasons(content: str) -> list[str]:
    """Why a memory's text is not worth keeping (`noise`, `near_empty`, `placeholder`, `question`), or []."""
    text = content.strip()
    reasons = []
    if len(text) < NEAR_EMPTY_CHARS:
        reasons.append("near_empty")
    if is_noise(text) or is_small_talk(text):
        reasons.append("noise")
    if is_placeholder(text):
        reasons.append("placeholder")
    if text.endswith("?") and aside(text) == "question":
        reasons.append("question")
    return reasons
