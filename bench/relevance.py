"""Relevance benchmark: does a hit's absolute score say whether anything relevant was found?

Two sets, each with questions whose answer is stored ("own") and questions whose answer is not
("foreign"):

  * LoCoMo: each conversation in a scope of its own (as bench/locomo.py stores it); its own
    questions (categories 1-4), and 200 questions drawn from the other conversations;
  * people (bench/data/relevance_people.json, written for this): 8 synthetic users with ~20
    short memories each, English with some Czech and Russian; answerable questions, near
    misses (same topic, other person or detail) and unrelated questions, each searched in the
    asking user's scope only.

For each set it prints the AUROC of a question's best hit score (own against foreign; a
question with no hit scores 0), and per threshold the share of foreign questions that return
nothing and the recall@10 of own questions (the share of their answers among the hits kept).

`--fit` fits the calibration (`retrieval.relevance`) by logistic regression, own against
foreign, on the first three LoCoMo conversations and the first four people (each set weighted
equally) and prints it; the last two conversations and the last four people are held out from
the fit and from the choice of the default threshold.

    python bench/relevance.py [--db-dir DIR] [--db-url postgresql://…] [--fit] [--embedding-model M] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo import DEFAULT_DATA, TUNE, questions, turns  # noqa: E402

from clawrecall import Memory  # noqa: E402

PEOPLE = Path(__file__).resolve().parent / "data" / "relevance_people.json"
THRESHOLDS = (0.05, 0.1, 0.12, 0.15, 0.2, 0.3)
TUNE_PEOPLE = {"u1", "u2", "u3", "u4"}  # the people the calibration is fitted on; the rest are held out
SPLITS = ("locomo-tune", "locomo-held", "people-tune", "people-held", "people-held-unrelated")
FOREIGN_PER_CONVERSATION = 200


def locomo_questions(mem: Memory, build: bool) -> list[dict]:
    """Every question: scope, text, own (1/0), the dia_ids that answer it, and its split."""
    data = json.loads(Path(DEFAULT_DATA).read_text())
    own: dict[str, list[dict]] = {}
    for sample in data:
        scope = f"custom:{sample['sample_id']}"
        items = turns(sample)
        if build:
            mem.add_many([{**t, "scope": scope} for t in items], dedup=False)
        counters = {"evidence_split": 0, "evidence_unknown": 0, "questions_without_evidence": 0}
        own[scope] = questions(sample, {t["metadata"]["dia_id"] for t in items}, counters)
    rng = random.Random(7)
    out = []
    for n, scope in enumerate(own):
        split = "locomo-tune" if n < TUNE else "locomo-held"
        foreign = [q for other in own if other != scope for q in own[other]]
        rng.shuffle(foreign)
        out += [{"scope": scope, "q": q["question"], "own": 1, "answers": q["evidence"], "split": split} for q in own[scope]]
        out += [{"scope": scope, "q": q["question"], "own": 0, "answers": set(), "split": split}
                for q in foreign[:FOREIGN_PER_CONVERSATION]]
    return out


def people_questions(mem: Memory, build: bool) -> list[dict]:
    data = json.loads(PEOPLE.read_text())
    if build:
        mem.add_many([
            {"content": m["content"], "scope": f"user:{u['id']}", "metadata": {"dia_id": f"{u['id']}/{m['key']}"}}
            for u in data["users"] for m in u["memories"]
        ], dedup=False)
    return [
        {"scope": f"user:{q['user']}", "q": q["question"], "own": int(q["kind"] == "answerable"),
         "answers": {f"{q['user']}/{k}" for k in q["answer_keys"]}, "kind": q["kind"],
         "split": "people-tune" if q["user"] in TUNE_PEOPLE else "people-held"}
        for q in data["questions"]
    ]


def run(mem: Memory, qs: list[dict]) -> None:
    """Search each question with no threshold; keep each hit's answer label and score parts."""
    for q in qs:
        hits = mem.search(q["q"], scope=q["scope"], limit=10, explain=True, min_score=0.0)
        q["hits"] = [
            {"answer": h.memory.metadata.get("dia_id") in q["answers"], "score": h.score, **h.explain["relevance"]}
            for h in hits
        ]


def auroc(pos: list[float], neg: list[float]) -> float:
    """The chance that a random own question's first score beats a random foreign one's (ties count half)."""
    p, n = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


