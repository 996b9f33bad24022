"""A clean memory in an agent's loop: scripted multi-session conversations through the real hooks.

The conversations (bench/data/agent_loop.json: four users, two agents, English and Czech; facts
said in passing, facts asked to be remembered, corrections, questions, greetings, chit-chat and
the assistant's small talk) are played against a real `clawrecall serve` on a fresh SQLite store
with the default config (the local model), in the order OpenClaw calls the plugin on an
`openclaw agent --local` turn:

  1. `POST /v1/hooks/startup` `{messages}` and `POST /v1/hooks/before_prompt_build` `{prompt, messages}`: the
     last two messages of the history (`[]` on a session's first turn) and the turn's prompt, as
     integrations/openclaw sends them;
  2. `POST /v1/hooks/agent_end` `{messages, success}`: the whole transcript so far (a `--local` run is
     a new process: nothing was acknowledged before), stamped as OpenClaw stamps it: the user's message
     holds the injected block before the prompt, and the running turn's prompt carries the time of the
     model call, while later transcripts carry the same prompt with the time its turn began.

Sessions of different users take turns; between sessions the bench waits until the server's
background work (capture, embedding) is done, as a person's next session comes minutes later.

What it reports, per session and per set (users alice and jana tune the recall defaults; bob and
petr are held out):

  * messages stored vs said: the record's user and assistant rows of the session (goal: equal);
  * junk memories: memories (kind `memory`) that are a question, a greeting or chit-chat, the
    assistant's text, template or placeholder text, or a duplicate of another memory in the same scope
    (the same text once case, spacing and end punctuation are set aside) (goal: 0);
  * recall-block precision: the share of injected lines that contain one of the prompt's needed facts
    (or an older value of a corrected one), a repeat of an earlier line of the same block counting as not
    relevant; recall: the share of needed facts that some line contains (goal: precision ≥ 0.8 with
    recall ≥ 0.9); the standing facts the session's startup blocks carried, and recall in context: the
    share of needed facts the model reads with the prompt (this block, the session's earlier blocks, which
    its transcript keeps, and its standing facts);
  * injected precision and recall: the same over everything the plugin puts before the prompt in its one
    block: the startup block's standing facts (an allergy, a diet: kept in mind whatever is asked, so they
    come on a session's first turn whether or not that prompt needs them) and recall's lines;
  * tool-vs-recall agreement: each injected line's text is looked for in what every search door
    answers for the same prompt and caller (a record with the same text counts): REST `/v1/search`, the tools `memory_search` (the plugin's
    `clawrecall_search` and core's `memory_search` in slot mode) and `memory_recall` (`clawrecall_recall`),
    MCP `memory_search` and `clawrecall search --json` (goal: every line found by every door);
  * hook latency as the client sees it, HTTP included (goal on SQLite: recall p50 ≤ 25 ms,
    agent_end p50 ≤ 15 ms).

With `--openclaw` the same turns are real `openclaw agent --local` runs (OpenClaw 2026.9.6 with the
plugin installed, a stub model answering each turn with its scripted reply), and the blocks are read
from what OpenClaw sent the model.

    python bench/agent_loop.py [--set tuning|heldout|all] [--no-cli] [--openclaw] [--config-set KEY=VALUE ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from itertools import zip_longest
from pathlib import Path
from urllib.parse import quote

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from openclaw_harness import PLUGIN_DIR, OpenClaw, ensure_openclaw  # noqa: E402
from openclaw_stub_model import message_text  # noqa: E402
from scale import pct  # noqa: E402

from clawrecall.config import ENV_PREFIX  # noqa: E402
from clawrecall.conversations.text import UNTRUSTED, sanitize_for_context  # noqa: E402
from clawrecall.openclaw.install import install_entries  # noqa: E402
from clawrecall.server.spawn import spawn_server  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "agent_loop.json"
GOALS = {"precision": 0.8, "recall": 0.9, "recall_p50_ms": 25.0, "agent_end_p50_ms": 15.0}
JUNK_KINDS = {"question", "greeting", "chitchat"}
# text a person never said: OpenClaw's workspace templates and placeholders
TEMPLATE = re.compile(r"<!--|\bYYYY\b|\{\{|\.\.\.\s*$|…\s*$|\[(?:your|name|date)[^\]]*\]", re.IGNORECASE)
MODEL_CALL_MS = 273  # from a turn's start to its model call, when OpenClaw stamps the running prompt
# "[via coder]" after the label: another agent's shared memory (docs/agents.md), not part of its text
LINE = re.compile(r"^- \[(?P<label>[^\]]+)\](?: \[via (?P<via>[^\]]+)\])? (?P<text>.*?)(?: \((?P<meta>[^()]*)\))?$")


def norm(text: str) -> str:
    """Text as a person compares two lines: case, accents' forms, spacing and end punctuation set aside."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(re.sub(r"[.!?…,;:]+(\s|$)", r"\1", text).split())


