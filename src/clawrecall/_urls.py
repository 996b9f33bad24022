"""A database URL as messages, summaries and `stats` show it: without its password."""

from __future__ import annotations

import re


def redacted_url(url: str) -> str:
    """The URL with its password replaced by `***` (anything else, a file path included, as it is)."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)
