"""Query analysis shared by the backends' full-text and trigram legs."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Iterable, Iterator

# Small stopword lists: enough that "what did alice say about the trip" searches for "alice say
# trip", not for every "the". Russian and Czech too, the languages beside English that the systems
# clawrecall replaces served (a question's "в", "jak", "se" matched every memory that has them, and
# outranked the one it asked for: bench/multilingual.py). Czech words that are also English words,
# names or initials ("ten", "pod", "tom", "ty", "ani", "po", "na", "ho", "u", "k"…) are left out;
# Chinese text has no word breaks to drop words at. Linking verbs are stopwords, as "is" and "have" are
# in English: among them the naming ones, Russian "зовут", "называется" and Czech "jmenovat se" ("Můj
# pes se jmenuje Bára": my dog is called Bára), which tell what a name is of, not what a sentence is
# about ("my daughter is called Eliška" and "our project is called Kometa" share only the verb).
_ENGLISH = """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves s t d ll m re ve y"""
_RUSSIAN = """и в во не что он на я с со как а то все всё она так его но да ты к у же вы за бы по только ее её
    мне было вот от меня еще ещё нет о об из ему когда даже ну ли если уже или ни быть был была были
    него до вас вам ведь там потом себя ей может они тут где есть надо ней для мы тебя их чем сам
    чтоб чтобы без чего раз тоже себе под будет ж тогда кто этот того потому этого какой какая какие
    каком какую каких ним здесь этом мой тем нее неё сейчас куда зачем всех можно при над через эти
    нас про всего них эту моя свою этой перед том такой им между мою мои наш наша наши ваш ваша
    зовут звали называется называются назывался называлась"""
_CZECH = """aby bude budou by byl byla byli bylo být čí do i jak jaká jaké jaký jakou jako je jeho jej
    její jejich ještě jí již jsem jsi jsme jsou jste kde kdo kdy když ke která které kteří který kterou
    ktery má máte mě mezi mně mnou můj může my nám nás naše náš nebo není než o on ono proč proto
    protože při s se své svůj svých také takže tedy té tento této tím to toho tomu tuto tyto už v ve
    vám vás váš vy z za zda ze že moje mé moji mou mého tvůj tvoje tvé tvá tvoji mám máš máme mají kam
    vše všechno všechny zatím jmenovat jmenuji jmenuju jmenuješ jmenuje jmenujeme jmenujete jmenují jmenujou
    jmenoval jmenovala jmenovalo jmenovali jmenovaly"""
STOPWORDS = frozenset(" ".join((_ENGLISH, _RUSSIAN, _CZECH)).split())

_WORD = re.compile(r"\w+", re.UNICODE)
_TOKEN = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)  # a word with its clitics: "Alice's"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def words(text: str) -> list[str]:
    """The text's words, lower-cased, stopwords included."""
    return _WORD.findall(text.lower())


def iter_words(text: str) -> Iterator[str]:
    """`words`, one at a time: a reader that may stop early does not split the whole text."""
    return (m.group().lower() for m in _WORD.finditer(text))


def fold(text: str) -> str:
    """Lower-cased without accents ("Dceři" → "dceri"): how BERT's uncased vocabulary reads a word, and
    how a stem is compared."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def keywords(query: str, limit: int = 32) -> list[str]:
    """Lower-cased words of a query without stopwords (all words if nothing else is left)."""
    words = [w.lower() for w in _WORD.findall(query)]
    kept = [w for w in words if w not in STOPWORDS]
    return list(dict.fromkeys(kept or words))[:limit]


def trigrams(query: str, limit: int = 48) -> list[str]:
    """Trigrams of the query's keywords (CJK runs included), for typo-tolerant matching."""
    grams: list[str] = []
    for word in keywords(query, limit=64):
        if len(word) < 3:
            continue
        grams.extend(word[i : i + 3] for i in range(len(word) - 2))
    return list(dict.fromkeys(grams))[:limit]


def short_cjk_words(query: str) -> list[str]:
    """The query's Chinese/Japanese/Korean words of one or two characters ("咖啡"): too short for a
    trigram, and inside a longer run of CJK text, which BM25 indexes as one token."""
    return [w for w in keywords(query) if len(w) < 3 and has_cjk(w)]


