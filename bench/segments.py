"""Topic-shift benchmark: at which window and cosine should a conversation's open segment close?

The record closes a segment before a user message when the mean vector of the `topic_window`
messages before it and that of the window starting at it have a cosine below `topic_threshold`
(at the lowest point of such a dip; clawrecall/conversations/segments.py). Labels from LoCoMo,
whose sessions are one day's chat between two friends (each session's first speaker is the user,
as bench/locomo.py logs them):

  * inside a session: every position the rule may split at (a user message with a window on both
    sides). No boundary by construction, though a session drifts from one subject to the next, so
    this counts some real small shifts as false splits;
  * spliced: a session, then a session of *another* conversation: a real change of topic (and of
    people);
  * next day: a session, then the next session of the same conversation (shown, not tuned on: in
    use the pause closes these).

Turns are embedded by the configured model (the bundled local one by default) without their
speakers' names, as a chat transcript carries them (names would give every splice away). A short
chat about a bug followed by one about dinner (`STARK`) shows what the chosen default cuts.

Two measures, for each window and threshold:

  * per position: the share of positions inside sessions whose cosine is below the threshold, and
    of spliced and next-day junctions;
  * through the rule (`segments.topic_shift`, applied again after each split as the record applies
    it) on a chain of a part's sessions taken in turn from each of its conversations, so that every
    junction is spliced: the share of junctions it cuts at, and the cuts elsewhere per session.

The default is the pair that cuts at the most junctions of the first `TUNE` conversations' chain
without a cut elsewhere (a missed shift costs little, since the pause, the size and the session's
end still close the segment; a false one cuts a conversation's context in two). It is reported on
the chain of the held-out conversations, and checked end to end: that chain logged as one session
through `mem.conversations.log` (30 s apart, no size limit), embedded by the backfill, and the
segments the record closed on a topic shift compared with the junctions.

    python bench/segments.py [path/to/locomo.json] [--vectors CACHE.npy] [--no-check] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo import DEFAULT_DATA, TUNE, sessions, transcript  # noqa: E402
from relevance import auroc  # noqa: E402

from clawrecall import Caller, Memory  # noqa: E402
from clawrecall.conversations.segments import topic_shift, window_cosines  # noqa: E402

WINDOWS = (2, 3, 4, 6)
THRESHOLDS = tuple(round(0.1 + 0.025 * k, 3) for k in range(13))  # 0.100 … 0.400
# per session, on the tuning chain. At 0.02 (one in 50 sessions) the choice was window 6 / 0.275, which cut
# 0.138 held-out sessions falsely: the in-session cosines of other conversations sit lower (docs/benchmarks/segments.md)
MAX_FALSE_CUTS = 0.0


# A stark shift, written for this benchmark: a chat about a bug, then one about dinner (user first, alternating).
STARK = (
    "My Python script crashes with a KeyError when I read the config file.",
    "The KeyError means the key is missing from the dictionary; print config.keys() before the lookup.",
    "It says 'database' is not there, but the TOML file has a [database] section.",
    "Check the path: the script may load a different file. Print the absolute path it opens.",
    "You're right, it opened an old copy in the home directory.",
    "Pass the path explicitly, or resolve it relative to the script with pathlib.",
    "Should I also validate the config with pydantic?",
    "Yes, a pydantic model gives a clear error naming the missing field instead of a KeyError.",
    "What should I cook for dinner tonight? I have chicken, lemons and rosemary.",
    "Roast the chicken with lemon halves and rosemary at 200 degrees for about an hour.",
    "Do I need to brine it first?",
    "A dry brine of salt overnight helps, but an hour with salt on the skin is enough tonight.",
    "And what side dish goes with it?",
    "Roasted potatoes in the same tray soak up the juices; add a green salad.",
    "How do I know when the chicken is done?",
    "The thickest part of the thigh should reach 74 degrees, and the juices should run clear.",
)


@dataclass
class Session:
    conversation: str
    number: int  # its place in the conversation
    vectors: np.ndarray  # one unit vector per turn
    user: list[bool]  # whether each turn is the user's (the session's first speaker)
    texts: list[str]


def load(data: list[dict], mem: Memory, cache: Path | None) -> list[Session]:
    """Every session of every conversation, embedded (once: `cache` keeps the vectors between runs)."""
    raw = [(sample["sample_id"], n, items) for sample in data for n, (_, items) in enumerate(sessions(sample))]
    texts = [t["text"] for _, _, items in raw for t in items]
    if cache is not None and cache.exists() and len(stored := np.load(cache)) == len(texts):
        vectors = stored
    else:
        vectors = mem.upkeep.embedder.embed(texts, kind="passage")
        if cache is not None:
            np.save(cache, vectors)
    out, at = [], 0
    for conversation, n, items in raw:
        out.append(Session(conversation, n, vectors[at : at + len(items)],
                           [t["speaker"] == items[0]["speaker"] for t in items], [t["text"] for t in items]))
        at += len(items)
    return out


def junction(a: Session, b: Session, window: int) -> float:
    """The rule's cosine where session `b` follows session `a`."""
    vectors = np.vstack([a.vectors[-window:], b.vectors[:window]])
    return dict(window_cosines(vectors, [False] * window + [True] + [False] * (window - 1), window))[window]


