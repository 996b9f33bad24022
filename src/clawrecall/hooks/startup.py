"""Startup identity (seed 001): the `startup` table, injected on a session's first turn within a per-model budget.

Modes: `always` (every turn), `first-run` (once per session), `digest` (once, then again when the
injected text changes or `ttl_s` has passed). A request whose `messages` is an empty list starts
a fresh session (OpenClaw sends no history on the first turn and after `/new`).

Every other turn of a session is a reinforcement turn: it gets the entries marked `reinforce`
alone (ShadowDB's rules that must not fade, which its reinforced rows let through the suppression
of repeats), in the same budget, so standing rules stay near the end of a long context.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from typing_extensions import TypedDict

from ..config import StartupHookConfig
from ..conversations.text import STANDING_TAG, STARTUP_CLOSE, STARTUP_OPEN, sanitize_for_context, untrusted
from ..models import MemoryRecord, StartupEntry
from ..scopes import Caller
from .context import read_scope, request_messages, request_str, session_key

if TYPE_CHECKING:
    from ..engine import Memory

SEPARATOR = "\n\n"
STANDING_MAX_CHARS = 180  # a standing fact's line, as a recall line's (`hooks.recall.per_item_max_chars`)
# Same key in several scopes: the caller's own scope wins over a shared one.
_SCOPE_RANK = {"global": 0, "project": 1, "custom": 1, "agent": 2, "user": 3}
_monotonic = time.monotonic  # the `ttl_s` clock


@dataclass
class _Session:
    injected_at: float | None = None  # _monotonic() of the last injection
    digest: str | None = None


class StartupAnswer(TypedDict):
    prependContext: str | None
    entries: list[str]
    reason: str


def startup_context(mem: "Memory", request: Mapping[str, Any], caller: Caller) -> StartupAnswer:
    """Request `{model?, messages?}`; answer `{prependContext: "init:\\n…\\n/init" | None, entries: [keys], reason}`.

    `reason`: why a block is injected (`first_turn`, `always`, `changed`, `ttl_expired`, `no_session`,
    `reinforce`) or why none is (`disabled`, `no_entries`, `over_budget`, `already_injected`)."""
    cfg = mem.config.hooks.startup
    model = request_str(request, "model")
    messages = request_messages(request)
    if not cfg.enabled:
        return _answer(None, [], "disabled")
    entries = _effective(mem.startup.list(caller=caller, scope=read_scope(caller)))
    standing = _standing(mem, caller, cfg.standing)
    if not entries and not standing:
        return _answer(None, [], "no_entries")
    body, keys = assemble(entries, model_budget(cfg, model), standing)
    if not keys:
        return _answer(None, [], "over_budget")
    # of what the block says: its untrusted-data markers carry a code drawn anew each time
    said = {e.key: e.content for e in entries} | {f"memory:{m.id}": m.content for m in standing}
    digest = hashlib.sha256("\0".join(f"{k}\0{said[k]}" for k in keys).encode()).hexdigest()
    key = session_key(caller)
    if key is None:
        reason: str | None = "no_session"  # nothing can be remembered, so every turn is a first turn
    else:
        session = mem.upkeep.runtime.sessions("startup", _Session).get(key, reset=messages == [])
        reason = _due(cfg, session, digest)
        if reason is not None:
            session.injected_at, session.digest = _monotonic(), digest
    if reason is None:
        body, keys = assemble([e for e in entries if e.reinforce], model_budget(cfg, model))
        reason = "reinforce" if keys else None
    if reason is None:
        return _answer(None, [], "already_injected")
    return _answer(f"{STARTUP_OPEN}\n{body}\n{STARTUP_CLOSE}", keys, reason)


def _due(cfg: StartupHookConfig, session: _Session, digest: str) -> str | None:
    """Why this turn injects (`always`, `first_turn`, `changed`, `ttl_expired`), or None."""
    if cfg.mode == "always":
        return "always"
    if session.injected_at is None:
        return "first_turn"
    if cfg.mode == "digest":
        if session.digest != digest:
            return "changed"
        if _monotonic() - session.injected_at >= cfg.ttl_s:
            return "ttl_expired"
    return None


def model_budget(cfg: StartupHookConfig, model: str | None) -> int:
    """`max_chars_by_model`: the first key found in the model name (case-insensitive) wins; else `max_chars`."""
    if model:
        name = model.lower()
        for fragment, budget in cfg.max_chars_by_model.items():
            if fragment.lower() in name:
                return budget
    return cfg.max_chars


def assemble(
    entries: list[StartupEntry], budget: int, standing: Sequence[MemoryRecord] = ()
) -> tuple[str, list[str]]:
    """Whole entries by priority until the next does not fit; only a P0 entry may be cut to fill what is left.
    Then, in what is left, the standing facts that fit whole, as untrusted memory text (`memory:<id>` keys).

    A lower-priority entry never appears when a higher one was left out.
    """
    parts: list[str] = []
    keys: list[str] = []
    used = 0
    for entry in entries:
        room = budget - used - (len(SEPARATOR) if parts else 0)
        content = _contained(entry.content)
        whole = len(content) <= room
        if not whole and (entry.priority != 0 or room < 2):
            break
        text = content if whole else content[: room - 1].rstrip() + "…"
        parts.append(text)
        keys.append(entry.key)
        used += len(text) + (len(SEPARATOR) if len(parts) > 1 else 0)
        if not whole:
            break
    if len(keys) == len(entries):  # nothing of a higher rank was left out
        facts, ids = _fitting(standing, budget - used - (len(SEPARATOR) if parts else 0))
        if facts:
            parts.append(facts)
            keys += [f"memory:{i}" for i in ids]
    return SEPARATOR.join(parts), keys


def _standing(mem: "Memory", caller: Caller, most: int) -> list[MemoryRecord]:
    """The caller's standing facts (`STANDING_TAG`) that another session stated: this session's are in its
    transcript already. Newest first."""
    if most == 0 or caller.user_id is None:
        return []
    # a few more than `most`: this session's own are left out after
    found = mem.list(caller=caller, scope=read_scope(caller), tags=[STANDING_TAG], limit=most + 10)
    return [m for m in found if caller.session_id is None or m.session_id != caller.session_id][:most]


def _fitting(standing: Sequence[MemoryRecord], room: int) -> tuple[str, list[str]]:
    """The standing facts whole, as many as fit in `room` with their untrusted-data markers, as one part."""
    lines = [f"- [{m.category}] {sanitize_for_context(m.content, STANDING_MAX_CHARS)}" for m in standing]
    while lines:
        text = "Standing facts the user gave earlier:\n" + untrusted(lines)
        if len(text) <= room:
            return text, [m.id for m in standing[: len(lines)]]
        lines.pop()
    return "", []


_BLOCK_LINE = re.compile(rf"^([ \t]*)({re.escape(STARTUP_OPEN)}|{re.escape(STARTUP_CLOSE)})([ \t]*)$", re.MULTILINE)


def _contained(content: str) -> str:
    """An entry as its block holds it. Entries are instructions (whoever may write their scope set them), so
    they keep their lines, but one cannot end the block (a line `/init`) or form a tag (`</relevant-memories>`):
    the text after it would read as the user's, or as another block."""
    return _BLOCK_LINE.sub(r"\1(\2)\3", content).replace("<", "‹").replace(">", "›")


def _effective(entries: list[StartupEntry]) -> list[StartupEntry]:
    """One entry per key (the most specific scope's), ordered by priority then key."""
    best: dict[str, StartupEntry] = {}
    for entry in entries:
        current = best.get(entry.key)
        if current is None or _rank(entry) > _rank(current):
            best[entry.key] = entry
    return sorted(best.values(), key=lambda e: (e.priority, e.key))


def _rank(entry: StartupEntry) -> int:
    return _SCOPE_RANK.get(entry.scope.partition(":")[0], 1)


def _answer(prepend: str | None, keys: list[str], reason: str) -> StartupAnswer:
    return {"prependContext": prepend, "entries": keys, "reason": reason}
