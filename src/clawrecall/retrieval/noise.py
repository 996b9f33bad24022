"""Seed 002's noise filter: texts that look like memories but carry nothing to recall."""

from __future__ import annotations

import re

from ..storage.text import STOPWORDS, has_cjk, iter_words

_PATTERNS = [
    # denials: an assistant saying it does not know
    r"i don'?t have (any )?(information|data|memory|record)",
    r"i'?m not sure about",
    r"i don'?t recall",
    r"i don'?t remember",
    r"it looks like i don'?t",
    r"i wasn'?t able to find",
    r"no (relevant )?memories found",
    r"i don'?t have access to",
    # meta-questions about memory itself
    r"\bdo you (remember|recall|know about)\b",
    r"\bcan you (remember|recall)\b",
    r"\bdid i (tell|mention|say|share)\b",
    r"\bhave i (told|mentioned|said)\b",
    r"\bwhat did i (tell|say|mention)\b",
    r"你还?记得",
    r"记不记得",
    r"还记得.*吗",
    r"我(之前|上次|以前)(说|提|讲)过",
    # session boilerplate
    r"^(hi|hello|hey|good morning|good evening|greetings)[\s!.,]*$",
    r"^fresh session",
    r"^new session",
    r"^HEARTBEAT",
    # extraction artifacts
    r"\bquery\s*->\s*(none|no explicit solution|unknown|not found)\b",
    r"\buser asked for\b.*\b(none|no explicit solution|unknown|not found)\b",
    r"\bno explicit solution\b",
]
_NOISE = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)
# What the filter reads of a text: a denial, a meta-question or a greeting is a short turn, or how a turn
# starts; a pasted log's 76,000th character does not make the turn noise. Searching whole texts was most
# of a search of long turns (3,900 regular-expression searches over whole candidates).
NOISE_READ = 1000


def noise_read(text: str) -> str:
    """The part of `text` the noise filter looks at: the whole text, stripped, when it has at most
    `NOISE_READ` characters; else its first `NOISE_READ`, left-stripped, and a mark that ends it, so a
    pattern anchored at a text's end (a greeting and nothing else) cannot match where the text was cut."""
    head = text[: NOISE_READ + 1]
    return head.strip() if len(head) <= NOISE_READ else head[:NOISE_READ].lstrip() + "\0"


# Text every match of a pattern contains (case aside), or starts with (the anchored ones): a text without any
# is not searched. Twenty-odd alternatives tried at every position cost ~80 µs over 1,000 characters, these
# substring tests a few; a pattern added above needs its text here (`test_noise_needles_cover_every_pattern`).
_NEEDLES = ("i don", "m not sure about", "i wasn", "memories found", "do you ", "can you ", "did i ", "have i ",
            "记得", "过", "query", "user asked for", "no explicit solution")
_STARTS = ("hi", "hello", "hey", "good morning", "good evening", "greetings", "fresh session", "new session", "heartbeat")


def is_noise(text: str) -> bool:
    """Seed 002's patterns, and anything shorter than 5 characters, or 2 in Chinese, Japanese or
    Korean, where a character is about a word ("咖啡" is "coffee"); read as `noise_read` says."""
    read = noise_read(text)
    if len(read) < (2 if has_cjk(read) else 5):
        return True
    folded = read.casefold()
    return (folded.startswith(_STARTS) or any(n in folded for n in _NEEDLES)) and bool(_NOISE.search(read))


# The words of a turn that only keeps a conversation going ("Great, thanks!", "Bye!", "Sure thing.", "díky",
# "спасибо, пока"): nothing to recall, though enough words to pass `is_noise`
_SMALL_TALK = frozenset("""
    thanks thank thx ty bye goodbye cheers great cool sure thing ok okay yes yeah yep yup no nope nice perfect
    awesome welcome np got noted sounds good fine alright right lol haha hi hello hey morning evening night later
    helpful useful appreciated really much
    díky děkuji děkuju dík ahoj čau jo jasně ano dobře super fajn na shledanou nashledanou
    спасибо пока привет да хорошо ладно ок отлично понятно
""".split())


def is_small_talk(text: str) -> bool:
    """A turn of only stopwords and pleasantries: what a listing of what was said (a recap) leaves out.
    Reads word by word and stops at the first other word (a long turn: at once)."""
    return all(w in STOPWORDS or w in _SMALL_TALK for w in iter_words(text))