def cosines(part: list[Session], window: int) -> dict[str, list]:
    """The cosines the rule compares, by label: per session (inside), per spliced and next-day junction."""
    inside = [[c for _, c in window_cosines(s.vectors, s.user, window)] for s in part]
    spliced = [junction(a, b, window) for a in part for b in part if a.conversation != b.conversation]
    next_day = [junction(a, b, window) for a, b in zip(part, part[1:])
                if a.conversation == b.conversation and b.number == a.number + 1]
    return {"inside": inside, "spliced": spliced, "next_day": next_day}


def rates(c: dict[str, list], threshold: float) -> dict[str, float]:
    """Per position: the shares below the threshold."""
    positions = [x for s in c["inside"] for x in s]
    return {
        "positions_split": float(np.mean([x < threshold for x in positions])),
        "spliced_found": float(np.mean([x < threshold for x in c["spliced"]])),
        "next_day_found": float(np.mean([x < threshold for x in c["next_day"]])),
    }


def chain(part: list[Session]) -> list[Session]:
    """The part's sessions taken in turn from each conversation (a, b, c, a, b, c, …): every junction spliced."""
    by_conversation: dict[str, list[Session]] = {}
    for s in part:
        by_conversation.setdefault(s.conversation, []).append(s)
    return [s for group in zip(*by_conversation.values()) for s in group]


def starts(order: list[Session]) -> list[int]:
    """Where each session after the first begins in the chain."""
    return list(np.cumsum([len(s.user) for s in order[:-1]]))


def through_rule(order: list[Session], window: int, threshold: float) -> dict[str, float]:
    """The record's segmentation of the chain: split at the first shift, then look again after it."""
    vectors = np.vstack([s.vectors for s in order])
    user = [u for s in order for u in s.user]
    cuts, at = set(), 0
    while (shift := topic_shift(vectors[at:], user[at:], window, threshold)) is not None:
        at += shift
        cuts.add(at)
    junctions = set(starts(order))
    return {"junctions_found": len(cuts & junctions) / len(junctions), "false_cuts_per_session": len(cuts - junctions) / len(order)}


