"""Extraction quality: which facts the extraction keeps from a labelled set of conversations, and whether
it notices when a fact changes.

The set, bench/data/extraction_facts.json, is written by hand: short chats between a user and an
assistant in English, Czech and Russian, each in one to three segments of 4–12 messages days or weeks
apart, covering preferences, decisions, people, events, action items, lessons and corrections, with
facts that change in a later segment (an FTP test, a move, a moved deadline, a new job), facts said
again, and chit-chat that should give nothing. Its format:

    {"version": 1, "conversations": [
      {"id": "c01", "language": "en" | "cs" | "ru", "title": "…", "user": "user-c01",
       "segments": [
         {"id": "c01.s2", "session": "c01-2",          # each segment is logged as a session of its own
          "messages": [{"role": "user" | "assistant", "content": "…", "at": "2026-02-16T07:40:00Z"}, …],
          "facts": [                                     # what this segment newly says
            {"id": "c01.f6", "must": ["FTP", "262"], "category": "fact"},
            {"id": "c01.f4", "must": ["73 kg"], "category": "fact", "optional": true}, …],
          "updates": [{"old": "c01.f1", "new": "c01.f6"}],   # the new fact supersedes the old one
          "repeats": ["c01.f2"],                             # earlier facts said again here
          "note": "…"}]}]}                                   # e.g. "chit-chat: no facts"

A fact matches an expected one when its text contains every `must` item, case- and accent-insensitive;
an item is a phrase or a list of alternatives (any one will do: "Brno" or "Brně", a date's spellings).
A phrase starts at a word boundary and may end inside a word (stems: "Казан" matches "Казани"); a
phrase ending in a digit is not followed by one ("May 1" does not match "May 15"); thousands
separators are ignored ("1,200" matches "1200"). `must_not` phrases exclude a match. `category` is
the expected category (reported as agreement, not required). An `optional` fact is one a careful
reader may or may not keep (a weight said in passing): producing it counts as correct, missing it
costs nothing.

The scores, over all conversations:

  * fact recall: the expected facts still current at the end (neither optional nor superseded by a
    later update) that a current fact (`valid_to` unset) matches;
  * precision: the produced facts (current or superseded) that match an expected fact, each expected
    fact claimed once per state (current, superseded): a second current fact matching the same
    expected fact is a duplicate, a fact matching none is unsupported; both count against precision.
    No judge, no model: a true fact the labels do not list counts against precision too, so the
    labels list the optional facts a careful reader could keep;
  * update accuracy: the expected updates where a fact matching the old one is superseded
    (`valid_to` set) and its `superseded_by` (followed along a chain) reaches a fact matching the
    new one; `stale` counts old facts still current beside their new version;
  * repeats kept single: the repeated facts matched by exactly one current fact (and counted: whose
    occurrences, `mem._facts.occurrences`, number at least the times it was said);
  * facts from chit-chat: facts first produced after a segment without expected facts;
  * tokens and seconds per segment: from the jobs each segment queued (extraction and summaries).

Run against the product's public API: `Memory.open(db, llm={"provider": "openai", "base_url": …,
"model": …}, extraction={"enabled": True})`; per segment `mem.conversations.log` (the messages with
their times), `mem.conversations.end`, then `mem.upkeep.run_job` until no job is left; the facts are
`mem.list(source_type="extraction", include_superseded=True)` (session summaries are not facts).

    python bench/extraction.py --base-url http://127.0.0.1:18085/v1 [--model local] [--json]
    python bench/extraction.py --gguf qwen1.5b.gguf --llm-python llm/bin/python [--json]
        (starts bench/local_llm.py on a free port for the run)
    python bench/extraction.py --self-check      (the scoring, on hand-made facts; no LLM)
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "extraction_facts.json"
SUMMARY_CATEGORIES = {"session_summary"}  # memories extraction writes that are not facts


# -- matching ---------------------------------------------------------------------------------
def _fold(text: str) -> str:
    """Lower case, accents off (NFKD), thousands separators between digits off."""
    text = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
    return re.sub(r"(?<=\d)[,\u00a0\u202f .](?=\d{3}(?!\d))", "", text)


def _pattern(phrase: str) -> re.Pattern[str]:
    p = _fold(phrase)
    return re.compile(r"(?<!\w)" + re.escape(p) + (r"(?!\d)" if p[-1:].isdigit() else ""))


def contains(text: str, phrase: str) -> bool:
    return bool(_pattern(phrase).search(_fold(text)))


def matches(text: str, expected: dict[str, Any]) -> bool:
    """Every `must` item (a phrase, or a list of alternatives) is in the text, no `must_not` phrase is."""
    for item in expected["must"]:
        options = [item] if isinstance(item, str) else item
        if not any(contains(text, o) for o in options):
            return False
    return not any(contains(text, p) for p in expected.get("must_not", []))


# -- scoring ----------------------------------------------------------------------------------
@dataclass
class Produced:
    """A fact the extraction wrote, as the scoring sees it."""

    id: str
    text: str
    category: str | None = None
    current: bool = True
    superseded_by: str | None = None
    segment: str | None = None  # the segment after which it first appeared
    occurrences: int | None = None


@dataclass
class Score:
    """Counts for one conversation (or a sum of them); the rates are derived."""

    expected: int = 0
    recalled: int = 0
    category_agree: int = 0
    produced: int = 0
    correct: int = 0
    duplicates: int = 0
    unsupported: int = 0
    updates: int = 0
    updates_ok: int = 0
    stale: int = 0
    repeats: int = 0
    repeats_single: int = 0
    repeats_counted: int = 0  # kept single, and its occurrences count the repetition
    from_chitchat: int = 0
    missed: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    updates_missed: list[str] = field(default_factory=list)

    def __add__(self, other: Score) -> Score:
        return Score(**{k: getattr(self, k) + getattr(other, k) for k in asdict(self)})

    def rates(self) -> dict[str, float | None]:
        def r(a: int, b: int) -> float | None:
            return round(a / b, 3) if b else None

        return {
            "recall": r(self.recalled, self.expected), "precision": r(self.correct, self.produced),
            "update_accuracy": r(self.updates_ok, self.updates), "repeats_single": r(self.repeats_single, self.repeats),
            "repeats_counted": r(self.repeats_counted, self.repeats),
            "category_agreement": r(self.category_agree, self.recalled),
        }


def score(conversation: dict[str, Any], produced: list[Produced]) -> Score:
    """Score one conversation's produced facts (in the order they were written) against its labels."""
    facts = {f["id"]: f for s in conversation["segments"] for f in s["facts"]}
    updates = [u for s in conversation["segments"] for u in s["updates"]]
    repeats = [r for s in conversation["segments"] for r in s["repeats"]]
    chitchat = {s["id"] for s in conversation["segments"] if not s["facts"]}
    superseded = {u["old"] for u in updates}
    current = [p for p in produced if p.current]
    hits = {p.id: [fid for fid, f in facts.items() if matches(p.text, f)] for p in produced}
    by_id = {p.id: p for p in produced}
    s = Score()

    for fid, f in facts.items():
        if f.get("optional") or fid in superseded:
            continue
        s.expected += 1
        found = [p for p in current if fid in hits[p.id]]
        if found:
            s.recalled += 1
            s.category_agree += any(p.category == f["category"] for p in found)
        else:
            s.missed.append(fid)

    claimed: set[tuple[bool, str]] = set()
    for p in produced:
        s.produced += 1
        s.from_chitchat += p.segment in chitchat
        free = [fid for fid in hits[p.id] if (p.current, fid) not in claimed]
        if free:
            s.correct += 1
            claimed.add((p.current, free[0]))
        elif hits[p.id]:
            s.duplicates += 1
        else:
            s.unsupported += 1
            s.unmatched.append(p.text)

    for u in updates:
        s.updates += 1
        ok = False
        for p in produced:
            if u["old"] not in hits[p.id] or u["new"] in hits[p.id]:
                continue  # a fact naming both values is the new version
            if p.current:
                s.stale += 1
                continue
            seen, nxt = {p.id}, p.superseded_by
            while nxt and nxt in by_id and nxt not in seen:
                if u["new"] in hits[nxt]:
                    ok = True
                    break
                seen.add(nxt)
                nxt = by_id[nxt].superseded_by
        s.updates_ok += ok
        if not ok:
            s.updates_missed.append(f"{u['old']}->{u['new']}")

    said = {fid: 1 + repeats.count(fid) for fid in facts}
    for r in repeats:
        s.repeats += 1
        found = [p for p in current if r in hits[p.id]]
        s.repeats_single += len(found) == 1
        s.repeats_counted += len(found) == 1 and (found[0].occurrences or 0) >= said[r]
    return s