def fts_or_query(terms: list[str]) -> str:
    """An FTS5/tsquery-safe OR of quoted terms."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def common_words(texts: Iterable[str], share: float) -> set[str]:
    """The words, stopwords aside, found in more than `share` of `texts` (lower-cased), each text read
    as far as keyword coverage reads it (`COVERAGE_READ`)."""
    counts: Counter[str] = Counter()
    n = 0
    for text in texts:
        n += 1
        counts.update(set(words(text[:COVERAGE_READ])) - STOPWORDS)
    return {w for w, c in counts.items() if c > share * n}


def lexically_close(a: str, b: str, at_least: float = 0.3) -> bool:
    """Whether two texts share at least `at_least` of their character trigrams (Jaccard, case and spacing
    aside): what a near-duplicate needs besides a close vector. Restatements close enough to be duplicates
    share most of theirs ("Alice's FTP is 250 W" / "… 260 W": 0.71); texts a model cannot read, which it
    embeds alike, share none ("茶" / "咖啡", emoji / a long run of one letter: 0) or few (two Thai
    sentences about coffee and tea: 0.13)."""
    grams = [_trigram_set(t) for t in (a, b)]
    return len(grams[0] & grams[1]) >= at_least * len(grams[0] | grams[1])


def _trigram_set(text: str) -> set[str]:
    text = " ".join(text.lower().split())
    return {text[i : i + 3] for i in range(max(1, len(text) - 2))}


def without_words(query: str, words: set[str]) -> str:
    """The query less `words` ("Alice's" goes with "alice"); the query itself if only stopwords would remain."""
    if not words:
        return query
    kept = _TOKEN.sub(lambda m: "" if _WORD.findall(m.group())[0].lower() in words else m.group(), query)
    kept = " ".join(kept.split())
    return kept if any(w.lower() not in STOPWORDS for w in _WORD.findall(kept)) else query


# What the absolute score's keyword coverage reads of a hit: about twice what all-MiniLM-L6-v2 reads for
# the cosine beside it (256 tokens), so a long turn costs what a short one does.
COVERAGE_READ = 2000


def keyword_coverage(words: list[str], text: str) -> float:
    """The share of `words` (a query's `keywords`) that `text`'s first `COVERAGE_READ` characters contain: as
    a word, as a word's first five letters for longer ones (so "climbing" finds "climbed"), or inside CJK
    text, which has no word breaks. Each word is looked for with `str.find`, not by splitting the text."""
    if not words:
        return 0.0
    lowered = text[:COVERAGE_READ].lower()
    return sum(_contains(lowered, word) for word in words) / len(words)


def _contains(lowered: str, word: str) -> bool:
    r"""Whether a word of `lowered` (a run of `\w`) is `word`, or starts with its first five letters."""
    if not word.isascii() and has_cjk(word) and word in lowered:  # (an ASCII word has no CJK: one C call)
        return True
    key = word[:5]
    at = lowered.find(key)
    while at != -1:
        end = at + len(key)
        if (at == 0 or not _WORD.match(lowered[at - 1])) and (
                len(word) >= 5 or end == len(lowered) or not _WORD.match(lowered[end])):
            return True
        at = lowered.find(key, at + 1)
    return False


def shared_stems(query: str, text: str) -> list[str]:
    """The query's words of three letters or more (stopwords aside) that `text`'s first `COVERAGE_READ`
    characters have too, inflection aside: the same word, or two words of which the longer starts with
    all of the shorter but its last letter, four letters at least, accents aside ("barvu" and "barva",
    "dceři" and "dcera"; not "shift" and "shirt", nor "barva" and "Bára"). An ending is what most
    languages that inflect change; a stemmer per language would do better, and needs the language.
    Chinese, Japanese and Korean text has no word breaks: a run of it shares a stem when two of its
    characters in a row are in `text` ("咖啡" in "我每天早上喝咖啡")."""
    head = text[:COVERAGE_READ]
    theirs = {fold(w) for w in iter_words(head) if len(w) > 2 and w not in STOPWORDS}
    found = []
    for word in dict.fromkeys(fold(w) for w in iter_words(query) if w not in STOPWORDS):
        if has_cjk(word):
            if any(word[i : i + 2] in head for i in range(len(word) - 1)):
                found.append(word)
        elif len(word) > 2 and any(_same_stem(word, t) for t in theirs):
            found.append(word)
    return found


def _same_stem(a: str, b: str) -> bool:
    if a == b:
        return True
    stem = max(4, min(len(a), len(b)) - 1)
    return a.isalpha() and b.isalpha() and a[:stem] == b[:stem]
