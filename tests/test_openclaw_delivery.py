"""How the OpenClaw plugin delivers each turn's transcript (JavaScript, run by Node, against a small HTTP
server that goes away and comes back on the same port): what a turn said while the server was away is
kept on disk and sent once it answers (in order, once, private to the user, bounded); what was
acknowledged is not sent again, even after a compaction moved it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parent.parent / "integrations" / "openclaw"

SCRIPT = """
import http from "node:http";
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";

const root = process.argv[1];
process.env.OPENCLAW_STATE_DIR = join(root, "state");  // the plugin keeps turns in OpenClaw's state folder
const { ClawrecallClient } = await import("./lib/client.js");
const { createHooks } = await import("./lib/hooks.js");
const { Outbox } = await import("./lib/outbox.js");
const { resolveConfig } = await import("./index.js");

const seen = [];
const sentTexts = [];
let arrived = () => {};
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString() || "null");
    seen.push({ session: decodeURIComponent(req.headers["x-clawrecall-session"]), said: body.messages[0].content[0].text });
    sentTexts.push(body.messages.map((m) => m.content[0].text));
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ recorded: body.messages.length }));
    arrived();
  });
});
const up = () => new Promise((r) => server.listen(port, "127.0.0.1", r));
const down = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const port = server.address().port;
await down();

const logs = [];
const logger = { warn: (m) => logs.push(m), info: () => {}, debug: () => {} };
const config = resolveConfig({ serverUrl: `http://127.0.0.1:${port}`, capture: { timeoutMs: 2000 } });
const client = new ClawrecallClient(config, logger);
const hooks = createHooks({ client, config, retryMs: 20 });
const turn = (session, said) => hooks.agentEnd(
  { success: true, messages: [{ role: "user", content: [{ type: "text", text: said }], timestamp: 1 },
                              { role: "assistant", content: [{ type: "text", text: "ok" }], timestamp: 2 }] },
  { agentId: "main", sessionKey: session });
const folder = join(root, "state", "clawrecall", "outbox");
const files = async () => (await readdir(folder)).filter((n) => !n.startsWith("."));
const out = {};

// The server is away: each turn goes on, what it said is kept, privately.
await turn("a", "My dentist appointment is on Friday at 3pm.");
await turn("b", "My bike is red.");
out.keptWhileDown = (await files()).length;
out.folderMode = ((await stat(folder)).mode & 0o777).toString(8);
out.fileModes = [...new Set(await Promise.all((await files()).map(async (n) => ((await stat(join(folder, n))).mode & 0o777).toString(8))))];
out.seenWhileDown = seen.length;

// It is back: the next turn sends the kept ones first, in order, then its own; nothing is kept.
await up();
await turn("c", "I prefer oolong tea.");
out.afterBack = seen.map((s) => `${s.session}: ${s.said}`);
out.keptAfterBack = (await files()).length;

// Away again, then back with no further turn: the retry timer sends it.
await down();
seen.length = 0;
await turn("d", "The release checklist is in the blue binder.");
out.keptAgain = (await files()).length;
const delivered = new Promise((r) => { arrived = r; });
await up();
await delivered;
await hooks.retry();  // lets the timer's drain finish (a drain at a time) before counting
out.byTimer = seen.map((s) => `${s.session}: ${s.said}`);
out.keptAtEnd = (await files()).length;
await down();

// Bounds: past the count or size the oldest go; past the age a kept turn is dropped, not sent.
let now = 1_000_000;
const bounded = new Outbox({ dir: join(root, "bounded"), logger, now: () => now, limits: { items: 3, bytes: 10_000, ageMs: 1000 } });
for (let i = 0; i < 5; i++) { now += 1; await bounded.add({ path: "/x", body: { n: i }, identity: {} }); }
out.boundedKept = (await bounded.names()).length;
await bounded.add({ path: "/x", body: { big: "x".repeat(9_950) }, identity: {} });
out.afterBig = (await bounded.names()).length;
now += 5000;
const sent = [];
out.leftAfterAge = await bounded.drain(async (r) => { sent.push(r); return "sent"; });
out.sentAged = sent.length;
out.logs = logs;

// A compaction: the transcript is summarised and shorter than what was acknowledged; the new turn still goes.
await up();
seen.length = 0;
sentTexts.length = 0;
const msg = (role, text, timestamp) => ({ role, content: [{ type: "text", text }], timestamp });
const long = [];
for (let i = 0; i < 4; i++) long.push(msg("user", `question ${i}`, 10 * i), msg("assistant", `answer ${i}`, 10 * i + 1));
const ctx = { agentId: "main", sessionKey: "long" };
await hooks.agentEnd({ success: true, messages: long }, ctx);
await hooks.agentEnd({ success: true, messages: [...long, msg("user", "question 4", 40), msg("assistant", "answer 4", 41)] }, ctx);
const compacted = [msg("user", "Summary of the conversation so far", 45), msg("user", "question 5", 50), msg("assistant", "answer 5", 51)];
await hooks.agentEnd({ success: true, messages: compacted }, ctx);
out.sentBodies = seen.length;
out.compactedSent = sentTexts.slice(-1)[0];
out.secondSent = sentTexts[1];
await down();
console.log(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    node = shutil.which("node")
    assert node, "Node.js is needed to test the OpenClaw plugin"
    root = tmp_path_factory.mktemp("outbox")
    done = subprocess.run([node, "--input-type=module", "-e", SCRIPT, str(root)], cwd=PLUGIN,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_turns_said_while_the_server_is_away_are_kept_privately(run):
    assert run["seenWhileDown"] == 0 and run["keptWhileDown"] == 2
    assert run["folderMode"] == "700" and run["fileModes"] == ["600"]


def test_kept_turns_are_sent_first_in_order_and_once_when_the_server_answers(run):
    assert run["afterBack"] == [
        "a: My dentist appointment is on Friday at 3pm.", "b: My bike is red.", "c: I prefer oolong tea.",
    ]
    assert run["keptAfterBack"] == 0


def test_a_kept_turn_is_sent_by_the_retry_timer_without_another_turn(run):
    assert run["keptAgain"] == 1
    assert run["byTimer"] == ["d: The release checklist is in the blue binder."]
    assert run["keptAtEnd"] == 0


def test_the_outbox_is_bounded_and_says_what_it_dropped(run):
    assert run["boundedKept"] == 3  # five kept, the two oldest dropped
    assert run["afterBig"] == 1  # over the size bound alone: the older ones go, the newest is kept
    assert run["leftAfterAge"] == 0 and run["sentAged"] == 0  # too old to send: dropped
    logs = "\n".join(run["logs"])
    assert logs.count("dropped the 1 oldest kept (at most 3 turns") == 2  # one at each add past the bound
    assert "older than" in logs and "never sent" in logs


def test_only_new_messages_are_sent_again_and_a_compacted_transcript_is_sent_whole(run):
    assert run["secondSent"] == ["question 3", "answer 3", "question 4", "answer 4"]  # two acknowledged, then new
    assert run["compactedSent"] == ["Summary of the conversation so far", "question 5", "answer 5"]
