"""What the OpenClaw plugin adds to a turn: a warm OpenClaw gateway, the same turns with and without it.

A real OpenClaw (tests/openclaw_harness.py: Node 24 and openclaw from npm, cached) runs its gateway
against the scripted stub model (answers at once), once without the plugin and once with it in mode
"beside" against a real `clawrecall serve` whose store holds 200 memories of the user, so recall
finds something every turn; capture is on (every prompt is worth keeping). After two warm-up turns,
each variant runs `--turns` turns, each in a new session, through `openclaw agent` (gateway path).
Reported: the agent's own `durationMs` per turn (p50/p95) for both variants, the added p50, the
recall hook's time inside the server (its access log), and the added p50 minus that hook time:
what the plugin costs beyond the search itself (target: at most 50 ms).

    python bench/openclaw_latency.py [--turns 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from openclaw_harness import PLUGIN_DIR, OpenClaw, ensure_openclaw  # noqa: E402
from openclaw_stub_model import StubModel  # noqa: E402

from clawrecall import Memory  # noqa: E402
from clawrecall.auth import TokenStore  # noqa: E402
from clawrecall.openclaw.install import install_entries  # noqa: E402
from clawrecall.server.spawn import spawn_server  # noqa: E402

TOPICS = ("editor", "shell", "database", "language", "cloud", "browser", "keyboard", "framework", "CI", "terminal")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def seed(db: Path) -> str:
    with Memory.open(db) as mem:
        mem.add_many([
            {"content": f"Alice prefers the {TOPICS[i % 10]} number {i} for project {i % 17}", "category": "preference"}
            for i in range(200)
        ], user_id="alice", agent_id="main")
    tokens = TokenStore(db)
    _, token = tokens.create(kind="service", name="bench")
    tokens.close()
    return token


def run_variant(root: Path, bins: dict[str, Path], model: StubModel, plugin: dict[str, Any] | None,
                turns: int) -> list[float]:
    oc = OpenClaw(root, bins)
    oc.config_path.write_text(json.dumps(oc.base_config(model.base_url), indent=2))
    if plugin is not None:
        install_entries(oc.config_path, mode="beside", plugin_dir=PLUGIN_DIR, plugin_config=plugin)
    durations = []
    with oc.gateway():
        for i in range(turns + 2):
            topic = TOPICS[i % 10]
            done = oc.turn("main", f"bench-{i}", f"Remember that I prefer the {topic} number {i} now; which {topic} "
                                                 "did I prefer before?")
            answer = json.loads(done.stdout[done.stdout.index("{"):])
            if i >= 2:  # two warm-up turns
                durations.append(float(answer["result"]["meta"]["durationMs"]))
    return durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--recall-only", action="store_true", help="Capture and startup identity off: recall alone.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    bins = ensure_openclaw()
    model = StubModel().start()
    with tempfile.TemporaryDirectory(prefix="clawrecall-oc-bench-") as tmp:
        root = Path(tmp)
        db = root / "memory.db"
        token = seed(db)
        with spawn_server(db, env={"CLAWRECALL_HOME": str(root / "home")}) as server:
            without = run_variant(root / "without", bins, model, None, args.turns)
            plugin: dict[str, Any] = {"serverUrl": server.url, "token": token, "user": "alice"}
            if args.recall_only:
                plugin |= {"capture": {"enabled": False}, "startup": {"enabled": False}}
            with_plugin = run_variant(root / "with", bins, model, plugin, args.turns)
            records = [r for r in server.records() if r.get("msg") == "request"]
    by_path: dict[str, list[float]] = {}
    for r in records:
        by_path.setdefault(r["path"], []).append(r["ms"])
    hook_ms = by_path.get("/v1/hooks/before_prompt_build", [])
    model.stop()
    hook_ms = hook_ms[2:]  # the warm-up turns'
    added = statistics.median(with_plugin) - statistics.median(without)
    result = {
        "turns": args.turns, "recall_only": args.recall_only,
        "without_ms": {"p50": statistics.median(without), "p95": pct(without, 0.95)},
        "with_ms": {"p50": statistics.median(with_plugin), "p95": pct(with_plugin, 0.95)},
        "added_p50_ms": round(added, 1),
        "recall_hook_server_p50_ms": round(statistics.median(hook_ms), 1) if hook_ms else None,
        "added_beyond_recall_hook_p50_ms": round(added - statistics.median(hook_ms), 1) if hook_ms else None,
        "server_p50_ms": {path: round(statistics.median(ms), 1) for path, ms in sorted(by_path.items())},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"OpenClaw gateway turns (agent durationMs), {args.turns} per variant, stub model")
    print(f"  without plugin  p50 {result['without_ms']['p50']:7.1f}  p95 {result['without_ms']['p95']:7.1f}")
    print(f"  with plugin     p50 {result['with_ms']['p50']:7.1f}  p95 {result['with_ms']['p95']:7.1f}")
    print(f"  added p50 {result['added_p50_ms']} ms; recall hook in the server p50 "
          f"{result['recall_hook_server_p50_ms']} ms; added beyond the hook {result['added_beyond_recall_hook_p50_ms']} ms")
    print("  server time p50 by route: " + ", ".join(f"{p} {ms} ms" for p, ms in result["server_p50_ms"].items()))


if __name__ == "__main__":
    main()
