"""Time helpers: UTC everywhere, ISO-8601 in storage, "3d ago" for people and models."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from functools import lru_cache


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(value: datetime) -> datetime:
    """Naive datetimes are taken to be UTC (what users mean when they omit a zone)."""
    if value.tzinfo is timezone.utc:  # nearly every call: times this package made or read back
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def to_db(value: datetime | None) -> str | None:
    return None if value is None else _iso(as_utc(value))


@lru_cache(maxsize=256)
def _iso(value: datetime) -> str:
    """Cached: a batch of new memories stores one time (created, updated, history) a few times a row.
    (Keyed by the UTC value: two local times that differ only in `fold` compare equal.)"""
    return value.isoformat(timespec="microseconds")


def from_db(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def parse_when(text: str) -> datetime:
    """Parse a user-given time: ISO-8601 date or datetime (naive = UTC)."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not an ISO-8601 date or time: {text!r}") from None
    return checked_utc(value)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "mo": 30 * 86400, "y": 365 * 86400}
_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*(mo|[smhdwy])(?:\s+ago)?$")


def parse_when_or_ago(text: str, now: datetime | None = None) -> datetime:
    """A time as people type it on a command line: ISO-8601, an age (`7d`, `2h`, `30m`, `2w`, `3mo`,
    `1y`, `7d ago`: that long before now, in `age_string`'s units), `now`, `today` or `yesterday`
    (midnight UTC)."""
    word = text.strip().lower()
    now = now or utcnow()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if word in ("now", "today", "yesterday"):
        return {"now": now, "today": midnight, "yesterday": midnight - timedelta(days=1)}[word]
    if match := _AGO.match(word):
        try:
            return now - timedelta(seconds=float(match[1]) * _UNITS[match[2]])
        except OverflowError:
            raise ValueError(f"{text!r} is further back than a date can go") from None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not an ISO-8601 date or time, nor an age like 7d, 2h or yesterday: {text!r}") from None
    return checked_utc(value)


def checked_utc(value: datetime) -> datetime:
    """`as_utc` for a caller's time, which may lie outside what UTC can hold (year 1 at +05:00)."""
    try:
        return as_utc(value)
    except OverflowError:
        raise ValueError(f"{value.isoformat()} is out of range in UTC") from None


def age_days(created: datetime, now: datetime | None = None) -> float:
    now = now or utcnow()
    return max(0.0, (now - as_utc(created)).total_seconds() / 86400.0)


def age_string(created: datetime, now: datetime | None = None) -> str:
    """Compact relative age, as seed 001 shows it: `just now`, `5m ago`, `3d ago`, `2w ago`, `4mo ago`, `1y ago`."""
    seconds = age_days(created, now) * 86400.0
    if seconds < 60:
        return "just now"
    for unit, size in (("y", 365 * 86400), ("mo", 30 * 86400), ("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"


def retry_after_seconds(value: str | None) -> float | None:
    """An HTTP `Retry-After` as seconds from now (≥ 0): delta-seconds or an HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            seconds = (parsedate_to_datetime(value) - utcnow()).total_seconds()
        except (TypeError, ValueError):
            return None
    import math

    return max(seconds, 0.0) if math.isfinite(seconds) else None