def mentions(text: str, markers: list[list[str]]) -> bool:
    low = unicodedata.normalize("NFKC", text).lower()
    return any(all(word in low for word in group) for group in markers)


def played_order(sessions: list[dict]) -> list[dict]:
    """Each user's sessions in their order, users taking turns (alice 1, jana 1, bob 1, …)."""
    by_user: dict[str, list[dict]] = {}
    for s in sessions:
        by_user.setdefault(s["user"], []).append(s)
    return [s for group in zip_longest(*by_user.values()) for s in group if s is not None]


def headers(session: dict) -> dict[str, str]:
    return {"x-clawrecall-user": quote(session["user"]), "x-clawrecall-agent": quote(session["agent"]),
            "x-clawrecall-session": quote(session["id"])}


def message(role: str, text: str, at_ms: int) -> dict:
    """A transcript message as the plugin's transcriptMessages sends it."""
    return {"role": role, "content": [{"type": "text", "text": text}], "timestamp": at_ms}


def block_lines(block: str | None) -> list[dict]:
    """The recalled lines of a `<relevant-memories>` block: label, text, and what follows in parentheses."""
    if not block:
        return []
    found = re.search(rf"^\[{UNTRUSTED} (\w+) [^\n]*\]$(.*?)^\[END {UNTRUSTED} \1\]$", block, re.M | re.S)
    body = found.group(2) if found else ""
    lines = []
    for raw in body.strip().splitlines():
        found = LINE.match(raw.strip())
        lines.append(found.groupdict() if found else {"label": "?", "text": raw.strip(), "meta": ""})
    return lines


class Doors:
    """The same question through every search door, as the turn's caller: the texts each returns."""

    def __init__(self, http: httpx.Client, db: Path, cli: bool):
        self.http, self.db, self.cli = http, db, cli

    def ask(self, query: str, session: dict) -> dict[str, list[str]]:
        h = headers(session)
        found = {
            "rest /v1/search": [r["memory"]["content"] for r in self._post("/v1/search", {"query": query}, h)["results"]],
            "tool memory_search": [r["snippet"] for r in self._tool("memory_search", query, h)["results"]],
            "tool memory_recall": [m["content"] for m in self._tool("memory_recall", query, h)["memories"]],
            "mcp memory_search": [r["snippet"] for r in self._mcp("memory_search", query, h)["results"]],
        }
        if self.cli:
            found["cli search"] = self._cli(query, session)
        return found

    def _post(self, path: str, body: dict, h: dict) -> dict:
        response = self.http.post(path, json=body, headers=h)
        response.raise_for_status()
        return response.json()

    def _tool(self, name: str, query: str, h: dict) -> dict:
        return self._post(f"/v1/tools/{name}", {"query": query}, h)["details"]

    def _mcp(self, name: str, query: str, h: dict) -> dict:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {"query": query}}}
        response = self.http.post("/mcp", json=call, headers={**h, "accept": "application/json, text/event-stream"})
        response.raise_for_status()
        return response.json()["result"]["structuredContent"]

    def _cli(self, query: str, session: dict) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-m", "clawrecall.cli", "--db", str(self.db), "search", query, "--user", session["user"],
             "--agent", session["agent"], "--json"],
            capture_output=True, text=True, check=True,
        ).stdout
        rows = json.loads(out)
        rows = rows.get("results", rows) if isinstance(rows, dict) else rows
        return [(r.get("memory") or r)["content"] for r in rows]


