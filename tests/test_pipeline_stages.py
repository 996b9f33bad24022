"""Each retrieval stage on its own, with hand-made candidates (no store, no model)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from clawrecall.models import MemoryRecord
from clawrecall.retrieval.noise import NOISE_READ, is_noise, is_small_talk, noise_read
from clawrecall.retrieval.pipeline import (
    Scored,
    apply_importance,
    apply_length_norm,
    apply_noise,
    apply_mmr,
    apply_recency,
    apply_rerank,
    apply_time_decay,
    fuse,
    trigram_rescore,
)
from clawrecall.storage import Candidate
from clawrecall.config import RelevanceConfig
from clawrecall.retrieval.relevance import apply_relevance
from clawrecall.storage.text import (
    COVERAGE_READ, common_words, keyword_coverage, keywords, shared_stems, trigrams, without_words,
)

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def rec(i: str, content: str = "some memory text", *, days: float = 0, importance: float = 0.7, category: str = "fact"):
    t = NOW - timedelta(days=days)
    return MemoryRecord(id=i, content=content, created_at=t, updated_at=t, importance=importance, category=category)


def scored(*pairs):
    return [Scored(r, s, steps={"fused": s}) for r, s in pairs]


def test_weighted_fusion_min_max_scales_each_leg():
    records = {i: rec(i) for i in "abc"}
    legs = {"vector": [Candidate("a", 0.9), Candidate("b", 0.5), Candidate("c", 0.1)], "bm25": [Candidate("c", 12.0), Candidate("b", 3.0)]}
    items = fuse(legs, {"vector": 1.0, "bm25": 1.0}, records, method="weighted")
    by = {s.memory.id: s.score for s in items}
    assert by["a"] == pytest.approx(0.5)  # best vector, no text match
    assert by["c"] == pytest.approx(0.5)  # worst vector, best text
    assert by["b"] == pytest.approx((0.5 + 0.0) / 2)
    assert items[0].legs  # per-leg ranks kept for explain


def test_a_leg_that_returned_every_match_scales_from_zero_not_from_its_weakest():
    records = {i: rec(i) for i in "ab"}
    legs = {"bm25": [Candidate("a", 6.0), Candidate("b", 2.0)]}
    exhausted = {s.memory.id: s.score for s in fuse(legs, {"bm25": 1.0}, records, method="weighted", pool=20)}
    assert exhausted == {"a": pytest.approx(1.0), "b": pytest.approx(2.0 / 6.0)}
    full = {s.memory.id: s.score for s in fuse(legs, {"bm25": 1.0}, records, method="weighted", pool=2)}
    assert full == {"a": pytest.approx(1.0), "b": pytest.approx(0.0)}  # a full pool: the weakest is the floor


def test_the_vector_leg_of_a_small_scope_scales_from_the_models_unrelated_cosine():
    """A model whose cosines all sit near 0.8 (multilingual-e5-small): from 0, its best and its worst
    memory would score 1.0 and 0.92, and any keyword match would decide; from its unrelated cosine
    they score 1.0 and 0.2."""
    records = {i: rec(i) for i in "ab"}
    legs = {"vector": [Candidate("a", 0.84), Candidate("b", 0.744)], "trigram": [Candidate("b", 5.0)]}
    weights = {"vector": 1.0, "trigram": 0.3}
    from_zero = {s.memory.id: s.score for s in fuse(legs, weights, records, method="weighted", pool=50)}
    assert from_zero["b"] > from_zero["a"]  # a stray trigram outranks the better meaning
    floored = fuse(legs, weights, records, method="weighted", pool=50, vector_floor=0.72)
    assert [s.memory.id for s in floored] == ["a", "b"]
    assert floored[1].legs and floored[1].score == pytest.approx((0.2 + 0.3) / 1.3)
    full = {s.memory.id: s.score for s in fuse(legs, weights, records, method="weighted", pool=2, vector_floor=0.72)}
    assert full["b"] == pytest.approx(0.3 / 1.3)  # a full pool: its weakest candidate is the floor, as before


def test_single_leg_search_keeps_its_weaker_matches(mem):
    mem.add("Lighthouse keeper retires", dedup=False)
    mem.add("Lighthouse lamp replaced after the storm", dedup=False)
    for mode in ("bm25", "trigram"):
        assert len(mem.search("lighthouse lamp", mode=mode)) == 2


def test_rrf_fusion_normalised_to_one():
    records = {i: rec(i) for i in "ab"}
    legs = {"vector": [Candidate("a", 0.9), Candidate("b", 0.5)], "bm25": [Candidate("a", 5.0)]}
    items = fuse(legs, {"vector": 1.0, "bm25": 1.0}, records, method="rrf", k=60)
    assert items[0].memory.id == "a" and items[0].score == pytest.approx(1.0)
    assert items[1].score == pytest.approx((1 / 62) / (2 / 61))


def test_fusion_skips_ids_removed_meanwhile():
    items = fuse({"vector": [Candidate("gone", 0.9), Candidate("a", 0.5)]}, {"vector": 1.0}, {"a": rec("a")})
    assert [s.memory.id for s in items] == ["a"]


def test_recency_boost_is_additive_and_decays():
    items = apply_recency(scored((rec("new", days=0), 0.5), (rec("old", days=140), 0.5)), NOW, half_life_days=14, weight=0.1)
    assert items[0].score == pytest.approx(0.6)
    assert items[1].score == pytest.approx(0.5 + 0.1 * np.exp(-10))


def test_importance_weight():
    items = apply_importance(scored((rec("a", importance=1.0), 1.0), (rec("b", importance=0.0), 1.0)), weight=0.3)
    assert [s.score for s in items] == pytest.approx([1.0, 0.7])


def test_length_norm_penalises_long_texts_with_floor():
    items = apply_length_norm(scored((rec("s", "x" * 400), 1.0), (rec("l", "x" * 1000), 1.0), (rec("h", "x" * 10**6), 1.0)), anchor=500)
    assert [s.score for s in items] == pytest.approx([1.0, 1 / 1.5, 0.3])
    # a long message found by one of its windows counts that window's length
    items = apply_length_norm(scored((rec("m", "x" * 10**6), 1.0), (rec("n", "x" * 10**6), 1.0)), anchor=500, matched={"m": 1000})
    assert [s.score for s in items] == pytest.approx([1 / 1.5, 0.3])


def test_time_decay_spares_timeless_categories():
    items = apply_time_decay(
        scored((rec("f", days=60), 1.0), (rec("d", days=60, category="decision"), 1.0)), NOW, half_life_days=60, timeless={"decision"}
    )
    assert items[0].score == pytest.approx(0.5 + 0.5 * np.exp(-1))
    assert items[1].score == 1.0


def test_noise_filter_stops_at_keep():
    items = scored((rec("a", "I don't remember anything about that"), 0.9), (rec("b", "Real fact about billing"), 0.8),
                   (rec("c", "Another real fact here"), 0.7), (rec("d", "A low but real fact"), 0.1))
    assert [s.memory.id for s in apply_noise(items, noise=True, keep=10)] == ["b", "c", "d"]
    assert [s.memory.id for s in apply_noise(items, noise=False, keep=2)] == ["a", "b"]


def test_keyword_coverage_counts_words_stems_and_cjk():
    assert keyword_coverage(keywords("Where did Alice go climbing?"), "Alice climbed in the Alps") == pytest.approx(2 / 3)
    assert keyword_coverage(keywords("咖啡 好喝"), "我每天早上喝咖啡") == pytest.approx(1 / 2)
    assert keyword_coverage([], "anything") == 0.0


def _relevance(query_vec, vecs, ranking, contents, cfg=RelevanceConfig()):
    items = scored(*((rec(str(i), c), r) for i, (c, r) in enumerate(zip(contents, ranking))))
    vectors = {str(i): np.asarray(v, dtype=np.float32) for i, v in enumerate(vecs) if v is not None}
    return apply_relevance(items, "oolong tea", np.asarray(query_vec, dtype=np.float32), vectors, cfg)


def test_relevance_is_absolute_where_ranking_is_relative():
    """Two queries whose ranking scores are alike: hits close in meaning score high, hits far in meaning
    score low, whatever the ranking stage said; the ranking order is kept."""
    cfg = RelevanceConfig()
    near = _relevance([1, 0], [[0.8, 0.6], [0.6, 0.8]], [1.0, 0.5], ["I drink oolong tea", "green tea"])
    far = _relevance([1, 0], [[0.0, 1.0], [-0.2, 0.98]], [1.0, 0.5], ["dark mode", "deploy days"])
    expected = 1 / (1 + np.exp(-(cfg.intercept + cfg.cosine * 0.8 + cfg.coverage * 1.0)))
    assert near[0].relevance == pytest.approx(expected, rel=1e-5)
    assert near[0].steps["relevance"] == {"cosine": pytest.approx(0.8), "coverage": 1.0}
    assert far[0].relevance < 0.1 < 0.5 < near[0].relevance
    assert [s.memory.id for s in near] == ["0", "1"] and near[1].relevance < near[0].relevance


def test_a_hit_without_a_vector_keeps_its_ranking_score():
    items = _relevance([1, 0], [None, [0.0, 1.0]], [0.7, 0.5], ["oolong tea", "dark mode"])
    assert items[0].relevance == pytest.approx(0.7) and items[0].steps["relevance"]["cosine"] is None


def test_mmr_defers_near_duplicates():
    v1 = np.array([1.0, 0.0]); v2 = np.array([0.999, 0.045]); v3 = np.array([0.0, 1.0])
    items = scored((rec("a"), 0.9), (rec("b"), 0.8), (rec("c"), 0.7))
    out = apply_mmr(items, {"a": v1, "b": v2 / np.linalg.norm(v2), "c": v3}, threshold=0.95)
    assert [s.memory.id for s in out] == ["a", "c", "b"]


def test_mmr_stops_comparing_once_the_limit_is_kept():
    v1 = np.array([1.0, 0.0]); v3 = np.array([0.0, 1.0])
    items = scored((rec("a"), 0.9), (rec("b"), 0.8), (rec("c"), 0.7), (rec("d"), 0.6))
    vectors = {"a": v1, "b": v1, "c": v3, "d": v3}
    assert [s.memory.id for s in apply_mmr(items, vectors, threshold=0.95, limit=2)] == ["a", "c", "b", "d"]
    assert "mmr_deferred" not in items[3].steps  # past the limit: left as it was
    assert [s.memory.id for s in apply_mmr(items, vectors, threshold=0.95)] == ["a", "c", "b", "d"]


def test_rerank_blends_and_falls_back():
    class Fixed:
        def __init__(self, scores):
            self.scores = scores

        def score(self, query, documents):
            return self.scores

    items = scored((rec("a"), 0.9), (rec("b"), 0.5))
    out = apply_rerank(items, "q", Fixed([0.0, 1.0]), top_k=10, weight=0.6)
    assert [s.memory.id for s in out] == ["b", "a"] and out[0].score == pytest.approx(0.4 * 0.5 + 0.6)
    items = scored((rec("a"), 0.9), (rec("b"), 0.5))
    assert [s.score for s in apply_rerank(items, "q", Fixed(None), top_k=10, weight=0.6)] == [0.9, 0.5]


@pytest.mark.parametrize("text", ["I don't have any information about that", "hi", "Tea", "咖", "Do you remember my name?", "HEARTBEAT ok", "你还记得吗"])
def test_noise(text):
    assert is_noise(text)


@pytest.mark.parametrize("text", ["Hey Mel! I went to the support group yesterday", "User prefers dark mode", "Vegan", "我爱咖啡", "咖啡"])
def test_not_noise(text):
    assert not is_noise(text)


# a pasted log of about a megabyte: every stage reads a bounded part of it
_LOG = "INFO worker 7 flushed segment to disk without errors\n" * 20_000


def test_noise_reads_a_bounded_head_of_a_long_text():
    assert len(_LOG) > 1_000_000 and len(noise_read(_LOG)) == NOISE_READ + 1  # the head and the mark that ends it
    assert noise_read(_LOG[:NOISE_READ]) == _LOG[:NOISE_READ].strip()  # a text that fits is read whole, as before
    assert is_noise("Do you remember what I said about the deploy?\n" + _LOG)  # how a turn starts still counts
    assert not is_noise(_LOG + "Do you remember what I said about the deploy?")  # its last line does not
    # a cut text is not "a greeting and nothing else" because its head is one
    assert not is_noise("hello" + " " * (2 * NOISE_READ) + "here is the stack trace")
    assert is_small_talk("Great, thanks!") and not is_small_talk(_LOG)


def test_small_talk_includes_thanks_for_help_and_czech_farewells():
    for said in ("Thanks, that's helpful.", "Thanks, that's really useful!", "Díky, to je všechno.",
                 "To je zatím všechno, díky.", "Díky, na shledanou."):
        assert is_small_talk(said), said
    assert not is_small_talk("Helpful tips for night shifts, please.")
    assert not is_small_talk("Na shledanou v Brně v sobotu.")


def test_noise_needles_cover_every_pattern():
    """The substring test before the patterns passes every text a pattern matches: one example of each
    pattern, in other cases, passes it and is noise; texts without any needle are not searched."""
    from clawrecall.retrieval import noise

    examples = ["I DON'T have any records", "im not sure about that", "I don't recall it", "i dont remember",
                "It looks like I don't", "I wasn't able to find it", "No relevant memories found", "i don't have access to x",
                "So do you remember me", "Can You Recall that", "did I mention my dog", "Have I told you", "What did I say",
                "你还记得吗", "你记不记得", "还记得那天吗", "我之前说过", "Hello!!", "Fresh session started", "new session here",
                "HEARTBEAT_OK", "query -> none", "The user asked for X: unknown", "there is no explicit solution"]
    assert len(examples) == len(noise._PATTERNS)
    for pattern, text in zip(noise._PATTERNS, examples):
        assert re.search(pattern, text, re.IGNORECASE), (pattern, text)
        assert is_noise(text), text


def test_shared_stems_set_endings_and_accents_aside():
    """Czech inflects: "which colour (barvu)" asks about "my colour (barva)", a daughter is "dceři" to buy for
    and "dcera" when named."""
    assert shared_stems("Jakou barvu mám koupit na nový svetr?", "Moje oblíbená barva je zelená.") == ["barvu"]
    assert shared_stems("Co koupit dceři k narozeninám?", "Moje dcera se jmenuje Eliška.") == ["dceri"]
    assert shared_stems("Which city do I live in?", "I live in Toronto") == ["live"]
    # stopwords ("moje", "mám"), words of two letters ("na") and stems of three ("bar") are no evidence
    assert shared_stems("Moje barva, mám ji na tričku.", "Moje pes Bára, mám ho na zahradě.") == []
    assert shared_stems("a night shift", "a nice shirt") == []  # all but the last letter: "shif" is not "shir"
    assert shared_stems("Python 3.12 on port 8080", "Python 3.11 on port 80") == ["python", "port"]  # numbers: whole
    assert shared_stems("deploy", "x" * COVERAGE_READ + " deploy") == []  # past COVERAGE_READ: not read
    assert shared_stems("我喜欢喝咖啡吗", "我每天早上喝咖啡") == ["我喜欢喝咖啡吗"]  # "咖啡": no word breaks to split at
    assert shared_stems("我喜欢狗", "我每天早上喝咖啡") == []  # one character in common ("我") is none
    # a linking verb is no evidence: naming ("se jmenuje", "зовут") tells what a name is of, not what is named
    assert shared_stems("Moje dcera se jmenuje Eliška.", "Náš projekt se jmenuje Kometa.") == []
    assert shared_stems("Jak se jmenuje můj pes?", "Můj pes se jmenuje Bára.") == ["pes"]
    assert shared_stems("Мою дочь зовут Маша.", "Мою собаку зовут Рекс.") == []


def test_coverage_and_trigram_rescore_read_a_bounded_head():
    tail = " deployment rollback"
    words = keywords("deployment rollback")
    assert keyword_coverage(words, "deployment rollback") == 1.0
    assert keyword_coverage(words, _LOG + tail) == 0.0  # past COVERAGE_READ: not read
    assert keyword_coverage(words, _LOG[: COVERAGE_READ - len(tail)] + tail) == 1.0  # within it: read
    hits = trigram_rescore("rollback", [rec("far", _LOG + tail), rec("near", tail + _LOG)])
    assert [c.id for c in hits] == ["near"]
    assert "zebra" in common_words(["zebra " + _LOG] * 3, 0.5)
    assert "zebra" not in common_words([_LOG + " zebra"] * 3, 0.5)  # the tail's word is not read


def test_query_analysis():
    assert keywords("What did Alice say about the trip?") == ["alice", "say", "trip"]
    assert keywords("the of and") == ["the", "of", "and"]
    assert "ube" in trigrams("kubernetes") and trigrams("ab") == []
    assert trigrams("深色主题") == ["深色主", "色主题"]


def test_common_words_leave_the_vector_query():
    texts = ["Alice: I like tea", "Bob: Alice, tea or coffee?", "Alice: the pottery class", "Bob: nice"]
    assert common_words(texts, 0.4) == {"alice", "bob", "tea"}  # stopwords are never "common"
    assert without_words("What did Alice's friend Bob make at the pottery class?", {"alice", "bob"}) == (
        "What did friend make at the pottery class?"
    )
    assert without_words("Who is Alice?", {"alice"}) == "Who is Alice?"  # nothing but stopwords would remain
    assert without_words("Who is Alice?", set()) == "Who is Alice?"


def test_a_store_is_scored_with_its_models_calibration():
    """The configured fit belongs to its model; the local models' fits are built in; any other model
    has none (its scores are ranking scores)."""
    own = RelevanceConfig(model="openai/text-embedding-3-small", intercept=-5.0, cosine=9.0, coverage=0.1)
    assert own.for_model("openai/text-embedding-3-small") is own
    e5 = own.for_model("local/multilingual-e5-small")
    assert (e5.model, e5.intercept, e5.cosine, e5.coverage) == ("local/multilingual-e5-small", -35.21, 42.88, 0.02)
    assert RelevanceConfig().for_model("local/all-MiniLM-L6-v2") == RelevanceConfig()
    assert own.for_model("voyage/voyage-3") is None
    # naming a local model without coefficients gives it its own fit, not MiniLM's defaults
    named = RelevanceConfig(model="local/multilingual-e5-small").for_model("local/multilingual-e5-small")
    assert (named.intercept, named.cosine) == (-35.21, 42.88)


def test_similarity_thresholds_are_mapped_to_a_measured_models_scale():
    from clawrecall.embeddings.base import REFERENCE_UNRELATED
    from clawrecall.embeddings.hashing import HashEmbedder

    class Measured(HashEmbedder):
        def unrelated_cosine(self):
            return 0.72

    assert HashEmbedder("h").cosine_for(0.95) == 0.95  # not measured: as configured
    measured = Measured("h")
    assert measured.cosine_for(0.95) == pytest.approx(0.72 + (0.95 - REFERENCE_UNRELATED) * 0.28 / (1 - REFERENCE_UNRELATED))
    assert measured.cosine_for(REFERENCE_UNRELATED) == pytest.approx(0.72) and measured.cosine_for(1.0) == pytest.approx(1.0)


def test_russian_and_czech_stopwords_leave_english_names_and_initials_alone():
    assert keywords("В какой день недели выкатываем релизы?") == ["день", "недели", "выкатываем", "релизы"]
    assert keywords("Jak se dopravuji do zaměstnání?") == ["dopravuji", "zaměstnání"]
    assert keywords("When is Tom's birthday? Did Ty, Ani and Po visit the U.S.?") == [
        "tom", "birthday", "ty", "ani", "po", "visit", "u"]