# -- running ----------------------------------------------------------------------------------
def run(data: dict[str, Any], *, base_url: str, model: str, db: str, embedding: str, timeout_s: float,
        only: set[str] | None = None) -> tuple[dict[str, Score], list[dict[str, Any]]]:
    """Log each conversation segment by segment through the public API, run its jobs, score its facts."""
    from clawrecall import Caller, Memory

    mem = Memory.open(
        db, embedding={"provider": embedding}, extraction={"enabled": True},
        llm={"provider": "openai", "base_url": base_url, "model": model, "api_key": "none", "timeout_s": timeout_s},
    )
    scores: dict[str, Score] = {}
    segments: list[dict[str, Any]] = []
    try:
        for conv in data["conversations"]:
            if only and conv["id"] not in only:
                continue
            caller = Caller(user_id=conv["user"])
            seen: dict[str, Produced] = {}
            for seg in conv["segments"]:
                messages = [{"role": m["role"], "content": m["content"], "created_at": m["at"]} for m in seg["messages"]]
                mem.conversations.log(messages, caller=caller, session_id=seg["session"], now=_time(seg["messages"][-1]["at"]))
                mem.conversations.end(seg["session"], caller=caller)
                t0, jobs = time.perf_counter(), []
                while (job := mem.upkeep.run_job("bench-extraction")) is not None:
                    jobs.append(job)  # as it ended
                seconds = time.perf_counter() - t0
                facts = mem.list(caller=caller, source_type="extraction", include_superseded=True, limit=1000, order="oldest")
                new = 0
                for rec in facts:
                    if rec.category in SUMMARY_CATEGORIES:
                        continue
                    if rec.id not in seen:
                        new += 1
                    seen[rec.id] = Produced(
                        rec.id, rec.content, rec.category, rec.valid_to is None, rec.superseded_by,
                        seen[rec.id].segment if rec.id in seen else seg["id"],
                        len(mem.insight.occurrences(rec.id, caller=caller)),
                    )
                segments.append({
                    "segment": seg["id"], "language": conv["language"], "messages": len(seg["messages"]),
                    "jobs": [j.kind for j in jobs], "status": [j.status for j in jobs],
                    "input_tokens": sum(j.input_tokens for j in jobs), "output_tokens": sum(j.output_tokens for j in jobs),
                    "seconds": round(seconds, 2), "new_facts": new,
                })
            scores[conv["id"]] = score(conv, list(seen.values()))
    finally:
        mem.close()
    return scores, segments