def check(order: list[Session], window: int, threshold: float) -> dict:
    """Log the chain as one session through the record; where did it close segments on a topic shift?"""
    begin = datetime(2024, 1, 1, tzinfo=timezone.utc)
    caller = Caller(user_id="bench")
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory.open(f"{tmp}/segments.db", conversations={
            "topic_window": window, "topic_threshold": threshold, "max_turns": 100_000,
        })
        n = 0
        for s in order:
            items = [{"speaker": "user" if u else "assistant", "text": t, "dia_id": f"{n + i}",
                      "at": begin + timedelta(seconds=30 * (n + i))} for i, (u, t) in enumerate(zip(s.user, s.texts))]
            mem.conversations.log(transcript(items, names=False), caller=caller, session_id="chain")
            n += len(items)
        mem.upkeep.runtime.drain()
        mem.upkeep.backfill()
        mem.upkeep.runtime.drain()
        messages = mem.conversations.show("chain", caller=caller, limit=100_000)
        reasons = {s.id: s.close_reason for s in mem.conversations.segments(caller=caller, session_id="chain", limit=10_000)}
        mem.close()
    cuts = {i: reasons[messages[i - 1].segment_id] for i in range(1, len(messages))
            if messages[i].segment_id != messages[i - 1].segment_id}
    topic = {i for i, why in cuts.items() if why == "topic"}
    junctions = set(starts(order))
    return {
        "sessions": len(order), "messages": len(messages), "junctions": len(junctions),
        "junctions_found": len(topic & junctions) / len(junctions),
        "false_cuts_per_session": len(topic - junctions) / len(order),
        "cuts_by_reason": {why: sum(1 for w in cuts.values() if w == why) for why in sorted(set(cuts.values()), key=str)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="LoCoMo JSON file")
    parser.add_argument("--vectors", type=Path, help="keep the turns' vectors in this .npy file between runs")
    parser.add_argument("--no-check", action="store_true", help="skip the end-to-end check through the record")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    data = json.loads(Path(args.data).read_text())
    tuning = {d["sample_id"] for d in data[:TUNE]}
    with tempfile.TemporaryDirectory() as tmp, Memory.open(f"{tmp}/vectors.db") as mem:
        everything = load(data, mem, args.vectors)
        stark = mem.upkeep.embedder.embed(list(STARK), kind="passage")
    parts = {"tune": [s for s in everything if s.conversation in tuning],
             "held out": [s for s in everything if s.conversation not in tuning]}
    measured = {(name, w): cosines(part, w) for name, part in parts.items() for w in WINDOWS}
    chains = {name: chain(part) for name, part in parts.items()}
    curve = {name: {w: {t: {**rates(measured[name, w], t), **through_rule(chains[name], w, t)} for t in THRESHOLDS}
                    for w in WINDOWS} for name in parts}
    allowed = [(w, t) for w in WINDOWS for t in THRESHOLDS if curve["tune"][w][t]["false_cuts_per_session"] <= MAX_FALSE_CUTS]
    window, threshold = max(allowed, key=lambda wt: (
        curve["tune"][wt[0]][wt[1]]["junctions_found"], -curve["tune"][wt[0]][wt[1]]["false_cuts_per_session"], -wt[0]))
    report = {
        "data": args.data,
        "sessions": {name: len(part) for name, part in parts.items()},
        "spliced junctions (per position)": {name: len(measured[name, WINDOWS[0]]["spliced"]) for name in parts},
        "chain": {name: {"sessions": len(order), "junctions": len(order) - 1} for name, order in chains.items()},
        # the chance that a spliced junction's cosine is below a position's inside a session
        "auroc": {name: {w: auroc([-x for x in measured[name, w]["spliced"]], [-x for s in measured[name, w]["inside"] for x in s])
                         for w in WINDOWS} for name in parts},
        "curve": curve,
        "chosen": {"topic_window": window, "topic_threshold": threshold},
        "stark shift (cosine by position, junction at 8)": {
            w: {i: round(c, 3) for i, c in window_cosines(stark, [n % 2 == 0 for n in range(len(STARK))], w)} for w in WINDOWS
        },
        "stark shift cut at": topic_shift(stark, [n % 2 == 0 for n in range(len(STARK))], window, threshold),
    }
    if not args.no_check:
        report["check (held out, through the record)"] = check(chains["held out"], window, threshold)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    print(f"LoCoMo sessions: {report['sessions']}; spliced junctions per position: "
          f"{report['spliced junctions (per position)']}; chains: {report['chain']}")
    print("AUROC, spliced junction below a position inside a session: "
          + "; ".join(f"{name}: " + ", ".join(f"w{w} {v:.3f}" for w, v in by.items()) for name, by in report["auroc"].items()))
    for name in parts:
        print()
        print(f"{name}: per position, inside split / spliced found / next day found; through the rule, "
              "junctions cut / false cuts per session")
        print()
        print("| threshold |" + "".join(f" window {w} |" for w in WINDOWS))
        print("|---:|" + "---|" * len(WINDOWS))
        for t in THRESHOLDS:
            cells = "".join(
                " {positions_split:.3f} / {spliced_found:.3f} / {next_day_found:.3f}; "
                "{junctions_found:.3f} / {false_cuts_per_session:.3f} |".format(**curve[name][w][t])
                for w in WINDOWS
            )
            print(f"| {t:.3f} |{cells}")
    print()
    print(f"chosen (most junctions cut on the tuning chain with at most {MAX_FALSE_CUTS} false cuts per session): "
          f"window {window}, threshold {threshold}")
    for name in parts:
        print(f"  {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in curve[name][window][threshold].items()))
    print(f"  a stark shift (STARK, junction at 8) is cut at {report['stark shift cut at']}; its cosines by window: "
          f"{report['stark shift (cosine by position, junction at 8)']}")
    if "check (held out, through the record)" in report:
        print(f"  through the record (held out): {report['check (held out, through the record)']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
