"""Multilingual and cross-lingual retrieval of local embedding models, on 40 facts about a user written
in English, Russian, Czech and Chinese, each with a question that asks for it
(bench/data/multilingual_facts.json). Per model:

  * monolingual: a question in X searched over the 40 facts in X (top-1 accuracy, recall@5);
  * cross-lingual: a question in X over the English facts, and an English question over the facts in X;
  * mixed pool: the 160 facts of all four languages together, a question in X; a hit is its fact in
    any language (a user who writes memories in more than one language);
  * search: the product's own search (`Memory.search`, hybrid and vector-only) over each language's 40
    facts stored as memories, and over the 160 facts of all languages in one scope: what the keyword
    legs add to, or take from, the model in each language;
  * speed: load time (the first call), one query's latency (median and p90 of 100 after a warm-up),
    passages per second on the 160 facts and on longer synthetic passages (4-8 facts of one language).

Every model runs through the product's own embedder (`create_embedder`), so the E5 prefixes and the
engine are the ones a store uses; the query cache is off, so every query is embedded.

    nice python bench/multilingual.py [--models all-MiniLM-L6-v2,multilingual-e5-small] [--provider local]
        [--queries 100] [--long 500] [--no-search] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from clawrecall.config import EmbeddingConfig
from clawrecall.embeddings import Embedder, create_embedder

DATA = Path(__file__).resolve().parent / "data" / "multilingual_facts.json"
K = 5
WARM_UP = 20


def load_data(path: Path = DATA) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def texts(data: dict, part: str, lang: str) -> list[str]:
    """The facts' (`part="fact"`) or questions' texts in one language, in fact order."""
    return [f[part][lang] for f in data["facts"]]


def accuracy(queries: np.ndarray, passages: np.ndarray, answers: list[set[int]], k: int = K) -> dict[str, float]:
    """Top-1 accuracy and recall@k of unit query vectors over unit passage vectors; `answers[i]` holds
    the passage rows that answer query i (recall@k: one of them is among the first k)."""
    top = np.argsort(-(queries @ passages.T), axis=1, kind="stable")[:, :k]
    return {
        "top1": float(np.mean([row[0] in answer for row, answer in zip(top, answers)])),
        f"recall@{k}": float(np.mean([bool(answer.intersection(row.tolist())) for row, answer in zip(top, answers)])),
    }


def with_mean(scores: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {**scores, "mean": {m: float(np.mean([s[m] for s in scores.values()])) for m in next(iter(scores.values()))}}


def retrieval(facts: dict[str, np.ndarray], questions: dict[str, np.ndarray]) -> dict[str, dict]:
    """The three retrieval families from each language's fact and question vectors (row i = fact i)."""
    langs = list(facts)
    n = len(facts[langs[0]])
    own = [{i} for i in range(n)]
    pool = np.vstack([facts[lang] for lang in langs])
    any_language = [{i + n * k for k in range(len(langs))} for i in range(n)]
    others = [lang for lang in langs if lang != "en"]
    return {
        "monolingual": with_mean({lang: accuracy(questions[lang], facts[lang], own) for lang in langs}),
        "cross-lingual": with_mean({
            **{f"{lang} > en": accuracy(questions[lang], facts["en"], own) for lang in others},
            **{f"en > {lang}": accuracy(questions["en"], facts[lang], own) for lang in others},
        }),
        "mixed": with_mean({lang: accuracy(questions[lang], pool, any_language) for lang in langs}),
    }


def searched(provider: str, model: str, data: dict) -> dict[str, dict]:
    """Top-1 / recall@5 of `Memory.search` (hybrid and vector) over each language's facts as memories of
    one user, and over all 160 in one scope (a hit is the question's fact in any language)."""
    import tempfile

    from clawrecall import Memory

    langs = data["languages"]
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp, Memory.open(
        f"{tmp}/bench.db", embedding={"provider": provider, "model": model}, dedup={"enabled": False}
    ) as mem:
        for lang in langs:
            for i, fact in enumerate(texts(data, "fact", lang)):
                for user in (lang, "mixed"):
                    mem.add(fact, user_id=user, metadata={"fact": i})
        for mode in ("hybrid", "vector"):
            for pool in (*langs, "mixed"):
                scores = []
                for lang in langs if pool == "mixed" else [pool]:
                    for i, question in enumerate(texts(data, "question", lang)):
                        hits = mem.search(question, user_id=pool, limit=K, mode=mode)
                        found = [h.memory.metadata.get("fact") for h in hits]
                        scores.append((found[:1] == [i], i in found))
                label = f"{pool} ({mode})" if pool != "mixed" else f"mixed, all questions ({mode})"
                out[label] = {"top1": float(np.mean([a for a, _ in scores])), f"recall@{K}": float(np.mean([b for _, b in scores]))}
    return out


def long_passages(data: dict, n: int) -> list[str]:
    """`n` memory-sized texts of 4-8 facts of one language each (the same texts every run)."""
    rng = random.Random(0)
    out = []
    for _ in range(n):
        lang = rng.choice(data["languages"])
        out.append(" ".join(rng.sample(texts(data, "fact", lang), rng.randint(4, 8))))
    return out


