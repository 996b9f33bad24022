"""Checks on what callers hand the engine, and the one place an item becomes a `MemoryRecord`.

Every error is a `ValidationError` (or `ScopeError`) that says what is wrong in the caller's
words: a store must never be the first to notice bad input.
"""

from __future__ import annotations

import json
import numbers
import os
import re
from datetime import datetime
from typing import Any, Mapping, Sequence, get_args

from pydantic import ValidationError as PydanticValidationError

from .._time import checked_utc, parse_when
from ..config import Config
from ..conversations.text import MAX_CONTENT_CHARS, check_text
from ..errors import ScopeError, ValidationError, WritesDisabledError, pydantic_message
from ..models import MemoryRecord, NewMemory, Visibility
from ..scopes import MAX_ID_CHARS, Caller, new_memory_owner, new_visibility

MAX_METADATA_CHARS = 100_000  # as JSON: room for any annotation, not for a second copy of a document
MAX_METADATA_DEPTH = 64  # objects and arrays inside each other: far under what JSON encoders stop at (255)
# a memory's short text fields: labels, not a second content (a session id as long as the record's)
MAX_FIELD_CHARS = {"title": 1_000, "session_id": MAX_ID_CHARS, "source_type": MAX_ID_CHARS, "source_id": 1_000}


def require_writes(config: Config) -> None:
    if not config.writes.enabled:
        raise WritesDisabledError("writes are disabled (writes.enabled = false); this store is read-only")


def new_record(
    item: NewMemory | Mapping[str, Any], now: datetime, caller: Caller, config: Config, where: str,
    fresh_id: str, embedding_model: str | None = None,
) -> MemoryRecord:
    """Validate one item into a record (with `fresh_id` unless it names its own); errors start with
    `where` ("item 3: ", "line 7: "). The item's owner defaults to the caller, and its scope must be
    one the caller may write (`config`: its categories and access policy)."""
    try:
        return _build_record(item, now, caller, config, fresh_id, embedding_model)
    except PydanticValidationError as exc:
        raise ValidationError(f"{where}{pydantic_message(exc, NewMemory)}") from None
    except (ValidationError, ScopeError) as exc:
        raise type(exc)(f"{where}{exc}") from None


def _build_record(
    item: NewMemory | Mapping[str, Any], now: datetime, caller: Caller, config: Config, fresh_id: str,
    embedding_model: str | None,
) -> MemoryRecord:
    if isinstance(item, NewMemory):
        new = item
    elif type(item) is dict or isinstance(item, Mapping):
        new = NewMemory.model_validate(item if type(item) is dict else dict(item))
    else:
        raise ValidationError(f"expected a mapping or a NewMemory, got {type(item).__name__}")
    content = check_content(new.content)
    session_id = new.session_id if new.session_id is not None else caller.session_id  # the caller's is checked too
    for name, value in (("title", new.title), ("session_id", session_id), ("source_type", new.source_type),
                        ("source_id", new.source_id)):
        if value is not None:
            check_field(value, name)
    scope, uid, aid = new_memory_owner(caller, new.user_id, new.agent_id, new.scope, access=config.access)
    category = check_category("other" if new.category is None else new.category, config.categories)
    created = check_when(new.created_at, "created_at") if new.created_at else now
    valid_from = check_when(new.valid_from, "valid_from") if new.valid_from else created
    valid_to = check_when(new.valid_to, "valid_to") if new.valid_to else None
    if valid_to is not None and valid_to <= valid_from:
        raise ValidationError(f"valid_to ({valid_to.isoformat()}) must be after valid_from ({valid_from.isoformat()})")
    return MemoryRecord(
        id=check_new_id(new.id) if new.id else fresh_id,
        content=content,
        title=new.title,
        category=category,
        tags=check_tags(new.tags),
        importance=0.7 if new.importance is None else new.importance,
        confidence=1.0 if new.confidence is None else new.confidence,
        scope=scope,
        user_id=uid,
        agent_id=aid,
        session_id=session_id,
        visibility=new_visibility(caller, aid, category, new.visibility, access=config.access,
                                  default=config.extraction.visibility.default, rules=config.extraction.visibility.rules),
        source_type=new.source_type,
        source_id=new.source_id,
        metadata=check_metadata(new.metadata) if new.metadata else {},
        created_at=created,
        updated_at=check_when(new.updated_at, "updated_at") if new.updated_at else max(created, now) if new.id else now,
        deleted_at=check_when(new.deleted_at, "deleted_at") if new.deleted_at else None,
        expires_at=check_when(new.expires_at, "expires_at") if new.expires_at else None,
        embedding_model=embedding_model,
        valid_from=valid_from,
        valid_to=valid_to,
        superseded_by=check_new_id(new.superseded_by) if new.superseded_by else None,
        supersedes=check_new_id(new.supersedes) if new.supersedes else None,
    )