def found_by(line: dict, texts: list[str]) -> bool:
    """Whether a door returned the record a block line shows (a line is its text, sanitised and maybe cut)."""
    shown = norm(line["text"].removesuffix("…"))
    return any(norm(sanitize_for_context(t, 100_000)).startswith(shown) for t in texts)


class OpenClawTurns:
    """Real `openclaw agent --local` turns with the plugin installed (mode beside), one OpenClaw state per
    user (a local turn belongs to the plugin's `user`), the stub model answering each turn with its
    scripted reply; the block is read from what OpenClaw sent the model. The search doors are asked while
    the model answers, as a tool the agent called in its turn would be: the turn's messages are recorded
    after it ends."""

    def __init__(self, root: Path, url: str):
        import openclaw_stub_model  # tests/: the harness the end-to-end test uses

        self.root, self.url, self.reply = root, url, "done"
        self.bins = ensure_openclaw()
        self.model = openclaw_stub_model.StubModel().start()
        openclaw_stub_model.next_step = self._answer
        self.states: dict[str, OpenClaw] = {}
        self.doors: Doors | None = None
        self.asking: tuple[dict, dict] | None = None  # (session, turn) whose doors the model's next call asks
        self.found: dict[str, list[str]] = {}

    def _answer(self, messages: list[dict]) -> tuple[str, dict]:
        """The model's step: on a turn's first call, every door asked as the plugin's caller, then the reply."""
        if self.asking is not None and self.doors is not None:
            session, turn = self.asking
            self.asking = None
            key = re.search(r"\| session=(\S+) \|", _prompt_message(messages, turn["user"]))
            # the doors leave out the messages of the caller's own session, which OpenClaw names so
            self.found = self.doors.ask(turn["user"], {**session, "id": key.group(1) if key else session["id"]})
        return "text", {"text": self.reply}

    def turn(self, session: dict, turn: dict) -> tuple[str | None, str | None, dict[str, list[str]]]:
        """The turn's startup block (in its own prompt) and recall block, as OpenClaw sent them to the model, and
        what each search door answered for the prompt in the turn."""
        oc = self._state(session["user"])
        self.reply, self.asking, self.found = turn["assistant"], (session, turn), {}
        self.model.take()
        oc.turn(session["agent"], session["id"], turn["user"])
        said = _prompt_message(self.model.take()[0]["messages"], turn["user"])  # the turn's first model request
        found = re.search(r"<relevant-memories>.*?</relevant-memories>", said, re.DOTALL)
        init = re.search(r"(?<!\w)init:\n.*?\n/init$", said, re.DOTALL | re.MULTILINE)
        return (init.group(0) if init else None), (found.group(0) if found else None), self.found

    def _state(self, user: str) -> OpenClaw:
        if user not in self.states:
            oc = OpenClaw(self.root / user, self.bins)
            config = oc.base_config(self.model.base_url)
            config["agents"]["entries"] = {a: {"workspace": str(oc.root / f"ws-{a}")} for a in ("main", "coder")}
            (oc.root / "ws-coder").mkdir(exist_ok=True)
            oc.config_path.write_text(json.dumps(config, indent=2))
            install_entries(oc.config_path, mode="beside", plugin_dir=PLUGIN_DIR,
                            plugin_config={"serverUrl": self.url, "user": user})
            self.states[user] = oc
        return self.states[user]

    def close(self) -> None:
        self.model.stop()