def rate(embedder: Embedder, passages: list[str]) -> tuple[np.ndarray, float, float]:
    """The passages' vectors, passages per second, and CPU ms per passage (this process, all threads:
    on a shared machine it moves less than the wall clock)."""
    start, cpu = time.perf_counter(), time.process_time()
    vectors = embedder.embed(passages, "passage")
    return vectors, len(passages) / (time.perf_counter() - start), (time.process_time() - cpu) * 1000 / len(passages)


def measure(embedder: Embedder, data: dict, queries: int = 100, long: int = 500) -> dict:
    """Load, time single queries, embed every fact and question, score them; one model's results."""
    langs = data["languages"]
    start = time.perf_counter()
    embedder.embed(["warm-up"], "passage")
    load_s = time.perf_counter() - start
    all_questions = [q for lang in langs for q in texts(data, "question", lang)]
    times, cpu = [], 0.0
    for i, q in enumerate((all_questions * (1 + (WARM_UP + queries) // len(all_questions)))[: WARM_UP + queries]):
        start, started_cpu = time.perf_counter(), time.process_time()
        embedder.embed([q], "query")
        if i >= WARM_UP:
            times.append(time.perf_counter() - start)
            cpu += time.process_time() - started_cpu
    vectors, facts_per_s, facts_cpu_ms = rate(embedder, [f for lang in langs for f in texts(data, "fact", lang)])
    asked = embedder.embed(all_questions, "query")
    n = len(data["facts"])
    split = lambda m: {lang: m[i * n : (i + 1) * n] for i, lang in enumerate(langs)}
    times.sort()
    speed = {
        "runtime": getattr(embedder, "active_runtime", embedder.provider),
        "load_s": load_s,
        "query_ms_median": statistics.median(times) * 1000,
        "query_ms_p90": times[int(len(times) * 0.9)] * 1000,
        "query_cpu_ms": cpu * 1000 / len(times),
        "facts_per_s": facts_per_s,
        "facts_cpu_ms": facts_cpu_ms,
    }
    if long:
        speed["long_passages"] = long
        speed["long_per_s"], speed["long_cpu_ms"] = rate(embedder, long_passages(data, long))[1:]
    return {**retrieval(split(vectors), split(asked)), "speed": speed}


def print_tables(results: dict[str, dict]) -> None:
    models = list(results)

    def table(title: str, rows: list[tuple[str, object]]) -> None:
        print(f"\n{title}\n\n| | " + " | ".join(models) + " |\n|---|" + "---:|" * len(models))
        for label, cell in rows:
            print(f"| {label} | " + " | ".join(cell(results[m]) for m in models) + " |")

    pair = lambda family, key: lambda r: f"{r[family][key]['top1']:.2f} / {r[family][key][f'recall@{K}']:.2f}"
    first = results[models[0]]
    for family, title in (
        ("monolingual", "Monolingual: question and facts in one language (top-1 / recall@5, 40 facts)"),
        ("cross-lingual", "Cross-lingual: question language > facts language (top-1 / recall@5, 40 facts)"),
        ("mixed", "Mixed pool: 160 facts in four languages, the fact in any language counts (top-1 / recall@5)"),
        ("search", "Search: Memory.search over the facts stored as memories, hybrid and vector-only (top-1 / recall@5)"),
    ):
        if family in first:
            table(title, [(key, pair(family, key)) for key in first[family]])
    speed = lambda key, fmt: lambda r: format(r["speed"][key], fmt) if key in r["speed"] else "-"
    rows = [("runtime", speed("runtime", "")), ("load, s", speed("load_s", ".2f")),
            ("one query, median ms", speed("query_ms_median", ".1f")), ("one query, p90 ms", speed("query_ms_p90", ".1f")),
            ("one query, CPU ms", speed("query_cpu_ms", ".1f")),
            ("passages/s, the 160 facts", speed("facts_per_s", ".1f")),
            ("CPU ms per fact", speed("facts_cpu_ms", ".1f"))]
    if "long_per_s" in first["speed"]:
        long = first["speed"]["long_passages"]
        rows += [(f"passages/s, {long} of 4-8 facts", speed("long_per_s", ".1f")),
                 ("CPU ms per passage of 4-8 facts", speed("long_cpu_ms", ".1f"))]
    table("Speed", rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="all-MiniLM-L6-v2,multilingual-e5-small", help="comma-separated")
    parser.add_argument("--provider", default="local")
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--queries", type=int, default=100, help="single queries timed after the warm-up")
    parser.add_argument("--long", type=int, default=500, help="longer passages timed (0: none)")
    parser.add_argument("--no-search", dest="search", action="store_false", help="skip the Memory.search family")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    data = load_data(args.data)
    results = {}
    for model in args.models.split(","):
        embedder = create_embedder(EmbeddingConfig(provider=args.provider, model=model, query_cache_size=0))
        results[model] = measure(embedder, data, args.queries, args.long)
        if args.search:
            results[model]["search"] = searched(args.provider, model, data)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_tables(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