def report(qs: list[dict]) -> dict:
    first = lambda q: max((h["score"] for h in q["hits"]), default=0.0)  # noqa: E731
    own = [q for q in qs if q["own"]]
    foreign = [q for q in qs if not q["own"]]
    recall = lambda q, t: sum(h["answer"] and h["score"] >= t for h in q["hits"]) / len(q["answers"])  # noqa: E731
    return {
        "own": len(own), "foreign": len(foreign),
        "auroc": auroc([first(q) for q in own], [first(q) for q in foreign]),
        "recall@10": float(np.mean([recall(q, 0.0) for q in own])),
        "thresholds": {
            t: {"foreign_empty": float(np.mean([first(q) < t for q in foreign])),
                "recall@10": float(np.mean([recall(q, t) for q in own]))}
            for t in THRESHOLDS
        },
    }


def fit(sets: list[list[dict]]) -> dict[str, float]:
    """Weighted logistic regression of own (1) against foreign (0) on a question's best hit cosine and
    best keyword coverage, each set weighing as much as the others whatever its size."""
    rows = [(max(h["cosine"] for h in q["hits"]), max(h["coverage"] for h in q["hits"]), q["own"], 1 / len(qs))
            for qs in sets for q in qs if q["hits"]]
    x = np.c_[np.ones(len(rows)), [(c, k) for c, k, _, _ in rows]]
    y = np.array([r[2] for r in rows], dtype=float)
    weight = np.array([r[3] for r in rows]) * len(rows) / len(sets)
    w = np.zeros(3)
    for _ in range(60):  # Newton's method, a little ridge for stability
        p = 1 / (1 + np.exp(-x @ w))
        hess = (x * (weight * p * (1 - p))[:, None]).T @ x + 1e-2 * np.eye(3)
        w -= np.linalg.solve(hess, x.T @ (weight * (p - y)) + 1e-2 * w)
    return {"intercept": round(float(w[0]), 2), "cosine": round(float(w[1]), 2), "coverage": round(float(w[2]), 2)}


def fresh_database(url: str, name: str) -> str:
    """An empty database `name` on the server of `url` (dropped first if it exists); its URL."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db-dir", default=str(Path(tempfile.gettempdir()) / "clawrecall-relevance"),
                        help="where the SQLite stores are kept between runs")
    parser.add_argument("--db-url", help="a PostgreSQL server URL (a user that may CREATE DATABASE): the stores are built "
                        "afresh in its databases relevance_locomo and relevance_people instead")
    parser.add_argument("--fit", action="store_true", help="fit the calibration on the tuning conversations and print it")
    parser.add_argument("--embedding-model", help="the local model to measure (default: the configured one), scored "
                        "with its built-in calibration, or with the coefficients CLAWRECALL_RETRIEVAL__RELEVANCE__* "
                        "set for it (with __MODEL=local/<model>)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    results: dict[str, dict] = {}
    everything: list[dict] = []
    for name, build_questions in (("locomo", locomo_questions), ("people", people_questions)):
        if args.db_url:
            target, build = fresh_database(args.db_url, f"relevance_{name}"), True
        else:
            Path(args.db_dir).mkdir(parents=True, exist_ok=True)
            target = str(Path(args.db_dir) / f"{name}.db")
            build = not Path(target).exists()
        model = {"embedding": {"model": args.embedding_model}} if args.embedding_model else {}
        with Memory.open(target, **model) as mem:
            qs = build_questions(mem, build)
            run(mem, qs)
        everything += qs
    held_unrelated = [q for q in everything if q["split"] == "people-held" and q["kind"] != "near_miss"]
    for split in SPLITS[:-1]:
        results[split] = report([q for q in everything if q["split"] == split])
    results[SPLITS[-1]] = report(held_unrelated)
    if args.fit:
        results["fit"] = fit([[q for q in everything if q["split"] == split] for split in ("locomo-tune", "people-tune")])
    if args.json:
        print(json.dumps(results, indent=2, default=str))
        return 0
    print("| set | own | foreign | AUROC (best hit) | recall@10, no threshold |"
          + "".join(f" t={t}: foreign empty / recall@10 |" for t in THRESHOLDS))
    print("|---|---:|---:|---:|---:|" + "---:|" * len(THRESHOLDS))
    for split in SPLITS:
        r = results[split]
        cells = "".join(f" {v['foreign_empty']:.2f} / {v['recall@10']:.3f} |" for v in r["thresholds"].values())
        print(f"| {split} | {r['own']} | {r['foreign']} | {r['auroc']:.3f} | {r['recall@10']:.3f} |{cells}")
    if args.fit:
        print(f"\nfitted on locomo-tune and people-tune: {results['fit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
