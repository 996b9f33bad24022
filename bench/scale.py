"""Scale benchmark: times add and search at 10k and 100k memories.

For each size it builds a store of synthetic one-sentence memories (about 30 templates
times a vocabulary, fixed seed; 20 user scopes plus `global`; created_at spread over two
years; sessions of about 20 turns) through `Memory.add_many` in chunks of 1000 with the
real local model and the default dedup, then measures:

  * add rate over the whole build; every 5th chunk is also embedded alone
    (`embedder.embed(..., kind="passage")`) right before or after it is added, and the
    ratio of raw embedding time to add time over those pairs is the build ratio;
  * the same on a copy of the built store: `--add-rounds` chunks of new memories (created
    now, in new sessions) with dedup on, then off, every one paired (the marginal cost of
    adding at that size); `--add-texts notes,sentences,paragraphs` adds rounds of shorter and
    longer texts (with dedup on);
  * the first search on a freshly opened store (vector index load included);
  * search latency p50/p95 over distinct natural queries, query embedding included
    (query cache off), limit 10: hybrid, vector-only and bm25-only, each in one user's
    scope + global (a caller with `user_id`) and unscoped;
  * `clawrecall --db PATH stats --json` wall time as a subprocess.

A built store (and its build timings) is kept in `--db-dir` (default: a fixed folder in
the system temp dir), so a re-run skips the build. `--profile` prints a cProfile of the
scoped hybrid searches.

    python bench/scale.py [--sizes 10000,100000] [--db-dir DIR] [--queries 200] [--repeat 3]
                         [--add-rounds 15] [--add-texts sentences] [--rebuild] [--profile] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from clawrecall import Memory

SEED = 20240501
USERS = [f"u{i:02d}" for i in range(1, 21)]
GLOBAL_SHARE = 0.05
CHUNK = 1000
PAIR_EVERY = 5  # build: every 5th chunk is paired with a raw embedding of its texts
START = datetime(2023, 6, 1, tzinfo=timezone.utc)
SPAN_S = 730 * 86400
DEFAULT_DB_DIR = Path(tempfile.gettempdir()) / "clawrecall-scale"

TARGETS = {
    "search_p50_ms": {10_000: 15.0, 100_000: 30.0},
    "search_p95_ms": {10_000: 30.0},
    "add_per_s": 200.0,
    "ratio": 0.9,
    "stats_s": 0.5,
}

# -- synthetic memories ---------------------------------------------------------------------
V = {
    "name": "Alice Bob Carla Dmitri Elena Farid Grace Hiro Ines Jonas Kemal Lena Marco Nadia Omar Priya Quentin "
    "Rosa Sven Tomas Uma Victor Wen Ximena Yusuf Zoe Amara Bruno Chloe Diego Esme Felix Gita Hugo Ivy Jamal "
    "Kaito Lucia Mateo Noor".split(),
    "thing": ["green tea", "black coffee", "oat milk", "a standing desk", "mechanical keyboards", "dark mode",
              "paper notebooks", "noise-cancelling headphones", "window seats", "early flights", "vinyl records",
              "trail running shoes", "a French press", "sparkling water", "linen shirts", "e-books",
              "a second monitor", "handwritten notes", "podcasts", "quiet cafes", "fountain pens", "hot chocolate",
              "wool socks", "a gravel bike", "film cameras", "board games", "spicy food", "jazz playlists"],
    "activity": ["studying", "long drives", "deep work", "morning runs", "code reviews", "reading on weekends",
                 "travelling", "cooking dinner", "team meetings", "writing reports", "late-night debugging",
                 "hiking trips", "language practice", "planning sprints", "yoga sessions", "commuting",
                 "sketching", "weekly reviews", "pair programming", "gardening"],
    "team": ["platform team", "design team", "data team", "mobile team", "security team", "growth team",
             "infra team", "support team", "research group", "finance team", "marketing team", "search team",
             "payments team", "ML team", "QA team", "sales team"],
    "action": ["migrate the database to Postgres 16", "freeze deploys before the launch", "switch CI to GitHub Actions",
               "adopt weekly demos", "rewrite the billing service", "drop support for Python 3.8",
               "move standups to 10am", "hire two more engineers", "deprecate the v1 API", "run a bug bash",
               "adopt feature flags", "cut the cloud bill by 20 percent", "ship the onboarding redesign",
               "rotate on-call weekly", "retire the legacy dashboard", "move the wiki to Notion",
               "split the monolith", "add SSO for enterprise customers", "pause the referral program",
               "open an office in Lisbon"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "date": ["the first of the month", "the end of the quarter", "March 3rd", "June 14th", "September 9th",
             "November 21st", "January 8th", "the next retro", "the board meeting", "the offsite"],
    "transport": ["bike", "tram", "train", "car", "scooter", "bus", "ferry", "foot"],
    "city": ["Lisbon", "Berlin", "Osaka", "Toronto", "Nairobi", "Austin", "Lyon", "Seoul", "Melbourne", "Bogota",
             "Krakow", "Dublin", "Cape Town", "Porto", "Helsinki", "Montreal", "Taipei", "Edinburgh"],
    "food": ["ramen", "tacos", "sushi", "lentil soup", "pizza margherita", "pad thai", "shakshuka", "dumplings",
             "falafel", "risotto", "pho", "butter chicken", "poke bowls", "pierogi", "paella", "bibimbap"],
    "tool": ["VS Code", "Neovim", "PyCharm", "Figma", "Notion", "Obsidian", "Linear", "Jira", "Slack", "Docker",
             "Kubernetes", "Terraform", "Grafana", "Postman", "Excel", "Tableau", "Emacs", "Zotero"],
    "project": ["Atlas", "Beacon", "Cobalt", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Iris", "Juniper",
                "Kestrel", "Lumen", "Mosaic", "Nimbus", "Orion", "Pioneer", "Quartz", "Riverbed"],
    "pet": ["a beagle named Pixel", "two cats", "a parrot", "a golden retriever", "a rescue greyhound",
            "an old tabby cat", "a tank of guppies", "a rabbit named Clover", "a border collie", "a tortoise"],
    "lang": ["Spanish", "Japanese", "German", "Portuguese", "Korean", "Italian", "Mandarin", "Arabic", "Dutch",
             "Swahili", "Polish", "French"],
    "sport": ["tennis", "climbing", "swimming", "five-a-side football", "cycling", "badminton", "rowing",
              "table tennis", "volleyball", "skiing", "boxing", "surfing"],
    "book": ["Dune", "The Pragmatic Programmer", "Sapiens", "Project Hail Mary", "Educated", "Thinking, Fast and Slow",
             "The Left Hand of Darkness", "Atomic Habits", "Piranesi", "Designing Data-Intensive Applications",
             "The Remains of the Day", "Klara and the Sun"],
    "month": ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
              "November", "December"],
    "time": ["7am", "8:30am", "9am", "noon", "2pm", "4:30pm", "6pm", "9pm"],
    "num": [str(n) for n in (2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50)],
    "allergy": ["peanuts", "shellfish", "gluten", "lactose", "cats", "pollen", "penicillin", "sesame"],
    "role": ["staff engineer", "product manager", "data scientist", "designer", "engineering manager",
             "support lead", "SRE", "tech lead", "analyst", "recruiter"],
    "bug": ["a memory leak", "a race condition", "a timezone bug", "flaky tests", "a broken migration",
            "slow cold starts", "a deadlock", "an off-by-one error", "a stale cache", "a TLS handshake failure"],
    "component": ["the checkout service", "the search index", "the auth gateway", "the mobile app",
                  "the nightly ETL job", "the billing worker", "the email queue", "the API gateway",
                  "the reporting dashboard", "the sync daemon"],
}

# (category, template)
TEMPLATES = [
    ("preference", "{name} prefers {thing} for {activity}."),
    ("preference", "{name} dislikes {thing} and avoids it during {activity}."),
    ("preference", "{name} likes to eat {food} after {activity}."),
    ("preference", "{name} works best in {tool} and keeps {thing} nearby."),
    ("preference", "For {activity}, {name} always asks for {thing}."),
    ("decision", "The {team} decided to {action} on {date}."),
    ("decision", "On {day} the {team} agreed to {action} before {month}."),
    ("decision", "{name} from the {team} proposed to {action}; it was approved."),
    ("decision", "We chose {tool} over {tool2} for project {project}."),
    ("fact", "{name} lives in {city} and goes to the {team} office by {transport}."),
    ("fact", "{name} moved to {city} in {month} and works remotely."),
    ("fact", "{name} is allergic to {allergy}, so check before ordering {food}."),
    ("fact", "Project {project} has {num} open tickets and ships in {month}."),
    ("fact", "{name} speaks {lang} and is learning {lang2}."),
    ("fact", "The {team} meets every {day} at {time} to review project {project}."),
    ("person", "{name} is a {role} on the {team} since {month}."),
    ("person", "{name} has {pet} and takes it out at {time} before {activity}."),
    ("person", "{name}'s manager is {name2}, who joined the {team} in {month}."),
    ("entity", "Project {project} is owned by the {team} and tracked in {tool}."),
    ("entity", "{component} belongs to project {project} and pages the {team}."),
    ("experience", "{name} found {bug} in {component} while {activity}."),
    ("experience", "{name} visited {city} in {month} and loved the {food}."),
    ("experience", "{name} finished reading {book} during {activity}."),
    ("experience", "{name} played {sport} with {name2} last {day}."),
    ("action_item", "{name} will send the {project} status report to {name2} by {date}."),
    ("action_item", "Remind {name} to book flights to {city} before {month}."),
    ("action_item", "{name} needs to fix {bug} in {component} by {date}."),
    ("correction", "Correction: {name} lives in {city}, not {city2}."),
    ("correction", "Correction: the {team} meets at {time} on {day}, not {time2}."),
    ("session_summary", "{name} and {name2} discussed project {project}, {bug} and the plan to {action}."),
    ("other", "{name} recommended {book} to {name2} for {activity}."),
    ("other", "{name} takes {sport} lessons in {city} every {day} at {time}."),
]

# Query templates: (needs a filled slot set) → natural questions.
QUERY_TEMPLATES = [
    "What does {name} prefer for {activity}?",
    "When did the {team} decide to {action}?",
    "Where does {name} live?",
    "What is {name} allergic to?",
    "Who owns project {project}?",
    "Which tool does the {team} use for project {project}?",
    "What bug did {name} find in {component}?",
    "What food did {name} like in {city}?",
    "Which book did {name} read recently?",
    "What sport does {name} play on {day}?",
    "What languages does {name} speak?",
    "Who is {name}'s manager?",
    "What pet does {name} have?",
    "What is {name}'s role on the {team}?",
    "When does the {team} meet?",
    "What does {name} need to do before {date}?",
    "what did we decide about {action}",
    "status of project {project} tickets",
    "{name} travel plans to {city}",
    "who fixed {bug} in {component}",
]


def _fill(template: str, rng: random.Random) -> str:
    values: dict[str, str] = {}
    for key, words in V.items():
        a, b = rng.sample(words, 2)
        values[key] = a
        values[f"{key}2"] = b
    return template.format(**values)


def synthetic_memories(n: int, seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    per_scope = max(1, n // 20 // (len(USERS) + 1))  # sessions of ~20 memories, each in one scope
    starts: dict[str, datetime] = {}
    out = []
    for _ in range(n):
        category, template = rng.choice(TEMPLATES)
        user = None if rng.random() < GLOBAL_SHARE else rng.choice(USERS)
        scope = f"user:{user}" if user else "global"
        session = f"{user or 'global'}-s{rng.randrange(per_scope):05d}"
        if session not in starts:
            starts[session] = START + timedelta(seconds=rng.randrange(SPAN_S))
        out.append({
            "content": _fill(template, rng),
            "category": category,
            "scope": scope,
            "user_id": user,
            "session_id": session,
            "importance": round(rng.uniform(0.3, 1.0), 2),
            "created_at": starts[session] + timedelta(seconds=rng.randrange(3 * 3600)),
        })
    return out


TEXT_KINDS = ("notes", "sentences", "paragraphs")
PHRASES = sorted({p for words in V.values() for p in words})  # notes pair two of these: "Lisbon, green tea"


def new_memories(n: int, seed: int, texts: str = "sentences") -> list[dict]:
    """Memories as an agent adds them in use: created now, in new sessions of ~20 per scope (the
    build imports two years of history instead, with its old times and sessions). `texts`: short
    `notes` (two phrases), one-sentence memories (`sentences`, ~16 tokens), or `paragraphs` of five
    sentences."""
    items = synthetic_memories(n, seed=seed)
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    for it in items:
        del it["created_at"]
        if texts == "notes":  # 2-6 words, ~6 tokens: the cheapest texts to embed, so the hardest case
            it["content"] = ", ".join(rng.sample(PHRASES, 2))
        elif texts == "paragraphs":
            it["content"] = " ".join(_fill(rng.choice(TEMPLATES)[1], rng) for _ in range(5))
        k = counts[it["scope"]] = counts.get(it["scope"], 0) + 1
        it["session_id"] = f"{it['user_id'] or 'global'}-new{seed}-{k // 20:04d}"
    return items


def synthetic_queries(n: int, seed: int = SEED + 1) -> list[tuple[str, str]]:
    """`n` distinct (query, user) pairs."""
    rng = random.Random(seed)
    seen: dict[str, str] = {}
    while len(seen) < n:
        q = _fill(rng.choice(QUERY_TEMPLATES), rng)
        seen.setdefault(q, rng.choice(USERS))
    return list(seen.items())


# -- measurements -----------------------------------------------------------------------------
def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s))) - 1))]


def paired(raw_s: list[float], add_s: list[float], n_per_pair: int) -> dict:
    """Rates and their ratio from paired timings (add and raw embedding of the same chunk), with a
    bootstrap 95 % interval over the pairs. This machine's speed drifts by ±15 % over seconds; timing
    both halves of a pair back to back (alternating which goes first) cancels the drift."""
    rng = random.Random(SEED)
    n = len(raw_s)
    boot = sorted(
        sum(raw_s[i] for i in idx) / sum(add_s[i] for i in idx)
        for idx in ([rng.randrange(n) for _ in range(n)] for _ in range(2000))
    )
    return {
        "pairs": n,
        "add_per_s": n * n_per_pair / sum(add_s),
        "raw_per_s": n * n_per_pair / sum(raw_s),
        "ratio": sum(raw_s) / sum(add_s),
        "ratio_lo": boot[int(0.025 * len(boot))],
        "ratio_hi": boot[int(0.975 * len(boot)) - 1],
    }


def add_chunk(mem: Memory, chunk: list[dict], first_raw: bool, dedup: bool = True) -> tuple[float, float, list]:
    """(raw embedding seconds, add seconds, add results) for one chunk, timed back to back."""
    texts = [it["content"] for it in chunk]

    def raw() -> float:
        t = time.perf_counter()
        mem.upkeep.embedder.embed(texts, kind="passage")
        return time.perf_counter() - t

    raw_s = raw() if first_raw else 0.0
    t = time.perf_counter()
    results = mem.add_many(chunk, dedup=dedup)
    add_s = time.perf_counter() - t
    if not first_raw:
        raw_s = raw()
    return raw_s, add_s, results


def build(path: Path, n: int, log) -> dict:
    """Build the store with add_many in chunks; every `PAIR_EVERY`th chunk is also embedded alone, to pair
    its add time with the raw embedding time of the same texts. Returns the build timings."""
    items = synthetic_memories(n)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    mem = Memory.open(path)
    mem.upkeep.embedder.embed(["warm up"] * 64, kind="passage")  # model load is not add time
    chunk_s: list[float] = []
    raw_pairs: list[float] = []
    add_pairs: list[float] = []
    created = duplicates = 0
    for i in range(0, n, CHUNK):
        k = i // CHUNK
        if k % PAIR_EVERY == 0:
            raw_s, add_s, results = add_chunk(mem, items[i : i + CHUNK], first_raw=(k // PAIR_EVERY) % 2 == 0)
            raw_pairs.append(raw_s)
            add_pairs.append(add_s)
        else:
            t = time.perf_counter()
            results = mem.add_many(items[i : i + CHUNK])
            add_s = time.perf_counter() - t
        chunk_s.append(add_s)
        created += sum(r.action == "created" for r in results)
        duplicates += sum(r.action == "duplicate" for r in results)
        if len(chunk_s) % 10 == 0:
            log(f"  {i + CHUNK}/{n} added, {(i + CHUNK) / sum(chunk_s):.0f}/s")
    mem.close()
    tail = chunk_s[-max(1, len(chunk_s) // 10):]
    pairs = paired(raw_pairs, add_pairs, CHUNK)
    log(f"  paired chunks: add {pairs['add_per_s']:.0f}/s vs raw {pairs['raw_per_s']:.0f}/s, ratio {pairs['ratio']:.3f}")
    return {
        "size": n,
        "created": created,
        "duplicates": duplicates,
        "build_s": sum(chunk_s),
        "add_per_s": n / sum(chunk_s),
        "add_per_s_last_10pct": len(tail) * CHUNK / sum(tail),
        "raw_embed_per_s": pairs["raw_per_s"],
        "ratio": pairs["ratio"],
        "ratio_lo": pairs["ratio_lo"],
        "ratio_hi": pairs["ratio_hi"],
        "pairs": pairs["pairs"],
        "chunk_s": [round(c, 3) for c in chunk_s],
    }


def marginal_add(path: Path, rounds: int, texts: list[str], log) -> dict:
    """Add rate on top of the built store (a copy): for each kind of text, `rounds` chunks of new
    memories with dedup on, and for sentences `rounds` more with dedup off, each paired with the raw
    embedding of the same texts."""
    copy = path.with_name(path.stem + "-addtest.db")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    src, dst = sqlite3.connect(path), sqlite3.connect(copy)
    src.backup(dst)
    src.close()
    dst.close()
    try:
        mem = Memory.open(copy)
        mem.upkeep.embedder.embed(["warm up"] * 64, kind="passage")
        mem._store._fresh_index()  # type: ignore[attr-defined]  # index load is not add time
        out: dict[str, dict] = {}
        cases = [(f"{kind}/on", kind, True) for kind in texts]
        if "sentences" in texts:
            cases.insert(texts.index("sentences") + 1, ("sentences/off", "sentences", False))
        for n, (key, kind, dedup) in enumerate(cases):
            items = new_memories(rounds * CHUNK, seed=SEED + 11 + n, texts=kind)
            raw_s, add_s = [], []
            for r in range(rounds):
                pair = add_chunk(mem, items[r * CHUNK : (r + 1) * CHUNK], first_raw=r % 2 == 0, dedup=dedup)
                raw_s.append(pair[0])
                add_s.append(pair[1])
            out[key] = paired(raw_s, add_s, CHUNK)
            log(f"  add {rounds} x {CHUNK} more ({key}): {out[key]['add_per_s']:.0f}/s vs raw {out[key]['raw_per_s']:.0f}/s, "
                f"ratio {out[key]['ratio']:.3f} ({out[key]['ratio_lo']:.3f}-{out[key]['ratio_hi']:.3f})")
        mem.close()
        return out
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)


def time_searches(mem: Memory, queries: list[tuple[str, str]], mode: str, scoped: bool) -> list[float]:
    out = []
    for q, user in queries:
        t = time.perf_counter()
        mem.search(q, user_id=user if scoped else None, limit=10, mode=mode)
        out.append((time.perf_counter() - t) * 1000)
    return out


def stage_breakdown(mem: Memory, queries: list[tuple[str, str]], mode: str = "hybrid") -> dict[str, float]:
    """Mean ms per search spent in each stage (wrappers, no profiler overhead); nested calls as `outer > inner`."""
    import clawrecall.retrieval.pipeline as pl

    spent: dict[str, float] = {}
    stack: list[str] = []

    def wrap(name, fn):
        def timed(*a, **kw):
            stack.append(name)
            key = " > ".join(stack)
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[key] = spent.get(key, 0.0) + time.perf_counter() - t
                stack.pop()
        return timed

    pipeline = mem._pipeline
    store = mem._store
    saved_store = {n: getattr(store, n) for n in ("vector_candidates", "text_candidates", "fuzzy_candidates", "fetch",
                                                   "session_neighbors", "vectors")}
    saved_pl = {n: getattr(pl, n) for n in ("fuse", "apply_neighbors", "apply_min_and_noise", "apply_mmr")}
    saved_embed = pipeline.embed_queries
    try:
        for n, fn in saved_store.items():
            setattr(store, n, wrap(n, fn))
        for n, fn in saved_pl.items():
            setattr(pl, n, wrap(n, fn))
        pipeline.embed_queries = wrap("embed_queries", saved_embed)
        total = 0.0
        for q, user in queries:
            t = time.perf_counter()
            mem.search(q, user_id=user, limit=10, mode=mode)
            total += time.perf_counter() - t
    finally:
        for n in saved_store:
            store.__dict__.pop(n, None)
        for n, fn in saved_pl.items():
            setattr(pl, n, fn)
        pipeline.embed_queries = saved_embed
    out = {k: v * 1000 / len(queries) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])}
    out["(everything else)"] = total * 1000 / len(queries) - sum(v for k, v in out.items() if " > " not in k)
    out["(total)"] = total * 1000 / len(queries)
    return out


def stats_wall(path: Path, runs: int = 5) -> tuple[float, str]:
    cli = Path(sys.executable).with_name("clawrecall")
    if cli.exists():
        cmd = [str(cli), "--db", str(path), "stats", "--json"]
        how = "clawrecall --db PATH stats --json"
    else:
        cmd = [sys.executable, "-c", f"from clawrecall import Memory; Memory.open({str(path)!r}).stats()"]
        how = "python -c Memory.open(PATH).stats() (no CLI)"
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times), how


def measure(n: int, db_dir: Path, n_queries: int, repeat: int, add_rounds: int, add_texts: list[str], profile: bool,
            log) -> dict:
    path = db_dir / f"scale-{n}.db"
    sidecar = db_dir / f"scale-{n}.json"
    cached = path.exists() and sidecar.exists()
    if cached:
        info = json.loads(sidecar.read_text())
        log(f"{n}: using the store built earlier at {path}")
    else:
        log(f"{n}: building {path}")
        sidecar.unlink(missing_ok=True)
        info = build(path, n, log)
        sidecar.write_text(json.dumps(info, indent=2))
    info["cached_build"] = cached
    info["db"] = str(path)
    if add_rounds:
        info["marginal"] = marginal_add(path, add_rounds, add_texts, log)

    queries = synthetic_queries(n_queries)
    # Query cache off so every search embeds its query, as a new question does.
    mem = Memory.open(path, embedding={"query_cache_size": 0})
    t = time.perf_counter()
    mem.upkeep.embedder.embed(["warm up"], kind="query")
    info["model_load_s"] = time.perf_counter() - t
    q0, u0 = queries[0]
    t = time.perf_counter()
    mem.search(q0, user_id=u0, limit=10)
    info["first_search_s"] = time.perf_counter() - t
    mem.close()
    # The vector-index part of it, alone, on another fresh open.
    mem = Memory.open(path, embedding={"query_cache_size": 0})
    t = time.perf_counter()
    mem._store._fresh_index()  # type: ignore[attr-defined]
    info["index_load_s"] = time.perf_counter() - t

    # One scoped nearest-neighbour lookup through the store (what dedup of a single new memory costs).
    from clawrecall.storage import Filters

    rows = mem._store._conn.execute(  # type: ignore[attr-defined]
        "SELECT embedding, scope FROM memories WHERE embedding IS NOT NULL ORDER BY random() LIMIT 200"
    ).fetchall()
    dedup = []
    for blob, scope in rows:
        v = np.frombuffer(blob, dtype=np.float32)
        t = time.perf_counter()
        mem._store.vector_candidates(v, Filters(scopes=[scope]), 1)
        dedup.append((time.perf_counter() - t) * 1000)
    info["dedup_check_p50_ms"] = statistics.median(dedup)

    emb = []
    for q, _ in queries:
        t = time.perf_counter()
        mem.upkeep.embedder.embed_one(q, kind="query")
        emb.append((time.perf_counter() - t) * 1000)
    info["query_embed_p50_ms"] = statistics.median(emb)

    for q, u in queries[:20]:  # warm the page cache and the code paths
        mem.search(q, user_id=u, limit=10)
    info["search"] = {}
    runs: dict[str, list[list[float]]] = {}
    for _ in range(repeat):  # interleaved, so a burst of other work hits one run of each, not all runs of one
        for mode in ("hybrid", "vector", "bm25"):
            for scoped in (True, False):
                key = f"{mode}/{'user+global' if scoped else 'unscoped'}"
                runs.setdefault(key, []).append(time_searches(mem, queries, mode, scoped))
    for key, lats in runs.items():
        best = [min(per_query) for per_query in zip(*lats)]
        every = [x for lat in lats for x in lat]
        info["search"][key] = {
            "p50_ms": statistics.median(best), "p95_ms": pct(best, 95), "n": len(best),
            "all_runs_p50_ms": statistics.median(every), "all_runs_p95_ms": pct(every, 95), "repeat": len(lats),
        }
        log(f"  {key}: p50 {statistics.median(best):.1f} ms, p95 {pct(best, 95):.1f} ms (all runs: "
            f"{statistics.median(every):.1f}, {pct(every, 95):.1f})")
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        lat = time_searches(mem, queries, "hybrid", True)
        prof.disable()
        buf = io.StringIO()
        stats = pstats.Stats(prof, stream=buf)
        stats.sort_stats("cumulative").print_stats("clawrecall", 35)
        stats.sort_stats("tottime").print_stats(20)
        info["profile"] = buf.getvalue()
        log(f"  profiled {len(lat)} scoped hybrid searches (p50 {statistics.median(lat):.1f} ms under cProfile)")
        info["breakdown"] = stage_breakdown(mem, queries)
    mem.close()
    info["stats_s"], info["stats_how"] = stats_wall(path)
    info["db_bytes"] = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return info


def machine() -> dict:
    import torch

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "numpy": np.__version__,
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "load_avg": os.getloadavg(),
    }


def mark(value: float, target: float | None, higher_better: bool = False) -> str:
    if target is None:
        return ""
    ok = value >= target if higher_better else value <= target
    return "" if ok else " ✗"


def render(report: dict) -> str:
    m = report["machine"]
    lines = [
        f"Machine: {m['cpu']}, {m['cpu_count']} CPUs, Python {m['python']}, torch {m['torch']} "
        f"({m['torch_threads']} threads), numpy {m['numpy']}, SQLite {m['sqlite']}; load average "
        f"{m['load_avg'][0]:.2f} at start, {m.get('load_avg_end', [float('nan')])[0]:.2f} at end",
        "",
        "| size | add/s | raw embed/s | ratio | search p50 | p95 (hybrid) | vector p50 | bm25 p50 | first search (cold) | stats (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["sizes"]:
        n = r["size"]
        s = r["search"]
        h, v, b = s["hybrid/user+global"], s["vector/user+global"], s["bm25/user+global"]
        lines.append(
            f"| {n:,} | {r['add_per_s']:.0f}{mark(r['add_per_s'], TARGETS['add_per_s'], True)} "
            f"| {r['raw_embed_per_s']:.0f} | {r['ratio']:.2f}{mark(r['ratio'], TARGETS['ratio'], True)} "
            f"| {h['p50_ms']:.1f} ms{mark(h['p50_ms'], TARGETS['search_p50_ms'].get(n))} "
            f"| {h['p95_ms']:.1f} ms{mark(h['p95_ms'], TARGETS['search_p95_ms'].get(n))} "
            f"| {v['p50_ms']:.1f} ms | {b['p50_ms']:.1f} ms | {r['first_search_s'] * 1000:.0f} ms "
            f"| {r['stats_s']:.2f}{mark(r['stats_s'], TARGETS['stats_s'])} |"
        )
    lines += [
        "",
        "Targets: search p50 ≤ 15 ms and p95 ≤ 30 ms at 10k, p50 ≤ 30 ms at 100k; add ≥ 200/s and ≥ 0.9 × raw "
        "embedding rate; stats < 0.5 s. ✗ marks a miss. Search columns are a caller with user_id (one user scope "
        "+ global), query embedding included (query cache off); each query's latency is its best of "
        f"{report['sizes'][0]['search']['hybrid/user+global']['repeat'] if report['sizes'] else '?'} interleaved runs.",
        "",
        "| size | mode | scope | p50 (ms) | p95 (ms) | p50, p95 over all runs (ms) |",
        "|---:|---|---|---:|---:|---:|",
    ]
    for r in report["sizes"]:
        for key, v in r["search"].items():
            mode, scope = key.split("/")
            lines.append(f"| {r['size']:,} | {mode} | {scope} | {v['p50_ms']:.1f} | {v['p95_ms']:.1f} "
                         f"| {v['all_runs_p50_ms']:.1f}, {v['all_runs_p95_ms']:.1f} |")
    lines += [
        "",
        "| size | stored (dups dropped) | build (s) | add/s last 10% | build ratio, 95% interval (pairs) | scoped 1-NN lookup | "
        "query embed p50 | index load | db size |",
        "|---:|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in report["sizes"]:
        lines.append(
            f"| {r['size']:,} | {r['created']:,} ({r['duplicates']}) | {r['build_s']:.0f}{' (cached)' if r['cached_build'] else ''} "
            f"| {r['add_per_s_last_10pct']:.0f} | {r['ratio']:.3f}, {r['ratio_lo']:.3f}–{r['ratio_hi']:.3f} ({r['pairs']}) "
            f"| {r['dedup_check_p50_ms']:.2f} ms "
            f"| {r['query_embed_p50_ms']:.1f} ms | {r['index_load_s'] * 1000:.0f} ms "
            f"| {r['db_bytes'] / 1e6:.0f} MB |"
        )
    if any("marginal" in r for r in report["sizes"]):
        lines += [
            "",
            f"Adding new memories (created now, in new sessions) to the built store (a copy), chunks of {CHUNK}, "
            "each timed back to back with the raw embedding "
            "of the same texts (alternating which goes first); ratio = raw time / add time over all pairs, with a "
            "bootstrap 95% interval:",
            "",
            "| size | texts | dedup | pairs | add/s | raw embed/s | ratio | 95% interval |",
            "|---:|---|---|---:|---:|---:|---:|---|",
        ]
        for r in report["sizes"]:
            for key, m in r.get("marginal", {}).items():
                kind, dedup = key.split("/")
                lines.append(
                    f"| {r['size']:,} | {kind} | {dedup} | {m['pairs']} | {m['add_per_s']:.0f} | {m['raw_per_s']:.0f} "
                    f"| {m['ratio']:.3f}{mark(m['ratio'], TARGETS['ratio'], True)} | {m['ratio_lo']:.3f}–{m['ratio_hi']:.3f} |"
                )
    lines.append("")
    lines.append(f"stats timed as: {report['sizes'][0]['stats_how']} (median of 5 runs)" if report["sizes"] else "")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated store sizes")
    parser.add_argument("--db-dir", default=str(DEFAULT_DB_DIR), help=f"where built stores are kept (default {DEFAULT_DB_DIR})")
    parser.add_argument("--queries", type=int, default=200, help="distinct queries per mode (≥ 200 recommended)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each query set; a query's latency is its best run (default 3)")
    parser.add_argument("--add-rounds", type=int, default=15,
                        help=f"chunks of {CHUNK} added (with dedup on, then off) to a copy of the built store, each "
                             "paired with the raw embedding of the same texts; 0 skips (default 15)")
    parser.add_argument("--add-texts", default="sentences",
                        help=f"comma-separated kinds of text added in those rounds, of {', '.join(TEXT_KINDS)}: short "
                             "notes (two phrases), one sentence (~16 tokens), five sentences (default sentences)")
    parser.add_argument("--rebuild", action="store_true", help="ignore a store built earlier")
    parser.add_argument("--profile", action="store_true", help="cProfile the scoped hybrid searches and print it")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    db_dir = Path(args.db_dir)
    db_dir.mkdir(parents=True, exist_ok=True)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    add_texts = [t.strip() for t in args.add_texts.split(",") if t.strip()]
    if unknown := sorted(set(add_texts) - set(TEXT_KINDS)):
        parser.error(f"unknown --add-texts {', '.join(unknown)}: use {', '.join(TEXT_KINDS)}")
    if args.rebuild:
        for n in sizes:
            (db_dir / f"scale-{n}.json").unlink(missing_ok=True)
    report = {"machine": machine(), "sizes": []}
    for n in sizes:
        report["sizes"].append(
            measure(n, db_dir, args.queries, args.repeat, args.add_rounds, add_texts, args.profile, log)
        )
    report["machine"]["load_avg_end"] = os.getloadavg()
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    print(render(report))
    for r in report["sizes"]:
        if "profile" in r:
            print(f"\n### Where a scoped hybrid search spends its time, {r['size']:,} memories (mean ms per search)\n")
            print("| stage | ms |\n|---|---:|")
            for stage, ms in r["breakdown"].items():
                print(f"| {stage} | {ms:.2f} |")
            print(f"\n### cProfile, {r['size']:,} memories, {args.queries} scoped hybrid searches\n")
            print("```")
            print(r["profile"].rstrip())
            print("```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