def _prompt_message(sent: list[dict], prompt: str) -> str:
    """The text of the prompt's own message: earlier turns' messages keep the blocks they were given; OpenClaw
    puts the prepended blocks before the prompt, after its timestamp ("[Mon … UTC] init:"), and its runtime
    line ("Runtime: agent=main | session=agent:main:explicit:<id> | …") after it."""
    return next((text for m in reversed(sent) if m.get("role") == "user" and prompt in (text := message_text(m))), "")


def settle(db: Path, timeout_s: float = 120.0) -> None:
    """Until the server's background work is done: every row embedded, no job waiting, nothing new for 0.3 s."""
    deadline = time.monotonic() + timeout_s
    last = None
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        while time.monotonic() < deadline:
            rows, pending = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE embedding IS NULL AND deleted_at IS NULL) FROM memories"
            ).fetchone()
            jobs = conn.execute("SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')").fetchone()[0]
            state = (rows, pending, jobs)
            if pending == 0 and jobs == 0 and state == last:
                return
            last = state
            time.sleep(0.3)
    raise TimeoutError("the server's background work did not finish")


def play(data: dict, url: str, db: Path, cli: bool, log, openclaw: OpenClawTurns | None = None) -> dict:
    """Every session's turns through the hooks (or real OpenClaw turns); what each recall injected and
    which of its lines every door found."""
    turns_out, latencies = [], {"startup": [], "before_prompt_build": [], "agent_end": []}
    with httpx.Client(base_url=url, timeout=60) as http:
        doors = Doors(http, db, cli)
        for session in played_order(data["sessions"]):
            transcript: list[dict] = []
            for n, turn in enumerate(session["turns"]):
                if openclaw is None:
                    startup, block = rest_recall(http, session, turn["user"], transcript, latencies)
                    found = doors.ask(turn["user"], session) if block else {}
                    rest_end(http, session, turn, "\n\n".join(b for b in (startup, block) if b), transcript, latencies)
                else:
                    openclaw.doors = doors
                    startup, block, asked = openclaw.turn(session, turn)
                    found = asked if block else {}
                lines = block_lines(block)
                turns_out.append({
                    "session": session["id"], "turn": n, "prompt": turn["user"], "lines": lines,
                    "standing": block_lines(startup),
                    "doors": {door: [found_by(line, got) for line in lines] for door, got in found.items()},
                })
            settle(db)
            log(f"{session['id']}: {len(session['turns'])} turns")
    return {"turns": turns_out, "latency_ms": {k: v for k, v in latencies.items() if v}}


def rest_recall(http: httpx.Client, session: dict, prompt: str, transcript: list[dict],
                latencies: dict) -> tuple[str | None, str | None]:
    """The startup block and `before_prompt_build`'s, as the plugin asks for them: the prompt, and the history's
    last two messages (plainMessages)."""
    history = [{"role": m["role"], "content": m["content"][0]["text"]} for m in transcript[-2:]]
    blocks = []
    for hook, body in (("startup", {"messages": history if transcript else []}),
                       ("before_prompt_build", {"prompt": prompt, "messages": history if transcript else []})):
        started = time.perf_counter()
        answer = http.post(f"/v1/hooks/{hook}", headers=headers(session), json=body)
        latencies[hook].append((time.perf_counter() - started) * 1000)
        answer.raise_for_status()
        blocks.append(answer.json()["prependContext"])
    return blocks[0], blocks[1]