def _time(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


def summarize(data: dict[str, Any], scores: dict[str, Score], segments: list[dict[str, Any]]) -> dict[str, Any]:
    total = sum(scores.values(), Score())
    language = {c["id"]: c["language"] for c in data["conversations"]}
    per_language: dict[str, Score] = defaultdict(Score)
    for cid, s in scores.items():
        per_language[language[cid]] += s
    tokens = [s["input_tokens"] + s["output_tokens"] for s in segments]
    seconds = [s["seconds"] for s in segments]
    return {
        **total.rates(),
        "counts": {k: v for k, v in asdict(total).items() if not isinstance(v, list)},
        "by_language": {k: {"recall": v.rates()["recall"], "precision": v.rates()["precision"],
                            "update_accuracy": v.rates()["update_accuracy"]} for k, v in sorted(per_language.items())},
        "segments": len(segments),
        "tokens_per_segment": {"mean": _mean(tokens), "p50": _pct(tokens, 50), "max": max(tokens, default=None),
                               "input_mean": _mean([s["input_tokens"] for s in segments]),
                               "output_mean": _mean([s["output_tokens"] for s in segments])},
        "seconds_per_segment": {"mean": _mean(seconds), "p50": _pct(seconds, 50), "p90": _pct(seconds, 90)},
        "missed": total.missed, "updates_missed": total.updates_missed, "unmatched": total.unmatched,
    }


def _mean(xs: list[float]) -> float | None:
    return round(statistics.fmean(xs), 1) if xs else None


def _pct(xs: list[float], p: int) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))], 1)


