"""A transcript as agents send it, turned into the entries the record stores.

Agents send messages in three shapes: OpenClaw's (pi-agent: `content` a string or a list of
`text`, `thinking` and `toolCall` parts; `toolResult` messages; `timestamp` in ms; `usage`),
OpenAI's chat format (`tool_calls`, role `tool`) and ours (`role`, `content`, `id`, `created_at`,
`model`, token counts). One message can hold several entries: an assistant turn with thinking,
text and a tool call is stored as a reasoning block, a response and a tool call.

Each entry has a dedup key so that a transcript sent again (OpenClaw sends the whole session on
every turn) stores nothing twice: the provider's message id when there is one, else the role and
the message's own timestamp (stable when a compaction shortens the transcript), else its
position; always with a hash of the content.

A time stamp is not always the message's own: OpenClaw stamps the user's message of the running
turn when the model is called, and the same message in the session file (every later turn's
transcript) when the turn began, seconds earlier (tests/fixtures/openclaw holds real transcripts).
`resent` finds such a message by its role and words: a stored message of the same role and
normalised text stamped at most `RESTAMPED_WITHIN` after it, that nothing else sent matched.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from .._time import as_utc
from ..errors import ValidationError
from .text import MAX_CONTENT_CHARS, check_text, strip_envelope

MAX_MESSAGES = 5_000  # one request's transcript
SUMMARY_FROM = 1_000  # characters: a longer response gets a short extractive summary
SUMMARY_CHARS = 240
_ROLES = {
    "user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "model": "assistant",
    "system": "system", "developer": "system", "tool": "tool_result", "toolresult": "tool_result",
    "tool_result": "tool_result", "function": "tool_result", "reasoning": "reasoning", "thinking": "reasoning",
    "tool_call": "tool_call",
}
_ID_FIELDS = ("id", "messageId", "message_id", "responseId")
# how much later than a resent copy's stamp the first copy may be stamped: the time from a turn's start to
# its model call (hooks, a queued turn waiting for the session), and no more, so a repeated "yes" is its own
RESTAMPED_WITHIN = timedelta(minutes=10)


@dataclass(frozen=True)
class Entry:
    """One message, reasoning block, tool call or tool result, ready to store."""

    role: str
    text: str
    dedup_key: str
    ordinal: int
    provider_id: str | None = None
    created_at: datetime | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    summary: str | None = None


def entries(messages: Any, *, skip_bad: bool = False) -> tuple[list[Entry], int]:
    """The entries of a transcript, in order, and how many messages were left out.

    A bad message is an error naming it (nothing is stored), unless `skip_bad`: a hook resending a
    session's transcript skips a message refused on an earlier turn, or every later turn would fail."""
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise ValidationError("messages must be a list of objects with role and content")
    if len(messages) > MAX_MESSAGES:
        raise ValidationError(f"{len(messages)} messages in one request; the limit is {MAX_MESSAGES}")
    out: list[Entry] = []
    skipped = 0
    for n, message in enumerate(messages):
        try:
            out.extend(_message_entries(message, n))
        except ValidationError as exc:
            if not skip_bad:
                raise ValidationError(f"message {n}: {exc}") from None
            skipped += 1
    return out, skipped


def check_message(message: Any) -> None:
    """Refuse a message the record could not store (its role, text or timestamp), as `entries` would:
    the one check of a message, for every door that takes one."""
    if not isinstance(message, Mapping):
        raise ValidationError("a message must be an object with role and content")
    _message_entries(message, 0)
def resent(fresh: Sequence[Entry], stored: Sequence[tuple[str, str, str, datetime]]) -> set[int]:
    """Which of `fresh` (entries whose key the record lacks, in order) are messages of `stored` sent again with
    another time stamp. `stored`: (dedup key, role, text, time) of the session's messages stamped from the
    first fresh entry's time to `RESTAMPED_WITHIN` after the last.

    Each stored message is matched once, by the earliest fresh entry of its role and normalised text stamped
    no later than it and at most `RESTAMPED_WITHIN` earlier: a replayed copy is stamped when its turn began,
    the first copy when the model was called. A message said again later (a second "yes") is stamped after
    the first one's copy and matches nothing."""
    claimed: set[int] = set()
    out: set[int] = set()
    by_words: dict[tuple[str, str], list[int]] = {}
    for n, (_, role, text, _) in enumerate(stored):
        by_words.setdefault((role, _words(text)), []).append(n)
    for i, e in enumerate(fresh):
        if e.created_at is None:
            continue
        for n in by_words.get((e.role, _words(e.text)), ()):
            at = stored[n][3]
            if n not in claimed and e.created_at <= at <= e.created_at + RESTAMPED_WITHIN:
                claimed.add(n)
                out.add(i)
                break
    return out


