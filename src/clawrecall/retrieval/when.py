"""Times in a query, found by rules, not by a model: "yesterday", "last week", "in May 2025",
"minulý týden", "v květnu", "в мае", "3 days ago", "since 2025-05-01".

A weak model that guesses dates hurts recall more than it helps (LongMemEval §4.5), and a query
is short: a table of patterns per language (English, Czech, Russian) covers what people write,
answers in a fraction of a millisecond and is the same every time. `find` returns the time range an expression
names (calendar days in UTC, weeks from Monday) and the query without it; the pipeline lifts hits
from that range (docs/time.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Callable

from .._time import as_utc
from ..storage.text import STOPWORDS, words

Span = tuple[date, date]  # first day, day after the last


@dataclass(frozen=True)
class When:
    """A time range named in a query: [start, end), the words that named it, and the query without them."""

    start: datetime
    end: datetime
    text: str
    query: str

    def __contains__(self, moment: datetime) -> bool:
        return self.start <= as_utc(moment) < self.end

    @property
    def names_no_topic(self) -> bool:
        """Whether the query asks for the time itself: nothing but the time ("yesterday"), or a question of
        what was said or done then ("what did we talk about yesterday?") whose other words can find
        nothing. Stopwords alone are not enough: "how are you today?" asks about no record."""
        said = words(self.query)
        asks = any(w in _RECAP for w in said) or {"did", "do"} <= set(said) or (  # "what did we do"
            "new" in said and not {"anything", "what", "whats"}.isdisjoint(said))  # "anything new", not "I'm new here"
        return all(w in STOPWORDS or w in _RECAP or w in _FILLER for w in said) and (not said or asks)


# Words that ask what was said or done within a time, in the languages of the rules below ("what did I
# say yesterday", "anything new since Monday", "co jsme dělali včera", "о чём мы говорили вчера") …
_RECAP = frozenset("""
    say said says tell told talk talked discuss discussed chat chatted speak spoke mention mentioned happen
    happened doing decide decided agree agreed conversation conversations remind remember recall summarize
    summarise summary recap
    dělali dělal dělala mluvili mluvil mluvila povídali bavili říkal říkala říkali řekl řekla řekli probírali
    řešili rozhodli stalo dělo bylo nového novinky připomeň
    делали делал делала говорили говорил говорила обсуждали обсуждал сказал сказала сказали болтали решили
    было случилось происходило нового напомни
