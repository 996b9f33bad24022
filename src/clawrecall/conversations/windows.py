"""A message longer than the embedding model's window, as windows: the model reads at most its window
(256 tokens for all-MiniLM-L6-v2), so without them the end of a long answer or a pasted log is in no vector.

The message is cut as a file is (`files.chunking`: token-sized, overlapping, at headings and paragraphs
where it can). Its own row keeps the whole text and the vector of its start; every window after the
first is a `memories` row of kind `window` (`source_id`: the message's id) with its text and vector,
which the vector leg searches beside the messages and reports as its message (`Store.vector_candidates`).
"""

from __future__ import annotations

from ..files import Tokens, chunk, text_lines
from ..storage.migrations import MAY_EXCEED


def windows(text: str, tokens: Tokens, overlap: float) -> list[str]:
    """The texts of a message's windows after its first; none when the model reads it whole."""
    if len(text) <= MAY_EXCEED or tokens.count([text])[0] <= tokens.window:
        return []
    return [c.text for c in chunk(text_lines(text), tokens, overlap)[1:]]
