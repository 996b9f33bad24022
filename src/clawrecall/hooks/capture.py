"""`agent_end`: keep what a finished turn said that is worth remembering — rule-based, in the background.

The rules (`conversations.text.keepable`, seeds 000/002's `shouldCapture` and `detectCategory` in
English, Russian, Czech and Chinese) keep a message's statements, never its questions or small talk.
With an LLM configured the rules write nothing for a recorded turn: the extraction of the closed
segment is the one writer of facts (docs/extraction.md). The hook answers at once and writes on one
background thread: capture that blocked the turn held the session lock and dropped Telegram
deliveries (memory-lancedb-pro #260).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Mapping

from typing_extensions import TypedDict

from ..config import CaptureHookConfig
from ..conversations.text import STANDING_TAG, check_text, detect_category, is_standing, keepable, strip_envelope
from ..conversations.transcript import check_message
from ..errors import ValidationError
from ..scopes import Caller, may_write
from .context import message_text, request_messages, request_str

if TYPE_CHECKING:
    from ..engine import Memory

log = logging.getLogger("clawrecall.hooks")

# -- the hook --------------------------------------------------------------------------------------
MAX_PENDING = 256  # captures queued on one store; past it a turn's captures are dropped rather than block


class Candidate(TypedDict):
    text: str
    category: str


class Captured(TypedDict):
    queued: int
    candidates: list[Candidate]
    skipped: str | None


class CaptureAnswer(Captured):
    recorded: int


def agent_end(mem: "Memory", request: Mapping[str, Any], caller: Caller) -> CaptureAnswer:
    """Request `{messages, success?, channel?}`: the session's transcript (all of it, or this turn's).

    Every message not yet recorded is stored before the answer (`mem.conversations.log`: durable,
    once each); then this turn's capture candidates are queued. Answers `{recorded, queued,
    candidates: [{text, category}], skipped}`."""
    messages = request_messages(request) or []
    success = request.get("success")
    if success is not None and not isinstance(success, bool):
        raise ValidationError("success must be a boolean")
    channel = request_str(request, "channel")

    for message in _current_turn(messages):  # the finished turn must be one the store can keep
        try:
            check_message(message)
        except ValidationError as exc:
            raise ValidationError(f"a message of this turn: {exc}") from None
        check_text(message_text(message), "a message of this turn")
    recorded = _record(mem, messages, caller, channel)
    answer = _capture(mem, messages, caller, success)
    return {"recorded": recorded, **answer}


def _recorded(mem: "Memory", caller: Caller) -> bool:
    """Whether this caller's turns go to the conversation record (a turn without a session, user or agent, or
    with recording off, does not: an unidentified turn's record would be every user's)."""
    return bool(mem.config.conversations.record and mem.config.writes.enabled and caller.session_id
                and caller.identified and may_write(caller, access=mem.config.access))


def _record(mem: "Memory", messages: list[Mapping[str, Any]], caller: Caller, channel: str | None) -> int:
    """Store the transcript's new messages, if the caller's turns are recorded. An earlier turn's message the
    store refused then is left out, not refused again."""
    if not (messages and _recorded(mem, caller)):
        return 0
    return mem.conversations.log(messages, caller=caller, channel=channel, skip_bad=True).stored


def _capture(mem: "Memory", messages: list[Mapping[str, Any]], caller: Caller, success: bool | None) -> Captured:
    cfg = mem.config.hooks.capture
    if not cfg.enabled:
        return _answer([], "disabled")
    if success is False:
        return _answer([], "failed_turn")
    if not mem.config.writes.enabled:
        return _answer([], "writes_disabled")
    if not may_write(caller, access=mem.config.access):
        return _answer([], "scope_denied")
    if mem.upkeep.extracting and _recorded(mem, caller):
        return _answer([], "extraction")  # one writer of facts: the model, once the turn's segment closes
    candidates = _candidates(messages, cfg, mem.config.categories)
    if not candidates:
        return _answer([], "no_candidates")
    writes = mem.upkeep.runtime.queue("capture", max_pending=MAX_PENDING)  # one thread: writes land in turn order
    if writes.submit(_write, mem, candidates, caller, cfg.importance) is None:
        log.warning("capture queue full; %d candidate(s) dropped", len(candidates))
        return _answer(candidates, "queue_full", queued=0)
    return _answer(candidates, None, queued=len(candidates))


def _candidates(
    messages: list[Mapping[str, Any]], cfg: CaptureHookConfig, categories: list[str]
) -> list[dict[str, Any]]:
    roles = {"user", "assistant"} if cfg.capture_assistant else {"user"}
    out: list[dict[str, Any]] = []
    for message in _current_turn(messages):
        if len(out) == cfg.max_per_turn:
            break
        role = message.get("role")
        if role not in roles:
            continue
        text = strip_envelope(message_text(message))
        # checked before the answer: a capture that is acknowledged must be one the store can keep
        check_text(text, "a message of this turn")
        kept = keepable(text, cfg)
        if kept is not None:
            category = detect_category(kept)
            out.append({"text": kept, "category": category if category in categories else "other", "role": role,
                        "tags": [STANDING_TAG] if is_standing(kept) else []})
    return out


def _current_turn(messages: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """This turn's messages: from the last run of user messages on.

    OpenClaw's `agent_end` carries the whole session transcript; without this every turn would
    re-examine (and re-embed) all earlier messages.
    """
    start = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None)
    if start is None:
        return list(messages)
    while start > 0 and messages[start - 1].get("role") == "user":
        start -= 1
    return list(messages[start:])


def _write(mem: "Memory", candidates: list[dict[str, Any]], caller: Caller, importance: float) -> None:
    for candidate in candidates:
        try:
            result = mem.add(
                candidate["text"], caller=caller, category=candidate["category"], importance=importance,
                tags=candidate["tags"], source_type="capture", metadata={"role": candidate["role"]}, dedup=True,
                embed_later=True,  # acknowledged as queued: kept while the provider is down, embedded later
            )
            log.debug("capture %s: %s", result.action, result.id)
        except Exception:  # one bad write must not lose the others, nor kill the writer thread
            log.exception("capture write failed")


def _answer(candidates: list[dict[str, Any]], skipped: str | None, *, queued: int = 0) -> Captured:
    shown: list[Candidate] = [{"text": c["text"], "category": c["category"]} for c in candidates]
    return {"queued": queued, "candidates": shown, "skipped": skipped}
