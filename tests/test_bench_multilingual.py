"""bench/multilingual.py: its data file is complete, its metric counts what it says, and a run with the
`hash` embedder scores the real data (where spelling, not meaning, decides)."""

import json
import sys
from pathlib import Path

import numpy as np

from clawrecall.config import EmbeddingConfig
from clawrecall.embeddings import create_embedder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import multilingual


def test_the_data_file_has_forty_facts_each_with_a_question_in_four_languages():
    data = multilingual.load_data()
    assert data["languages"] == ["en", "ru", "cs", "zh"] and data["about"].strip()
    assert len(data["facts"]) == 40
    assert len({f["id"] for f in data["facts"]}) == 40
    for fact in data["facts"]:
        for part in ("fact", "question"):
            assert set(fact[part]) == set(data["languages"]), fact["id"]
            assert all(text.strip() for text in fact[part].values()), fact["id"]
        assert all(fact["fact"][lang] != fact["question"][lang] for lang in data["languages"]), fact["id"]
    for lang in data["languages"]:  # no two facts (nor two questions) share a text
        assert len(set(multilingual.texts(data, "fact", lang))) == 40
        assert len(set(multilingual.texts(data, "question", lang))) == 40


def test_accuracy_counts_a_first_hit_and_a_hit_within_k():
    passages = np.eye(3, dtype=np.float32)
    queries = np.array([[0.9, 0.1, 0.0], [0.1, 0.2, 0.9], [0.6, 0.0, 0.5]], dtype=np.float32)
    # query 0 finds row 0 first; query 1 wants row 1, second; query 2 wants row 2 or 1, row 2 is second
    answers = [{0}, {1}, {1, 2}]
    assert multilingual.accuracy(queries, passages, answers, k=1) == {"top1": 1 / 3, "recall@1": 1 / 3}
    assert multilingual.accuracy(queries, passages, answers, k=2) == {"top1": 1 / 3, "recall@2": 1.0}


def test_questions_that_repeat_their_facts_are_found_first_in_every_family():
    data = multilingual.load_data()
    echo = {**data, "facts": [{**f, "question": f["fact"]} for f in data["facts"]]}
    result = multilingual.measure(create_embedder(EmbeddingConfig(provider="hash", query_cache_size=0)), echo, queries=5, long=0)
    assert result["monolingual"]["mean"] == {"top1": 1.0, "recall@5": 1.0}
    assert result["mixed"]["mean"]["top1"] == 1.0  # the same text in the pool, in the question's language
    assert result["cross-lingual"]["zh > en"]["top1"] < 0.5  # hashed spelling does not cross from Chinese to English
    assert "long_per_s" not in result["speed"]


def test_the_command_prints_every_family_for_each_model(capsys):
    # the search family (Memory.search over 320 stored facts, the costly one) in the table run only
    assert multilingual.main(["--provider", "hash", "--models", "a,b", "--queries", "5", "--long", "3", "--json",
                              "--no-search"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert list(results) == ["a", "b"] and "search" not in results["a"]
    assert results["a"]["monolingual"] == results["b"]["monolingual"]  # the hash embedder ignores the model's name
    assert set(results["a"]["cross-lingual"]) == {"ru > en", "cs > en", "zh > en", "en > ru", "en > cs", "en > zh", "mean"}
    assert 0 < results["a"]["monolingual"]["en"]["top1"] < 1  # paraphrased questions: words alone find some, not all
    assert results["a"]["speed"]["long_passages"] == 3 and results["a"]["speed"]["runtime"] == "hash"
    multilingual.main(["--provider", "hash", "--models", "a", "--queries", "5", "--long", "3"])
    table = capsys.readouterr().out
    assert "| zh > en |" in table and "| passages/s, 3 of 4-8 facts |" in table
    assert "\nSearch: Memory.search" in table and "| mixed, all questions (vector) |" in table


def test_the_search_family_asks_the_product_and_scores_each_pool():
    """Memory.search over stored facts: with the hash embedder, a question that repeats its fact is found
    first in every pool and mode; paraphrased ones only sometimes."""
    data = multilingual.load_data()
    echo = {**data, "facts": [{**f, "question": f["fact"]} for f in data["facts"]]}
    result = multilingual.searched("hash", "hashed-word-trigrams", echo)
    assert set(result) == {f"{pool} ({mode})" for pool in ("en", "ru", "cs", "zh") for mode in ("hybrid", "vector")} | {
        "mixed, all questions (hybrid)", "mixed, all questions (vector)"}
    assert all(score == {"top1": 1.0, "recall@5": 1.0} for score in result.values()), result
    paraphrased = multilingual.searched("hash", "hashed-word-trigrams", data)
    assert 0 < paraphrased["en (hybrid)"]["top1"] < 1