def print_table(result: dict[str, Any], title: str) -> None:
    c = result["counts"]

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.0%}"

    print(title)
    rows = [
        ("fact recall", pct(result["recall"]), f"{c['recalled']}/{c['expected']} current expected facts"),
        ("precision", pct(result["precision"]), (f"{c['correct']}/{c['produced']} produced; {c['duplicates']} duplicates, "
                                                 f"{c['unsupported']} unsupported, {c['from_chitchat']} after chit-chat")),
        ("update accuracy", pct(result["update_accuracy"]), f"{c['updates_ok']}/{c['updates']}; {c['stale']} old facts left current"),
        ("repeats kept single", pct(result["repeats_single"]),
         f"{c['repeats_single']}/{c['repeats']}; {c['repeats_counted']} with an occurrence per mention"),
        ("category agreement", pct(result["category_agreement"]), "of the recalled facts"),
        ("tokens per segment", str(result["tokens_per_segment"]["mean"]),
         (f"p50 {result['tokens_per_segment']['p50']}, in {result['tokens_per_segment']['input_mean']} / "
          f"out {result['tokens_per_segment']['output_mean']} (mean)")),
        ("seconds per segment", str(result["seconds_per_segment"]["mean"]),
         f"p50 {result['seconds_per_segment']['p50']}, p90 {result['seconds_per_segment']['p90']}"),
    ]
    for name, value, detail in rows:
        print(f"  {name:<22}{value:>8}   {detail}")
    for lang, r in result["by_language"].items():
        print(f"  {lang}: recall {pct(r['recall'])}, precision {pct(r['precision'])}, updates {pct(r['update_accuracy'])}")


# -- the local model --------------------------------------------------------------------------
def start_local(gguf: str, python: str, ctx: int) -> tuple[subprocess.Popen[str], str]:
    """bench/local_llm.py in its own environment, on a free port; its first stdout line is the base_url."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [python, str(Path(__file__).resolve().parent / "local_llm.py"), "--model", gguf, "--port", str(port), "--ctx", str(ctx)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    line = proc.stdout.readline().strip() if proc.stdout else ""
    if not line.startswith("http"):
        proc.kill()
        raise SystemExit(f"the local model server did not start (exit code {proc.wait()})")
    return proc, line


# -- self-check -------------------------------------------------------------------------------
def check_data(data: dict[str, Any]) -> list[str]:
    """The set's own consistency: ids unique, updates and repeats name earlier facts, must items not empty,
    and no expected fact's own phrases match another fact of its conversation (labels that overlap
    would score one produced fact twice)."""
    problems = []
    for conv in data["conversations"]:
        known: dict[str, dict[str, Any]] = {}
        for seg in conv["segments"]:
            if not 4 <= len(seg["messages"]) <= 12:
                problems.append(f"{seg['id']}: {len(seg['messages'])} messages")
            for f in seg["facts"]:
                if f["id"] in known or not f["must"] or any(not i for i in f["must"]):
                    problems.append(f"{f['id']}: repeated id or empty must")
                known[f["id"]] = f
            for u in seg["updates"]:
                if u["old"] not in known or u["new"] not in known:
                    problems.append(f"{seg['id']}: update {u} names an unknown fact")
            for r in seg["repeats"]:
                if r not in known:
                    problems.append(f"{seg['id']}: repeat {r} names an unknown fact")
        for fid, f in known.items():
            text = _exemplar(f)
            if not matches(text, f):
                problems.append(f"{fid}: its own exemplar {text!r} does not match")
            others = [o for o in known if o != fid and matches(text, known[o])]
            if others:
                problems.append(f"{fid}: exemplar {text!r} also matches {others}")
    return problems


def _exemplar(f: dict[str, Any]) -> str:
    """A fact text made of each must item's first form: what a perfect extraction would at least say."""
    return "; ".join(i if isinstance(i, str) else i[0] for i in f["must"])