def rest_end(http: httpx.Client, session: dict, turn: dict, block: str, transcript: list[dict],
             latencies: dict) -> None:
    """`agent_end` with the whole transcript, as OpenClaw holds it after the turn."""
    began = int(time.time() * 1000)
    # OpenClaw keeps the injected block in the user's message: `prependContext` goes before the prompt
    said = f"{block}\n\n{turn['user']}" if block else turn["user"]
    # and stamps the running turn's prompt at the model call, the same prompt in later transcripts when
    # the turn began (captured from OpenClaw 2026.9.6)
    running = [*transcript, message("user", said, began + MODEL_CALL_MS),
               message("assistant", turn["assistant"], began + MODEL_CALL_MS + 1)]
    transcript += [message("user", said, began), running[-1]]
    started = time.perf_counter()
    ended = http.post("/v1/hooks/agent_end", headers=headers(session), json={"messages": running, "success": True})
    latencies["agent_end"].append((time.perf_counter() - started) * 1000)
    ended.raise_for_status()


def judge_turn(turn: dict, spec: dict, facts: dict, context: list[dict] = ()) -> dict:
    """Which injected lines are relevant, which needed facts are present: in the recall block, and in it or in
    `context`: what the session's earlier recall blocks and its startup blocks so far put in the transcript, where
    the model still reads it (which is why recall does not repeat a line within `hooks.recall.min_repeat_turns`)."""
    wanted = [*spec.get("needs", []), *spec.get("ok", [])]
    seen: set[str] = set()
    relevant = []
    for line in turn["lines"]:
        key = norm(line["text"])
        relevant.append(key not in seen and any(mentions(line["text"], facts[f]) for f in wanted))
        seen.add(key)
    present = [f for f in spec.get("needs", []) if any(mentions(line["text"], facts[f]) for line in turn["lines"])]
    in_context = [f for f in spec.get("needs", [])
                  if any(mentions(line["text"], facts[f]) for line in [*turn["lines"], *context])]
    return {"relevant": relevant, "needed": spec.get("needs", []), "present": present, "in_context": in_context}


def junk(db: Path, data: dict) -> list[dict]:
    """Every memory (kind `memory`) a person would not keep, with why."""
    said_by = {}
    for s in data["sessions"]:
        for t in s["turns"]:
            said_by[norm(t["user"])] = t["kind"]
            said_by.setdefault(norm(t["assistant"]), "assistant")
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT id, scope, content, category FROM memories WHERE kind = 'memory' AND deleted_at IS NULL "
            "ORDER BY created_at"
        ).fetchall()
    out, seen = [], set()
    for memory_id, scope, content, category in rows:
        text = norm(content)
        said = [kind for turn, kind in said_by.items() if text and (text in turn or turn in text)]
        why = None
        if (scope, text) in seen:
            why = "duplicate"
        elif TEMPLATE.search(content):
            why = "template"
        elif "assistant" in said and not any(k not in JUNK_KINDS | {"assistant"} for k in said):
            why = "assistant"
        elif said and all(k in JUNK_KINDS for k in said):
            why = said[0]
        elif content.rstrip().endswith("?"):
            why = "question"
        seen.add((scope, text))
        if why:
            out.append({"id": memory_id, "scope": scope, "category": category, "content": content, "why": why})
    return out


