"""The bundled model on ONNX Runtime: load time, one-query latency and passage throughput, for the
graph built from the weights (`_bert.py`, the default) and, with `--export`, for the PyTorch export
(needs the `torch` extra).

    nice python bench/local_model.py [--export] [--queries 300] [--passages 2000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from clawrecall.embeddings import _bert, _onnx
from clawrecall.embeddings.local import bundled_model_dir

WORDS = (
    "the", "user", "prefers", "dark", "mode", "deploys", "happen", "on", "tuesdays", "alice",
    "moved", "to", "lisbon", "and", "started", "a", "new", "job", "at", "a", "bakery", "near",
    "the", "river", "bob", "is", "allergic", "to", "peanuts", "remember", "the", "api", "key",
    "rotates", "every", "ninety", "days",
)


def passages(n: int) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(8 + i % 40)) for i in range(n)]


def measure(name: str, make, queries: int, texts: list[str]) -> None:
    start = time.perf_counter()
    encoder = make()
    loaded = time.perf_counter() - start
    for q in texts[:20]:  # warm up
        list(encoder.start([[q]]))
    times, cpu = [], time.process_time()
    for q in (texts * 2)[:queries]:
        t = time.perf_counter()
        list(encoder.start([[q]]))
        times.append(time.perf_counter() - t)
    query_cpu = (time.process_time() - cpu) / queries
    batches = [texts[i : i + 64] for i in range(0, len(texts), 64)]
    t, cpu = time.perf_counter(), time.process_time()
    for _ in encoder.start(batches):
        pass
    rate = len(texts) / (time.perf_counter() - t)
    passage_cpu = (time.process_time() - cpu) / len(texts)
    times.sort()
    # CPU time too: on a shared machine it moves less than the wall clock
    print(
        f"{name:8} load {loaded:.2f} s  query median {statistics.median(times) * 1000:.2f} ms "
        f"p90 {times[int(len(times) * 0.9)] * 1000:.2f} ms (CPU {query_cpu * 1000:.2f} ms)  "
        f"passages {rate:.0f}/s (CPU {passage_cpu * 1000:.2f} ms each)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--export", action="store_true", help="also time the PyTorch export")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--passages", type=int, default=2000)
    args = parser.parse_args()
    model = bundled_model_dir()
    texts = passages(args.passages)
    pooling = _onnx.plain_encoder(model)
    runs = [("built", lambda: _onnx.OnnxEncoder(model, _bert.build(model, _bert.config_of(model)), pooling))]
    if args.export:
        target = Path(tempfile.mkdtemp()) / "model.onnx"
        _onnx.export(model, target)
        runs.append(("export", lambda: _onnx.OnnxEncoder(model, target, pooling)))
    for _ in range(2):  # alternate, so a neighbour's load falls on both
        for name, make in runs:
            measure(name, make, args.queries, texts)


if __name__ == "__main__":
    main()