def perfect(conv: dict[str, Any], *, ignore_updates: bool = False) -> list[Produced]:
    """The facts a perfect extraction would write (exemplar texts), or one that never supersedes."""
    out: list[Produced] = []
    ids: dict[str, Produced] = {}
    for seg in conv["segments"]:
        for f in seg["facts"]:
            p = Produced(f"p-{f['id']}", _exemplar(f), f["category"], segment=seg["id"], occurrences=1)
            ids[f["id"]] = p
            out.append(p)
        for r in seg["repeats"]:
            ids[r].occurrences = (ids[r].occurrences or 0) + 1
        if not ignore_updates:
            for u in seg["updates"]:
                ids[u["old"]].current = False
                ids[u["old"]].superseded_by = ids[u["new"]].id
    return out


def self_check(data: dict[str, Any]) -> list[str]:
    failures = [f"data: {p}" for p in check_data(data)]

    def expect(name: str, got: Any, want: Any) -> None:
        if got != want:
            failures.append(f"{name}: got {got!r}, want {want!r}")

    expect("phrase at a word start", contains("the user's FTP is 262 W", "FTP"), True)
    expect("no match inside a word", contains("softpedia", "FTP"), False)
    expect("stem", contains("Мы живём в Казани", "Казан"), True)
    expect("accents folded", contains("bydlí na Žižkově", "zizkov"), True)
    expect("digits end", contains("flight on May 15", "May 1"), False)
    expect("thousands", contains("rent is 1200 EUR", "1,200"), True)
    expect("thousands, space", contains("rent is 1 350 EUR", "1,350"), True)
    expect("decimals kept", contains("3.4 W/kg", "34"), False)

    conv = {"id": "t", "segments": [
        {"id": "t.s1", "facts": [
            {"id": "t.f1", "must": ["FTP", "250"], "category": "fact"},
            {"id": "t.f2", "must": [["morning", "mornings"]], "category": "preference"},
            {"id": "t.f3", "must": ["73 kg"], "category": "fact", "optional": True}],
         "updates": [], "repeats": []},
        {"id": "t.s2", "facts": [], "updates": [], "repeats": []},
        {"id": "t.s3", "facts": [{"id": "t.f4", "must": ["FTP", "262"], "category": "fact"},
                                 {"id": "t.f5", "must": ["Gran Fondo"], "category": "fact"}],
         "updates": [{"old": "t.f1", "new": "t.f4"}], "repeats": ["t.f2"]},
    ]}
    produced = [
        Produced("a", "User's FTP is 250 W", "fact", current=False, superseded_by="d", segment="t.s1"),
        Produced("b", "User prefers to ride in the morning", "preference", segment="t.s1"),
        Produced("c", "User likes the weather today", "other", segment="t.s2"),  # chit-chat
        Produced("d", "User's FTP rose from 250 W to 262 W", "fact", segment="t.s3"),
        Produced("e", "User rides in the mornings before work", "fact", segment="t.s3"),  # a repeat stored twice
    ]
    s = score(conv, produced)
    expect("recall", (s.recalled, s.expected, s.missed), (2, 3, ["t.f5"]))  # f4 and f2; f1 superseded, f3 optional
    expect("category", s.category_agree, 2)
    expect("precision", (s.correct, s.duplicates, s.unsupported, s.produced), (3, 1, 1, 5))
    expect("chit-chat", s.from_chitchat, 1)
    expect("update", (s.updates_ok, s.updates, s.stale), (1, 1, 0))
    expect("repeat", (s.repeats_single, s.repeats), (0, 1))
    # the repeat recognised: one fact, its occurrences counting both mentions (or not)
    for occurrences, counted in ((2, 1), (1, 0)):
        produced[1].occurrences = occurrences
        s = score(conv, [p for p in produced if p.id != "e"])
        expect(f"repeat with {occurrences} occurrences", (s.repeats_single, s.repeats_counted), (1, counted))
    # the update missed: the old fact left current beside the new one
    produced[0].current, produced[0].superseded_by = True, None
    s = score(conv, produced)
    expect("update missed", (s.updates_ok, s.stale, s.updates_missed), (0, 1, ["t.f1->t.f4"]))
    # a chain: 250 → 255 (not labelled) → 262 still reaches the new fact
    produced[0].current, produced[0].superseded_by = False, "x"
    s = score(conv, produced + [Produced("x", "FTP 255 W", "fact", current=False, superseded_by="d")])
    expect("update through a chain", s.updates_ok, 1)

    total, blind = Score(), Score()
    for c in data["conversations"]:
        total += score(c, perfect(c))
        blind += score(c, perfect(c, ignore_updates=True))
    r = total.rates()
    expect("perfect extraction", (r["recall"], r["precision"], r["update_accuracy"], r["repeats_single"], r["repeats_counted"]),
           (1.0, 1.0, 1.0, 1.0, 1.0))
    expect("extraction that never supersedes: updates", blind.updates_ok, 0)
    expect("extraction that never supersedes: stale", blind.stale, blind.updates)
    return failures