def stored_messages(db: Path, session_ids: list[str]) -> dict[str, int]:
    """User and assistant messages the record holds, per session (by its id: OpenClaw's session key ends with it)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT session_id, count(*) FROM messages WHERE role IN ('user', 'assistant') GROUP BY session_id"
        ).fetchall()
    return {sid: sum(n for key, n in rows if key == sid or key.endswith(f":{sid}")) for sid in session_ids}


def ratio(num: int, den: int) -> float | None:
    return None if den == 0 else num / den


def report(data: dict, played: dict, db: Path, wanted_set: str) -> dict:
    facts = {k: v for k, v in data["facts"].items()}
    specs = {(s["id"], n): t for s in data["sessions"] for n, t in enumerate(s["turns"])}
    stored = stored_messages(db, [s["id"] for s in data["sessions"]])
    junk_rows = junk(db, data)
    sessions = []
    for s in data["sessions"]:
        if wanted_set != "all" and s["set"] != wanted_set:
            continue
        turns = [t for t in played["turns"] if t["session"] == s["id"]]
        given = [t.get("standing", []) for t in turns]  # each turn's standing lines, in the transcript from then on
        judged = [judge_turn(t, specs[(s["id"], t["turn"])], facts,
                             [x for g in given[: n + 1] for x in g] + [x for e in turns[:n] for x in e["lines"]])
                  for n, t in enumerate(turns)]
        # what the plugin injects into the turn is one block: the startup block's standing facts and recall's lines
        whole = [judge_turn({**t, "lines": [*t.get("standing", []), *t["lines"]]}, specs[(s["id"], t["turn"])], facts)
                 for t in turns]
        lines = sum(len(j["relevant"]) for j in judged)
        good = sum(sum(j["relevant"]) for j in judged)
        needed = sum(len(j["needed"]) for j in judged)
        present = sum(len(j["present"]) for j in judged)
        checks = [ok for t in turns for found in t["doors"].values() for ok in found]
        scope = f"user:{s['user']}"
        sessions.append({
            "session": s["id"], "set": s["set"], "lang": s["lang"], "user": s["user"], "agent": s["agent"],
            "said": 2 * len(s["turns"]), "stored": stored[s["id"]],
            "lines": lines, "relevant_lines": good, "needed": needed, "present": present,
            "precision": ratio(good, lines), "recall": ratio(present, needed),
            "injected_lines": sum(len(j["relevant"]) for j in whole),
            "injected_relevant": sum(sum(j["relevant"]) for j in whole),
            "injected_present": sum(len(j["present"]) for j in whole),
            "injected_precision": ratio(sum(sum(j["relevant"]) for j in whole), sum(len(j["relevant"]) for j in whole)),
            "injected_recall": ratio(sum(len(j["present"]) for j in whole), needed),
            "standing": sum(len(g) for g in given), "in_context": sum(len(j["in_context"]) for j in judged),
            "recall_in_context": ratio(sum(len(j["in_context"]) for j in judged), needed),
            "agreement": ratio(sum(checks), len(checks)), "door_checks": len(checks),
            "junk_in_scope": sum(1 for j in junk_rows if j["scope"] == scope),
        })
    reported = {s["session"] for s in sessions}
    doors: dict[str, list[bool]] = {}
    for t in played["turns"]:
        for door, found in t["doors"].items() if t["session"] in reported else ():
            doors.setdefault(door, []).extend(found)
    lat = played["latency_ms"]
    totals = {}
    for name, lang in [(n, lang) for n in ("tuning", "heldout") for lang in (None, "en", "cs")]:
        group = [s for s in sessions if s["set"] == name and lang in (None, s["lang"])]
        if group:
            totals[name if lang is None else f"{name}, {lang}"] = {
                "said": sum(s["said"] for s in group), "stored": sum(s["stored"] for s in group),
                "precision": ratio(sum(s["relevant_lines"] for s in group), sum(s["lines"] for s in group)),
                "recall": ratio(sum(s["present"] for s in group), sum(s["needed"] for s in group)),
                "lines": sum(s["lines"] for s in group), "standing": sum(s["standing"] for s in group),
                "injected_precision": ratio(sum(s["injected_relevant"] for s in group),
                                            sum(s["injected_lines"] for s in group)),
                "injected_recall": ratio(sum(s["injected_present"] for s in group), sum(s["needed"] for s in group)),
                "recall_in_context": ratio(sum(s["in_context"] for s in group), sum(s["needed"] for s in group)),
            }
    return {
        "sessions": sessions, "totals": totals, "junk": junk_rows,
        "doors": {d: {"found": sum(v), "checked": len(v)} for d, v in doors.items()},
        "latency_ms": {name: {"p50": statistics.median(v), "p95": pct(v, 95), "calls": len(v)} for name, v in lat.items()},
        "turns": played["turns"],
    }


def fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def render(r: dict) -> str:
    out = [
        f"{'real openclaw agent --local turns' if r['openclaw'] else 'REST hooks'}; load average {r['load'][0]:.2f} "
        f"at start, {r['load_end'][0]:.2f} at end; config: " + (", ".join(r["config_set"]) or "defaults"),
        "",
        "| session | set | lang | agent | said | stored | junk (user's) | lines | precision | recall | standing "
        "| injected precision | injected recall | recall in context | doors agree |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in r["sessions"]:
        out.append(f"| {s['session']} | {s['set']} | {s['lang']} | {s['agent']} | {s['said']} | {s['stored']} | {s['junk_in_scope']} "
                   f"| {s['lines']} | {fmt(s['precision'])} | {fmt(s['recall'])} | {s['standing']} "
                   f"| {fmt(s['injected_precision'])} | {fmt(s['injected_recall'])} "
                   f"| {fmt(s['recall_in_context'])} | {fmt(s['agreement'])} |")
    out += ["", "| set | said | stored | lines | precision | recall | standing | injected precision | injected recall "
            "| recall in context |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, t in r["totals"].items():
        out.append(f"| {name} | {t['said']} | {t['stored']} | {t['lines']} | {fmt(t['precision'])} | {fmt(t['recall'])} "
                   f"| {t['standing']} | {fmt(t['injected_precision'])} | {fmt(t['injected_recall'])} "
                   f"| {fmt(t['recall_in_context'])} |")
    out += ["", "| search door | lines found | of |", "|---|---:|---:|"]
    out += [f"| {d} | {v['found']} | {v['checked']} |" for d, v in r["doors"].items()]
    lat = r["latency_ms"]
    if lat:  # through OpenClaw the hooks are called by the plugin, not timed here
        out += ["", "| hook | calls | p50 (ms) | p95 (ms) | goal p50 |", "|---|---:|---:|---:|---:|"]
        for name, goal in (("startup", None), ("before_prompt_build", GOALS["recall_p50_ms"]),
                           ("agent_end", GOALS["agent_end_p50_ms"])):
            out.append(f"| {name} | {lat[name]['calls']} | {lat[name]['p50']:.1f} | {lat[name]['p95']:.1f} "
                       f"| {'–' if goal is None else f'{goal:g}'} |")
    out += ["", f"junk memories: {len(r['junk'])}"]
    out += [f"  - [{j['why']}] {j['scope']} {j['category']}: {j['content'][:90]!r}" for j in r["junk"]]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", dest="which", choices=("tuning", "heldout", "all"), default="all",
                        help="which sessions to report (all are played: later sessions build on earlier ones)")
    parser.add_argument("--no-cli", action="store_true", help="leave the CLI door out (a process per question)")
    parser.add_argument("--config-set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config key for the server, e.g. hooks.recall.min_score=0.3 (repeatable)")
    parser.add_argument("--openclaw", action="store_true",
                        help="play the turns through real `openclaw agent --local` runs (tests/openclaw_harness.py)")
    parser.add_argument("--sessions", type=int, metavar="N", help="play only the first N sessions (in played order)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    data = json.loads(DATA.read_text())
    if args.sessions is not None:
        data["sessions"] = played_order(data["sessions"])[: args.sessions]
    env = {}
    for item in args.config_set:
        key, _, value = item.partition("=")
        env[ENV_PREFIX + key.upper().replace(".", "__")] = value
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="clawrecall-agent-loop-") as tmp:
        db = Path(tmp) / "loop.db"
        with spawn_server(db, env={"CLAWRECALL_HOME": str(Path(tmp) / "home"), **env}) as server:
            log(f"server ready at {server.url}")
            openclaw = OpenClawTurns(Path(tmp) / "openclaw", server.url) if args.openclaw else None
            try:
                played = play(data, server.url, db, not args.no_cli, log, openclaw)
            finally:
                if openclaw is not None:
                    openclaw.close()
        result = {"load": load, "load_end": os.getloadavg(), "config_set": args.config_set, "openclaw": args.openclaw,
                  **report(data, played, db, args.which)}
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