def new_ids(n: int) -> list[str]:
    """`n` random (version 4) UUIDs as text: one urandom call, 6x faster than `str(uuid.uuid4())` each.

    One call's ids share their first byte, so a batch writes to one 256th of each index on ids
    (memories.id, history.memory_id) instead of dirtying a page per id: at 100k memories, 1,000
    adds wrote 2,600 pages and now write 1,080. Each id keeps 114 random bits, and 8-character
    prefixes stay distinct within a batch (24 random bits: 0.03 expected clashes in 1,000 ids)."""
    hexes = os.urandom(16 * n).hex()
    lead = hexes[:2]
    return [
        f"{lead}{h[2:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"
        for h in (hexes[i : i + 32] for i in range(0, 32 * n, 32))
    ]


def check_content(content: Any) -> str:
    if not isinstance(content, str) or not content.strip():
        raise ValidationError("content must not be empty")
    check_text(content, "content")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(
            f"content is {len(content)} characters; the limit is {MAX_CONTENT_CHARS}. A longer text is a file: save it "
            "and ingest it (`clawrecall files add PATH`, `mem.files.ingest(path)`, POST /v1/files), which cuts it "
            "into chunks that search finds (`--sources chunk`)"
        )
    return content.strip()


def check_category(category: str, categories: Sequence[str]) -> str:
    if category not in categories:
        raise ValidationError(f"unknown category {category!r}: use one of {', '.join(categories)}")
    return category


def check_tags(tags: list[str]) -> list[str]:
    if not tags:
        return []
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip() or len(tag) > 100:
            raise ValidationError(f"invalid tag {tag!r}: tags are non-empty strings of at most 100 characters")
        check_text(tag, "a tag")
    return list(dict.fromkeys(t.strip() for t in tags))


def check_new_id(memory_id: str) -> str:
    if not _is_uuid(memory_id.lower()):
        raise ValidationError(f"invalid memory id {memory_id!r}: ids are UUIDs")
    return memory_id.lower()


_UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _is_uuid(text: str) -> bool:
    """A UUID in its canonical text (what `str(uuid.UUID(text)) == text` accepts, a third of the time: an
    import checks one to three ids a memory)."""
    return _UUID_TEXT.fullmatch(text) is not None


