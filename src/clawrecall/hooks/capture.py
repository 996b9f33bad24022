"""`agent_end`: keep what a finished turn said that is worth remembering — rule-based, in the background.

The rules are seeds 000/002's `shouldCapture` and `detectCategory` in English, Russian, Czech and
Chinese. The hook answers at once and writes on one background thread: capture that blocked the
turn held the session lock and dropped Telegram deliveries (memory-lancedb-pro #260).
LLM extraction will plug in beside `should_capture` later.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Mapping

from typing_extensions import TypedDict

from ..config import CaptureHookConfig
from ..engine._validate import check_text
from ..errors import ValidationError
from ..retrieval.noise import is_noise
from ..scopes import Caller, may_write
from .context import message_text, request_messages, request_str
from ..storage.text import has_cjk
from .text import RECALL_OPEN, STARTUP_CLOSE, STARTUP_OPEN, strip_envelope

if TYPE_CHECKING:
    from ..engine import Memory

log = logging.getLogger("clawrecall.hooks")

# -- triggers: a text is captured only if one matches ---------------------------------------------
_TRIGGERS = re.compile(
    "|".join((
        # English
        r"\b(?:remember|don'?t forget)\b",
        r"\bprefer",
        r"\b(?:we )?decided\b|\bwe'?ll use\b|\b(?:we )?will use\b|\bswitch(?:ed)? to\b|\bmigrat(?:e|ed) to\b"
        r"|\bgoing forward\b|\bfrom now on\b",
        r"\bmy\s+\w+\s+is\b|\bis\s+my\b|\bis called\b",
        r"\bi\s+(?:like|prefer|hate|love|want|need|care)\b",
        r"\b(?:always|never|important)\b",
        # contact details, any language
        r"\+\d{10,}",
        r"[\w.-]+@[\w.-]+\.\w+",
        # Russian
        r"запомни",
        r"предпочитаю|люблю|ненавижу|хочу|нужно",
        r"решили|будем использовать",
        r"\bмо[йяеё]\s+\w+\s+(?:это|—|-)\s|\bэто\s+мо[йяеё]\b",
        r"\bя\s+(?:люблю|предпочитаю|ненавижу|хочу|нуждаюсь)\b",
        r"всегда|никогда|важно|важная информация",
        # Czech
        r"zapamatuj|pamatuj",
        r"preferuji|radši|nechci",
        r"rozhodli jsme|budeme používat",
        r"\b(?:můj|moje|má)\s+\w+\s+je\b|\bje\s+(?:můj|moje|má)\b|\bjmenuj[ei] se\b|(?<!jak )\bse jmenuj[ei]\b",
        r"\b(?:vždy|vždycky|nikdy|důležité)\b",
        # Chinese (simplified and traditional)
        r"记住|記住|记一下|記一下|别忘了|別忘了|备注|備註",
        r"偏好|喜好|喜欢|喜歡|讨厌|討厭|爱用|愛用|习惯|習慣",
        r"决定|決定|选择了|選擇了|改用|换成|換成|以后用|以後用",
        r"我的\S{1,12}是|叫我|称呼|稱呼",
        r"总是|總是|从不|從不|一直|每次都|老是",
        r"重要|关键|關鍵|千万别|千萬別",
        r"帮我记|幫我記|笔记|筆記|存档|存檔|重点|重點|原则|原則|底线|底線",
    )),
    re.IGNORECASE,
)

# -- rejects: checked before the triggers -----------------------------------------------------------
_INJECTION = re.compile(
    "|".join((
        r"\bignore\s+(?:all|any|previous|above|prior)\s+(?:\w+\s+)?(?:instructions|rules|prompts?)\b",
        r"\bsystem prompt\b",
        r"\byou are now\b",
        r"\bdisregard\s+(?:all|any|previous|prior|the above|above|your)\b",
        r"<\s*/?\s*(?:system|assistant|developer|tool|function|relevant-memories)\b",
        r"игнорируй\w*\s+(?:все\s+|предыдущие\s+)*инструкци|системн\w+\s+промпт|ты\s+теперь\b",
        r"ignoruj\w*\s+(?:všechny\s+|předchozí\s+)*instrukce",
        r"忽略(?:之前|以上|所有|上面)的?(?:指令|指示|提示)|系统提示|系統提示|你现在是|你現在是",
    )),
    re.IGNORECASE,
)
# Memory management chatter and the assistant's "saved it" replies: about memory, not memories.
_EXCLUDE = re.compile(
    "|".join((
        r"\bmemory_(?:store|recall|forget|update|search|get|list|stats|delete)\b",
        r"\bclawrecall\s+(?:add|search|list|get|delete|forget|purge|import|export|stats|startup)\b",
        r"\b(?:delete|remove|forget|purge|cleanup|clean up|clear)\b.*\b(?:memory|memories|entry|entries)\b",
        r"\b(?:memory|memories)\b.*\b(?:delete|remove|forget|purge|cleanup|clean up|clear)\b",
        r"\bhow do i\b.*\b(?:delete|remove|forget|purge|cleanup|clear)\b",
        r"(?:删除|刪除|清理|清除).{0,12}(?:记忆|記憶|memory)",
        r"запомнил|сохраняю|\bsaved\b",
        r"untrusted metadata",
    )),
    re.IGNORECASE | re.DOTALL,
)
_EMOJI = re.compile(r"[\U0001F300-\U0001FAFF\u2600-\u27BF]")

# -- categories (seed 000's detectCategory, first match wins) ----------------------------------------
_CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("preference", re.compile(
        r"\b(?:prefer\w*|like|likes|love|loves|hate|hates|want|wants)\b|radši|preferuj|nechci|líbí"
        r"|предпочита|люблю|ненавиж|хочу|нравится|偏好|喜好|喜欢|喜歡|讨厌|討厭|爱用|愛用|习惯|習慣",
        re.IGNORECASE,
    )),
    ("decision", re.compile(
        r"\b(?:decided|we'?ll use|will use|switch(?:ed)? to|migrat(?:e|ed) to|going forward|from now on)\b"
        r"|rozhodl|budeme|решили|решено|будем использовать|决定|決定|选择了|選擇了|改用|换成|換成|以后用|以後用",
        re.IGNORECASE,
    )),
    ("entity", re.compile(
        r"\+\d{10,}|[\w.-]+@[\w.-]+\.\w+|\bis called\b|\bmy name is\b|\bnamed\b|jmenuj[ei] se|se jmenuj[ei]|меня зовут|зовут"
        r"|называется|我叫|叫我|名字|称呼|稱呼",
        re.IGNORECASE,
    )),
    ("fact", re.compile(r"\b(?:is|are|has|have|was|were|je|jsou|má|mají|это|есть|является)\b|是|有", re.IGNORECASE)),
)


def should_capture(text: str, config: CaptureHookConfig | None = None) -> bool:
    """Whether a (cleaned) message is worth keeping: a trigger matches and no reject rule does."""
    cfg = config or CaptureHookConfig()
    s = text.strip()
    min_chars = cfg.min_chars_cjk if has_cjk(s) else cfg.min_chars
    if not min_chars <= len(s) <= cfg.max_chars:
        return False
    if RECALL_OPEN in s or (s.startswith(STARTUP_OPEN) and STARTUP_CLOSE in s):
        return False
    if (s.startswith("<") and "</" in s) or ("**" in s and "\n-" in s):
        return False
    if len(_EMOJI.findall(s)) > 3 or _INJECTION.search(s) or _EXCLUDE.search(s):
        return False
    if len(s) >= 5 and is_noise(s):  # meta-questions and denials; its own length floor would undo a lower min_chars
        return False
    return _TRIGGERS.search(s) is not None


def detect_category(text: str) -> str:
    """preference, decision, entity, fact or other — all five are clawrecall categories too."""
    for category, pattern in _CATEGORIES:
        if pattern.search(text):
            return category
    return "other"


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
    cfg = mem.config.hooks.capture
    messages = request_messages(request) or []
    success = request.get("success")
    if success is not None and not isinstance(success, bool):
        raise ValidationError("success must be a boolean")
    channel = request_str(request, "channel")
    from ..conversations.transcript import check_message  # here: the transcript module reads this package's text rules

    for message in _current_turn(messages):  # the finished turn must be one the store can keep
        try:
            check_message(message)
        except ValidationError as exc:
            raise ValidationError(f"a message of this turn: {exc}") from None
        check_text(message_text(message), "a message of this turn")
    recorded = _record(mem, messages, caller, channel)
    answer = _capture(mem, messages, caller, success)
    return {"recorded": recorded, **answer}


def _record(mem: "Memory", messages: list[Mapping[str, Any]], caller: Caller, channel: str | None) -> int:
    """Store the transcript's new messages (a turn without a session, user or agent, or with recording off,
    stores none: an unidentified turn's record would be every user's). An earlier turn's message the store
    refused then is left out, not refused again."""
    if not (mem.config.conversations.record and mem.config.writes.enabled and caller.session_id and messages):
        return 0
    if not caller.identified or not may_write(caller, access=mem.config.access):
        return 0
    return mem.conversations.log(messages, caller=caller, channel=channel, skip_bad=True)["stored"]


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
    candidates = _candidates(messages, cfg, mem.config.categories)
    if not candidates:
        return _answer([], "no_candidates")
    writes = mem.runtime.queue("capture", max_pending=MAX_PENDING)  # one thread: writes land in turn order
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
        if should_capture(text, cfg):
            category = detect_category(text)
            out.append({"text": text, "category": category if category in categories else "other", "role": role})
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
                source_type="capture", metadata={"role": candidate["role"]}, dedup=True,
                embed_later=True,  # acknowledged as queued: kept while the provider is down, embedded later
            )
            log.debug("capture %s: %s", result.action, result.id)
        except Exception:  # one bad write must not lose the others, nor kill the writer thread
            log.exception("capture write failed")


def _answer(candidates: list[dict[str, Any]], skipped: str | None, *, queued: int = 0) -> Captured:
    shown: list[Candidate] = [{"text": c["text"], "category": c["category"]} for c in candidates]
    return {"queued": queued, "candidates": shown, "skipped": skipped}