def _words(text: str) -> str:
    """A text as compared across resends: Unicode-normalised, runs of white space made one space."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def role_of(message: Mapping[str, Any]) -> str:
    """The role a message is stored under (a provider's name for it, such as "human" or "thinking", mapped)."""
    raw_role = message.get("role")
    if not isinstance(raw_role, str) or raw_role.lower() not in _ROLES:
        raise ValidationError(f"unknown role {raw_role!r}: use user, assistant, system, tool, reasoning or tool_call")
    return _ROLES[raw_role.lower()]


def _message_entries(message: Mapping[str, Any], ordinal: int) -> list[Entry]:
    role = role_of(message)
    parts = _parts(role, message)
    check_text([text for _, text in parts], "the message text")
    provider_id = next((v for f in _ID_FIELDS if isinstance(v := message.get(f), str) and v.strip()), None)
    created_at = _time(message.get("timestamp", message.get("created_at")))
    digest = hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()[:16]
    if provider_id is not None:
        base = f"id:{provider_id}"
    elif created_at is not None:
        base = f"at:{role}:{created_at.isoformat()}:{digest}"
    else:
        base = f"pos:{role}:{ordinal}:{digest}"
    usage = given if isinstance(given := message.get("usage"), Mapping) else {}
    tokens_in = _int(message.get("input_tokens", usage.get("input", usage.get("prompt_tokens"))))
    tokens_out = _int(message.get("output_tokens", usage.get("output", usage.get("completion_tokens"))))
    model = message.get("model") if isinstance(message.get("model"), str) else None
    out = []
    for n, (part_role, text) in enumerate(parts):
        text = _fit(text)
        if not text:
            continue
        response = part_role == "assistant"
        out.append(Entry(
            role=part_role, text=text, dedup_key=base if len(parts) == 1 else f"{base}:{n}", ordinal=ordinal,
            provider_id=provider_id, created_at=created_at, model=model if part_role in ("assistant", "reasoning") else None,
            input_tokens=tokens_in if response else None, output_tokens=tokens_out if response else None,
            summary=summary(text) if response and len(text) > SUMMARY_FROM else None,
        ))
    return out


def _parts(role: str, message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each part: a user's words without the envelopes and our own injected blocks."""
    content = message.get("content")
    out: list[tuple[str, str]] = []
    if isinstance(content, str):
        out.append((role, content))
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                out.append((role, part["text"]))
            elif kind in ("thinking", "reasoning") and isinstance(part.get("thinking", part.get("text")), str):
                out.append(("reasoning", part.get("thinking", part.get("text"))))
            elif kind in ("toolCall", "tool_use", "tool_call"):
                out.append(("tool_call", _call_text(part)))
    elif content is not None:
        raise ValidationError("content must be a string or a list of parts")
    for call in message.get("tool_calls") or []:  # OpenAI's assistant tool calls
        if isinstance(call, Mapping):
            out.append(("tool_call", _call_text(inner if isinstance(inner := call.get("function"), Mapping) else call)))
    if role == "tool_result":
        out = [("tool_result", text) for _, text in out]
    if role == "user":
        out = [(r, strip_envelope(t) if r == "user" else t) for r, t in out]
    return [(r, t.strip()) for r, t in out if t.strip()]


def _call_text(call: Mapping[str, Any]) -> str:
    name = call.get("name") if isinstance(call.get("name"), str) else "tool"
    args = call.get("arguments", call.get("input", {}))
    return f"{name}({args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True)})"


def _fit(text: str) -> str:
    """A part longer than a memory may be keeps its head (a tool dumping a file must not fail the turn)."""
    if len(text) <= MAX_CONTENT_CHARS:
        return text
    note = f"\n[… {len(text) - MAX_CONTENT_CHARS + 100} characters cut]"
    return text[: MAX_CONTENT_CHARS - 100] + note


def summary(text: str) -> str:
    """The first sentences of a long response, up to `SUMMARY_CHARS` (extractive: no model needed)."""
    flat = re.sub(r"\s+", " ", text).strip()
    out = ""
    for sentence in re.split(r"(?<=[.!?。！？])\s+", flat):
        if out and len(out) + len(sentence) + 1 > SUMMARY_CHARS:
            break
        out = f"{out} {sentence}".strip()
    return out if len(out) <= SUMMARY_CHARS else out[: SUMMARY_CHARS - 1].rstrip() + "…"


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError("timestamp must be a time, not a boolean")
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value  # ms (JavaScript's Date.now()) or seconds
        try:
            return datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValidationError(f"timestamp {value!r} is out of range") from None
    if isinstance(value, str):
        try:
            return as_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            raise ValidationError(f"timestamp {value[:40]!r} is not an ISO 8601 time") from None
    if isinstance(value, datetime):
        return as_utc(value)
    raise ValidationError(f"timestamp must be epoch milliseconds or ISO 8601, got {type(value).__name__}")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31 else None
