"""When recall is pointless: the messages a search would be wasted on (seed 002's adaptive retrieval).

The message's own words are what count: `strip_envelope` (conversations.text) removes channel
envelopes and our earlier injections first.
"""

from __future__ import annotations

import re

from ..conversations.text import GREETING, strip_envelope
from ..retrieval.noise import is_small_talk
from ..storage.text import has_cjk

# -- adaptive retrieval (seed 002) ---------------------------------------------------------------
# Checked first: a message about memory or the past is worth a search however short it is.
_FORCE = re.compile(
    "|".join((
        r"\b(?:remember|recall|forgot|forget|memory|memories)\b",
        r"\b(?:last time|before|previously|earlier|yesterday|ago)\b",
        r"\bmy (?:name|email|phone|address|birthday|preference)s?\b",
        r"\b(?:what did (?:i|we)|did i (?:tell|say|mention))\b",
        r"你记得|[你妳]記得|之前|上次|以前|还记得|還記得|提到过|提到過|说过|說過",
        r"\b(?:помнишь|запомни|вспомни|в прошлый раз|раньше|меня зовут)\b",
        r"\b(?:pamatuješ|pamatuj|zapamatuj|minule|naposledy|jmenuji se)\b",
    )),
    re.IGNORECASE,
)
_SKIP: tuple[tuple[str, re.Pattern[str]], ...] = (
    # A greeting with at most a short tail ("hey there!"); "hi, can you set up postgres" is a request.
    ("greeting", re.compile(r"^" + GREETING + r"[^\n]{0,20}$", re.IGNORECASE)),
    ("command", re.compile(
        r"^/|^(?:run|build|test|ls|cd|git|npm|pip|docker|curl|cat|grep|find|make|sudo)\b", re.IGNORECASE
    )),
    ("acknowledgement", re.compile(
        r"^(?:yes|no|yep|nope|ok|okay|sure|fine|thanks|thank you|thx|ty|got it|understood|cool|nice|great|good"
        r"|perfect|awesome|go ahead|continue|proceed|do it|start|begin|next|да|нет|ок|спасибо|давай|продолжай"
        r"|ano|ne|díky|děkuji|pokračuj|好的|可以|行|谢谢|謝謝|实施|實施|开始|開始|继续|繼續|👍|👎|✅|❌)\s*[.!。！]?$",
        re.IGNORECASE,
    )),
    ("emoji", re.compile(
        r"^[\s\u200d\ufe0f\u20e3\u2190-\u21ff\u2300-\u23ff\u25a0-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff]+$"
    )),
    ("heartbeat", re.compile(
        r"(?-i:HEARTBEAT)|^(?:no[_-]?reply|heartbeat(?:[_ ]?(?:ok|fail|err|error))?|health[_ -]?check|system[_ -]?check"
        r"|status[_ -]?check)\s*[.!]?$",
        re.IGNORECASE,
    )),
    ("system", re.compile(r"^\[System", re.IGNORECASE)),
    ("ping", re.compile(r"^(?:ping|pong|test|debug)\s*[.!?]?$", re.IGNORECASE)),
)


def skip_reason(text: str, min_length: int | None = None) -> str | None:
    """Why a search for this message would be wasted (`greeting`, `command`…), or None to search.

    Below `min_length` characters (default 15, or 6 with CJK) a message without a question mark is skipped.
    """
    query = strip_envelope(text)
    if not query:
        return "empty"
    if _FORCE.search(query):
        return None
    if len(query) < 5:
        return "too_short"
    for reason, pattern in _SKIP:
        if pattern.search(query):
            return reason
    floor = min_length if min_length is not None else (6 if has_cjk(query) else 15)
    if len(query) < floor and "?" not in query and "？" not in query:
        return "too_short"
    if is_small_talk(query):  # pleasantries ask nothing of memory; a question about the past is forced above
        return "small_talk"
    return None


def should_skip_retrieval(text: str, min_length: int | None = None) -> bool:
    return skip_reason(text, min_length) is not None