def check_int(value: Any, name: str, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValidationError(f"{name} must be between {lo:,} and {hi:,}, got {value!r}")


def one_of(value: Any, choices: Any, name: str) -> Any:
    """A value a `Literal` type names (a search's mode, a list's order), else a ValidationError naming them."""
    allowed = get_args(choices)
    if value not in allowed:
        raise ValidationError(f"unknown {name} {value!r}: use {', '.join(allowed[:-1])} or {allowed[-1]}")
    return value


def check_share(value: Any, name: str) -> float:
    """An importance, confidence or score: a real number from 0 to 1, NaN and bool excluded (a numpy
    float is a number too: scores often come from one)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not 0 <= float(value) <= 1:
        raise ValidationError(f"{name} must be between 0 and 1, got {value!r}")
    return float(value)


def check_when(value: Any, name: str) -> datetime:
    """A caller's time in UTC: a datetime (naive = UTC) or ISO-8601 text, within what UTC can hold."""
    try:
        if isinstance(value, str):
            return parse_when(value)
        if isinstance(value, datetime):
            return checked_utc(value)
    except ValueError as exc:
        raise ValidationError(f"{name}: {exc}") from None
    raise ValidationError(f"{name} must be a datetime or ISO-8601 text, got {type(value).__name__}")


def check_visibility(value: str) -> Visibility:
    try:
        return Visibility(value)
    except ValueError:
        raise ValidationError(f"unknown visibility {value!r}: use private, shared or secret") from None


_STRICT_JSON = json.JSONEncoder(allow_nan=False)  # one encoder: `json.dumps` with an option builds one a call


def check_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """JSON of bounded size and depth, with text any store takes. The JSON text answers most of it: every
    object and array in it opens with a bracket, so one with fewer brackets than the depth limit is not
    that deep; and (ASCII-escaped) it shows a NUL, a lone surrogate or any non-ASCII character as a `\\u`
    escape, so text without one has nothing `check_text` refuses. The walks run only when needed."""
    try:
        text = _STRICT_JSON.encode(metadata)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"metadata must be JSON-serialisable: {exc}") from None
    except RecursionError:
        raise ValidationError("metadata is nested too deeply") from None
    if len(text) > MAX_METADATA_CHARS:
        raise ValidationError(f"metadata is {len(text)} characters as JSON; the limit is {MAX_METADATA_CHARS}")
    if text.count("{") + text.count("[") > MAX_METADATA_DEPTH and (depth := _depth(metadata)) > MAX_METADATA_DEPTH:
        raise ValidationError(f"metadata is nested {depth} levels deep; the limit is {MAX_METADATA_DEPTH}")
    if "\\u" in text:
        check_text(metadata, "metadata")
    return metadata


def _depth(value: Any) -> int:
    """How many objects and arrays lie inside each other, the outermost counted (no recursion)."""
    deepest, level = 0, [(value, 1)]
    while level:
        item, depth = level.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else None
        if children is not None:
            deepest = max(deepest, depth)
            level.extend((child, depth + 1) for child in children)
    return deepest


def check_field(value: Any, name: str) -> str:
    """One of a memory's short text fields (`MAX_FIELD_CHARS`)."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
    check_text(value, name)
    if len(value) > MAX_FIELD_CHARS[name]:
        raise ValidationError(f"{name} is {len(value)} characters; the limit is {MAX_FIELD_CHARS[name]}")
    return value


CHAT_ROLES = ("user", "assistant", "system")
_MESSAGE_KEYS = {"role", "content", "name"}


def chat_turns(messages: Sequence[Any]) -> list[tuple[str, str]]:
    """A chat (`[{"role", "content"}]`, as mem0 and OpenAI spell it) → `(role, text)` of the turns worth
    remembering: user and assistant ones. Without an extraction model each turn is stored as said;
    a system prompt is an instruction, not something the user said, and is left out."""
    turns = []
    for n, message in enumerate(messages, start=1):
        if not isinstance(message, Mapping):
            raise ValidationError(f"message {n}: expected an object with role and content, got {type(message).__name__}")
        if unknown := set(message) - _MESSAGE_KEYS:
            raise ValidationError(f"message {n}: unknown field(s) {', '.join(sorted(map(str, unknown)))}: use role and content")
        role, text = message.get("role"), message.get("content")
        if role not in CHAT_ROLES:
            raise ValidationError(f"message {n}: role must be one of {', '.join(CHAT_ROLES)}, got {role!r}")
        if not isinstance(text, str):
            raise ValidationError(f"message {n}: content must be text, got {type(text).__name__}")
        if role != "system":
            turns.append((role, text))
    return turns