# -- main -------------------------------------------------------------------------------------
def describe(data: dict[str, Any]) -> dict[str, Any]:
    segs = [s for c in data["conversations"] for s in c["segments"]]
    facts = [f for s in segs for f in s["facts"]]
    return {
        "conversations": len(data["conversations"]),
        "languages": dict(sorted(_count(c["language"] for c in data["conversations"]).items())),
        "segments": len(segs), "messages": sum(len(s["messages"]) for s in segs),
        "facts": len(facts), "optional": sum(bool(f.get("optional")) for f in facts),
        "updates": sum(len(s["updates"]) for s in segs), "repeats": sum(len(s["repeats"]) for s in segs),
        "chit_chat_segments": sum(not s["facts"] for s in segs),
        "categories": dict(sorted(_count(f["category"] for f in facts).items())),
    }


def _count(xs: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for x in xs:
        out[x] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--self-check", action="store_true", help="check the scoring and the set; no LLM, no store")
    ap.add_argument("--base-url", help="an OpenAI-compatible server already running")
    ap.add_argument("--model", default="local", help="the model name to ask for (default: local)")
    ap.add_argument("--gguf", help="start bench/local_llm.py with this GGUF for the run")
    ap.add_argument("--llm-python", default=sys.executable, help="the python that has xllamacpp (with --gguf)")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--timeout", type=float, default=1200,
                    help="llm.timeout_s (default 1200): a small model on two busy cores can take minutes a call")
    ap.add_argument("--embedding", default="local", help="clawrecall's embedding provider (default: local)")
    ap.add_argument("--conversations", help="comma-separated ids to run (default: all)")
    ap.add_argument("--db", help="keep the store here (default: a temporary file)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    data = json.loads(args.data.read_text())

    if args.self_check:
        failures = self_check(data)
        info = describe(data)
        if args.json:
            print(json.dumps({"ok": not failures, "failures": failures, "set": info}, ensure_ascii=False))
        else:
            print(f"set: {json.dumps(info, ensure_ascii=False)}")
            print("\n".join(failures) if failures else "self-check passed")
        return 1 if failures else 0

    if not args.base_url and not args.gguf:
        ap.error("give --base-url of a running server, or --gguf to start the local one")
    proc = None
    base_url = args.base_url
    load_s = None
    if args.gguf:
        t0 = time.perf_counter()
        proc, base_url = start_local(args.gguf, args.llm_python, args.ctx)
        load_s = round(time.perf_counter() - t0, 1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            only = set(args.conversations.split(",")) if args.conversations else None
            scores, segments = run(data, base_url=base_url, model=args.model, db=args.db or f"{tmp}/extraction.db",
                                   embedding=args.embedding, timeout_s=args.timeout, only=only)
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
    result = summarize(data, scores, segments)
    result.update({"model": args.model, "gguf": Path(args.gguf).name if args.gguf else None, "server_start_s": load_s,
                   "set": describe(data), "per_segment": segments})
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print_table(result, f"extraction on {len(scores)} conversations ({len(segments)} segments), model {args.model}"
                            + (f" ({Path(args.gguf).name})" if args.gguf else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