""".split())
# … and words that may stand beside them without naming a topic ("new" asks only with "anything" or "what")
_FILLER = frozenset("anything something everything show list us please again new co čem něco všechno чём".split())


def _month(year: int, month: int) -> date:
    return date(year + (month - 1) // 12, (month - 1) % 12 + 1, 1)


def _month_span(year: int, month: int) -> Span:
    return _month(year, month), _month(year, month + 1)


def _week_of(day: date) -> Span:
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=7)


def _year_span(year: int) -> Span:
    return date(year, 1, 1), date(year + 1, 1, 1)


def _day(day: date) -> Span:
    return day, day + timedelta(days=1)


# -- the words of each language --------------------------------------------------------------

# English month names; alone they need "in"/"during" or a year after them ("may", "march" are verbs too)
_MONTHS_EN = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
              "november", "december")
# month -> its Czech and Russian forms: stems and case endings ("květen", "v květnu", "od května"; "май", "в мае", "с мая")
_MONTHS: dict[int, str] = {
    1: r"led(?:en|na|nu|nem)|январ(?:ь|я|е|ю|ём)",
    2: r"únor(?:a|u|em)?|феврал(?:ь|я|е|ю|ём)",
    3: r"břez(?:en|na|nu|nem)|март(?:а|е|у|ом)?",
    4: r"dub(?:en|na|nu|nem)|апрел(?:ь|я|е|ю|ем)",
    5: r"květ(?:en|na|nu|nem)|ма(?:й|я|е|ю|ем)",
    6: r"červ(?:en|na|nu|nem)|июн(?:ь|я|е|ю|ем)",
    7: r"červen(?:ec|ce|ci|cem)|июл(?:ь|я|е|ю|ем)",
    8: r"srp(?:en|na|nu|nem)|август(?:а|е|у|ом)?",
    9: r"září|сентябр(?:ь|я|е|ю|ём)",
    10: r"říj(?:en|na|nu|nem)|октябр(?:ь|я|е|ю|ём)",
    11: r"listopad(?:u|em)?|ноябр(?:ь|я|е|ю|ём)",
    12: r"prosin(?:ec|ce|ci|cem)|декабр(?:ь|я|е|ю|ём)",
}
# weekday (Monday = 0) -> its forms, the genitive included ("od středy", "со среды")
_WEEKDAYS: dict[int, str] = {
    0: r"monday|pondělí|понедельник(?:а|у)?",
    1: r"tuesday|úterý|вторник(?:а|у)?",
    2: r"wednesday|středu|středy|středa|сред(?:а|у|ы)",
    3: r"thursday|čtvrt(?:ek|ka|ku)|четверг(?:а|у)?",
    4: r"friday|pát(?:ek|ku)|пятниц(?:а|у|ы)",
    5: r"saturday|sobot(?:a|u|y)|суббот(?:а|у|ы)",
    6: r"sunday|neděl(?:e|i)|воскресень(?:е|я)",
}
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10,
    "dva": 2, "dvě": 2, "tři": 3, "čtyři": 4, "pět": 5, "šest": 6, "sedm": 7, "osm": 8, "devět": 9, "deset": 10,
    "jedním": 1, "dvěma": 2, "třemi": 3, "čtyřmi": 4, "pěti": 5, "šesti": 6, "sedmi": 7, "osmi": 8, "devíti": 9,
    "deseti": 10,
    "один": 1, "одну": 1, "одна": 1, "два": 2, "две": 2, "три": 3, "четыре": 4, "пять": 5, "шесть": 6,
    "семь": 7, "восемь": 8, "девять": 9, "десять": 10,
}
_NUMBER = r"(?P<n>\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
_COUNT = r"(?P<n>\d{1,3}|" + "|".join(sorted(set(_NUMBERS) - {"a", "an"}, key=len, reverse=True)) + ")"  # "the last 3 days"
# "N units ago" in each language: unit -> its forms (the number comes before, "ago" after; Czech: "před" before)
_UNITS = {
    "day": r"days?|dny|dnem|дн(?:я|ей|ь)|день",
    "week": r"weeks?|týdny|týdnem|недел(?:ю|и|ь)",
    "month": r"months?|měsíci|měsícem|месяц(?:а|ев)?",
    "year": r"years?|lety|rokem|год(?:а)?|лет",
}

# "the last N units": the plural forms a count takes ("7 dní", "5 дней", "2 недели")
_RECENT_UNITS = {
    "day": r"days?|dní|dnů|dny|дн(?:я|ей)|день",
    "week": r"weeks?|týdnů|týdny|týden|недел(?:ю|и|ь)",
    "month": r"months?|měsíců|měsíce|měsíc|месяц(?:а|ев)?",
    "year": r"years?|let|roky|rok|лет|года|год",
}
_RECENT = r"(?:(?:over|within|za|за)\s+)?(?:the\s+)?(?:last|past|previous|posledních|poslední|последние|последних)"

_THIS, _LAST = r"(?:this|tento|tenhle|tomto|tomhle|tohoto|letošní|этот|эта|этом|этой|этого)", \
    r"(?:last|past|previous|minulý|minulém|minulého|minulou|minulé|předchozí|прошл(?:ый|ая|ой|ом|ого|ую))"
_WEEK = r"(?:week|týden|týdnu|týdne|týdnem|недел(?:я|е|и|ю))"
_MONTH_WORD = r"(?:month|měsíc|měsíci|měsíce|месяц(?:е|а)?)"
_YEAR_WORD = r"(?:year|rok|roce|roku|год(?:у|а)?)"


def _weekday_back(target: int) -> Callable[[re.Match[str], date], Span]:
    """The latest such weekday up to today ("on Monday" said on a Monday is today)."""
    return lambda m, today: _day(today - timedelta(days=(today.weekday() - target) % 7))


def _month_named(m: re.Match[str], today: date) -> Span:
    name = m["month"].lower()
    month = _MONTHS_EN.index(name) + 1 if name in _MONTHS_EN else \
        next(n for n, forms in _MONTHS.items() if re.fullmatch(forms, name, re.IGNORECASE))
    if m["year"]:
        return _month_span(int(m["year"]), month)
    year = today.year if month <= today.month else today.year - 1  # the latest such month, this one included
    return _month_span(year, month)


def _ago(m: re.Match[str], today: date) -> Span:
    said = (m["n"] or "1").lower()
    n = int(said) if said.isdigit() else _NUMBERS[said]
    unit = next(u for u, forms in _UNITS.items() if re.fullmatch(forms, m["unit"], re.IGNORECASE))
    if unit == "day":
        return _day(today - timedelta(days=n))
    if unit == "week":
        return _week_of(today - timedelta(days=7 * n))
    if unit == "month":
        return _month_span(today.year, today.month - n)
    return _year_span(today.year - n)


def _recent(m: re.Match[str], today: date) -> Span:
    """"the last 7 days", "the past two weeks", "za posledních 7 dní": from the same day that many units
    back up to the end of today."""
    said = m["n"].lower()
    n = int(said) if said.isdigit() else _NUMBERS[said]
    unit = next(u for u, forms in _RECENT_UNITS.items() if re.fullmatch(forms, m["unit"], re.IGNORECASE))
    if unit in ("month", "year"):
        first = _month(today.year, today.month - n * (12 if unit == "year" else 1))
        return first.replace(day=min(today.day, (_month(first.year, first.month + 1) - timedelta(days=1)).day)), \
            today + timedelta(days=1)
    return today - timedelta(days=n * (7 if unit == "week" else 1)), today + timedelta(days=1)


def _iso(m: re.Match[str], today: date) -> Span:
    year, month, day = int(m["y"]), int(m["m"]), m["d"]
    return _day(date(year, month, int(day))) if day else _month_span(year, month)


_YEAR = r"(?:\s+(?P<year>\d{4})(?:\s*(?:года|г\.))?)"
_EN_MONTH = rf"(?P<month>{'|'.join(_MONTHS_EN)})"

# (the expression's core, its span); each may follow a preposition (`_BEFORE`) or "since" (`_SINCE`).
# Tried in order: longer expressions before the words they contain.
_RULES: list[tuple[str, Callable[[re.Match[str], date], Span]]] = [
    (r"(?P<y>\d{4})-(?P<m>0[1-9]|1[0-2])(?:-(?P<d>0[1-9]|[12]\d|3[01]))?", _iso),
    # not "the last 2 days of the trip": that names the end of something else, not a time before today
    (rf"{_RECENT}\s+{_COUNT}\s+(?P<unit>{'|'.join(_RECENT_UNITS.values())})(?!\s+(?:of|z|ze|из)\b)", _recent),
    (r"(?:the\s+)?day\s+before\s+yesterday|předevčírem|позавчера", lambda m, t: _day(t - timedelta(days=2))),
    (r"yesterday|včera|včerejška|вчера|вчерашнего\s+дня", lambda m, t: _day(t - timedelta(days=1))),
    (r"(?:this\s+(?:morning|afternoon|evening)|tonight)", lambda m, t: _day(t)),
    (r"last\s+night", lambda m, t: _day(t - timedelta(days=1))),
    (r"today|dnes|dneska|dnešk(?:a|u)|сегодня|сегодняшнего\s+дня", lambda m, t: _day(t)),
    (rf"{_LAST}\s+{_WEEK}", lambda m, t: _week_of(t - timedelta(days=7))),
    (rf"{_THIS}\s+{_WEEK}", lambda m, t: _week_of(t)),
    (rf"{_LAST}\s+{_MONTH_WORD}", lambda m, t: _month_span(t.year, t.month - 1)),
    (rf"{_THIS}\s+{_MONTH_WORD}", lambda m, t: _month_span(t.year, t.month)),
    (rf"{_LAST}\s+{_YEAR_WORD}|loni|vloni|loňsk(?:ý|ého|ém)\s+rok(?:u)?", lambda m, t: _year_span(t.year - 1)),
    (rf"{_THIS}\s+{_YEAR_WORD}|letos", lambda m, t: _year_span(t.year)),
    (rf"(?:{_NUMBER}\s+)?(?P<unit>{'|'.join(_UNITS.values())})\s+(?:ago|назад)", _ago),
    (rf"před\s+(?:{_NUMBER}\s+)?(?P<unit>{'|'.join(_UNITS.values())})", _ago),
    (rf"(?P<month>{'|'.join(_MONTHS.values())}){_YEAR}?", _month_named),
    (rf"{_EN_MONTH}{_YEAR}", _month_named),
    (r"(?:roce|year)\s+(?P<year>\d{4})|(?P<year2>\d{4})\s+году", lambda m, t: _year_span(int(m["year"] or m["year2"]))),
    *[(rf"(?:{_LAST}\s+)?(?:{forms})", _weekday_back(day)) for day, forms in _WEEKDAYS.items()],
]
# English words that name a time only after "in" or "during" ("in May", "in 2025"; "may" alone is a verb)
_AFTER_IN: list[tuple[str, Callable[[re.Match[str], date], Span]]] = [
    (rf"{_EN_MONTH}{_YEAR}?", _month_named),
    (r"(?P<year>\d{4})", lambda m, t: _year_span(int(m["year"]))),
]
# what may stand before an expression and goes with it: "in May", "v květnu", "в мае", "on Monday", "during"
_BEFORE = r"(?:(?:in|on|during|v|ve|dne|в|во|на)\s+)?"
_IN = r"(?:in|during)\s+"
_SINCE = r"(?:since|od|ode|с|со)\s+"
_EDGE = r"(?<![\w-]){}(?:['’]s)?(?![\w-])"  # whole words; "yesterday's" too


def _compile(rules: list[tuple[str, Callable[[re.Match[str], date], Span]]], prefix: str
             ) -> list[tuple[re.Pattern[str], Callable[[re.Match[str], date], Span]]]:
    return [(re.compile(_EDGE.format(prefix + f"(?:{core})"), re.IGNORECASE), span) for core, span in rules]


_SINCE_RULES = _compile(_RULES + _AFTER_IN, _SINCE)
_PLAIN_RULES = _compile(_RULES, _BEFORE) + _compile(_AFTER_IN, _IN)


# Every expression contains one of these word starts (or a four-digit year): only the text around
# them is matched against the rules, so a long prompt that names no time costs one scan, not 80.
_TRIGGER = re.compile(
    r"(?<!\w)(?:\d{4}|today|yesterday|days?\b|dní|dnů|dny|дней|дня|morning|afternoon|evening|tonight|night|week|month|year|ago|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    + "|".join(_MONTHS_EN)
    + r"|dnes|dnešk|včer|předevčírem|týd|měsíc|rok|roce|loni|vloni|letos|loňsk|před|pondělí|úterý|střed|čtvrt|pát|"
    r"sobot|neděl|led|únor|břez|dub|květ|červ|srp|září|říj|listopad|prosin|сегодня|вчера|позавчера|недел|месяц|"
    r"год|назад|понедельник|вторник|сред|четверг|пятниц|суббот|воскресень|январ|феврал|март|апрел|ма|июн|июл|"
    r"август|сентябр|октябр|ноябр|декабр)",
    re.IGNORECASE,
)
_REACH = 40  # characters an expression reaches on either side of its trigger


def _windows(query: str) -> list[tuple[int, int]]:
    """The stretches of `query` around its triggers, widened to whole words, overlapping ones merged."""
    out: list[tuple[int, int]] = []
    for m in _TRIGGER.finditer(query):
        lo, hi = max(0, m.start() - _REACH), min(len(query), m.end() + _REACH)
        while lo > 0 and not query[lo - 1].isspace():
            lo -= 1
        while hi < len(query) and not query[hi].isspace():
            hi += 1
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def find(query: str, now: datetime) -> When | None:
    """The first time expression in `query`, relative to `now`, or None. "since X" runs from the
    start of X to `now`; an ISO date that is no calendar date is no expression."""
    windows = _windows(query)
    if not windows:
        return None
    now = as_utc(now)
    today = now.date()
    for rules, since in ((_SINCE_RULES, True), (_PLAIN_RULES, False)):
        for pattern, span in rules:
            for lo, hi in windows:
                for m in pattern.finditer(query[lo:hi]):
                    try:
                        first, after = span(m, today)
                    except ValueError:  # 2025-02-30
                        continue
                    start = datetime.combine(first, time(), timezone.utc)
                    end = now if since else datetime.combine(after, time(), timezone.utc)
                    if end <= start:
                        continue
                    return When(start, end, m.group(0), _without(query, lo + m.start(), lo + m.end()))
    return None


def _without(query: str, start: int, end: int) -> str:
    """The query with [start, end) cut out, spaces and the punctuation next to it tidied."""
    text = f"{query[:start]} {query[end:]}"
    text = re.sub(r"\s+([?.!,;:])", r"\1", " ".join(text.split()))
    return text.strip(" ,;:")


# Words whose time depends on when they were said: fine in a query, wrong in a stored fact, which
# must say the date ("On 2026-03-02 …") because it is read months later. The query rules' relative
# expressions, plus the future and the parts of a day the query rules do not name.
_RELATIVE = re.compile(_EDGE.format("(?:" + "|".join([
    # "the last 7 days" … "před 3 dny": the rules between the ISO date and the months, their groups unnamed
    *(re.sub(r"\(\?P<\w+>", "(?:", core) for core, _ in _RULES[1:next(i for i, r in enumerate(_RULES) if r[1] is _month_named)]),
    r"tomorrow|zítra|zítřek|завтра|послезавтра|pozítří",
    r"tomorrow\s+(?:morning|afternoon|evening)|dnes\s+(?:ráno|večer|odpoledne)|"
    r"včera\s+večer|сегодня\s+(?:утром|вечером)|вчера\s+вечером",
    rf"(?:next|příští|следующ(?:ий|ая|ей|ем|ую))\s+(?:{_WEEK}|{_MONTH_WORD}|{_YEAR_WORD})",
]) + ")"), re.IGNORECASE)


def relative_time(text: str) -> str | None:
    """The first word of `text` that names a time relative to when it was said ("yesterday",
    "minulý týden", "в прошлом году"), or None."""
    m = _RELATIVE.search(text)
    return m.group(0) if m else None
