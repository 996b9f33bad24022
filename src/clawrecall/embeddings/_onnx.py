"""A sentence-transformers model run by ONNX Runtime instead of PyTorch.

Why: a one-sentence query takes ~3.5 ms through ONNX Runtime on one CPU thread against
~11 ms through `SentenceTransformer.encode`, and a process never imports torch (a CLI search
starts seconds sooner; the default install has no PyTorch at all). The vectors agree with
PyTorch's to ~1e-6, so stored embeddings stay valid whichever runtime made them.

Only plain encoders qualify: modules Transformer → Pooling (mean or CLS) → optional
Normalize; anything else stays on PyTorch. A BERT encoder (the bundled all-MiniLM-L6-v2, and
most small sentence-transformers models) gets its graph written from its weights in memory on
each load (`_bert.py`). Any other is exported once with PyTorch (`torch.onnx`, the `torch`
extra) and cached under `$CLAWRECALL_MODEL_CACHE` (default
`$XDG_CACHE_HOME/clawrecall/models`), keyed by the sha256 of the weights, so a changed model
is never served from a stale export.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import EmbeddingError
from . import _bert, _wordpiece

log = logging.getLogger(__name__)

# onnxruntime keeps a device id and a telemetry database under ~/.cache/Microsoft when it is
# imported unless this is set first; a user who wants it sets the variable to 0 themselves
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

_EXPORT_VERSION = "1"  # bump when the exported graph changes shape
SMALL_BATCH = 4  # texts embedded on the calling thread alone (a query)
_SUB_BATCH = 16  # one run's texts: small groups of similar length are padded least
_AHEAD = 256  # texts a bulk call keeps queued on the worker pool
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TORCH_EXTRA = "pip install 'clawrecall[torch]'"  # what brings PyTorch and sentence-transformers


def cache_dir() -> Path:
    if os.environ.get("CLAWRECALL_MODEL_CACHE"):
        return Path(os.environ["CLAWRECALL_MODEL_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "clawrecall" / "models"


def available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def plain_encoder(model_dir: Path) -> str | None:
    """The pooling mode ("mean" or "cls") when `model_dir` is a plain encoder we can export, else None."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
    except (OSError, ValueError):
        return None
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    if not (model_dir / "tokenizer.json").exists() or not any((model_dir / f).exists() for f in _WEIGHT_FILES):
        return None
    try:
        pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
    except (OSError, ValueError, KeyError):
        return None
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
    if modes == {"pooling_mode_mean_tokens"}:
        return "mean"
    if modes == {"pooling_mode_cls_token"}:
        return "cls"
    return None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def weights_digest(model_dir: Path, known: str | None = None) -> str:
    return known or file_sha256(next(model_dir / f for f in _WEIGHT_FILES if (model_dir / f).exists()))


def export(model_dir: Path, target: Path) -> None:
    """Export the transformer of `model_dir` to `target` (atomically: a crash leaves no half file)."""
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise EmbeddingError(f"model {model_dir} is not a BERT encoder; exporting it to ONNX needs PyTorch: {TORCH_EXTRA}") from None

    st = SentenceTransformer(str(model_dir), device="cpu")
    module: Any = st[0]  # the transformer module (PyTorch is an extra)
    transformer = module.auto_model.eval()
    sample = st.tokenizer(["an example sentence", "two"], padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]

    class _Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *inputs):
            return self.transformer(**dict(zip(names, inputs))).last_hidden_state

    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    axes["hidden"] = {0: "batch", 1: "tokens"}
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".onnx.part")
    os.close(fd)
    try:
        import warnings

        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Encoder(),
                tuple(sample[n] for n in names),
                tmp,
                input_names=names,
                output_names=["hidden"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a shared cache must be readable by every user
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class OnnxEncoder:
    """Tokenizer + ONNX session + pooling: texts in, unnormalised float32 vectors out.

    `graph` is an exported file, or a serialized model built in memory (`_bert.build`)."""

    def __init__(self, model_dir: Path, graph: Path | bytes, pooling: str) -> None:
        import onnxruntime as ort

        self.pooling = pooling
        self._model_dir = model_dir
        self._graph = graph
        self._ort = ort
        max_len = _max_seq_length(model_dir)
        self._tokenizer = _wordpiece.load(model_dir / "tokenizer.json", max_len)
        # Every run uses one intra-op thread. Bulk work runs several runs at once, one per core:
        # ~25 % more texts/s than one run over all cores (no barrier after each operator, and a
        # core taken by another process slows one run, not every operator of all of them).
        self._session = self._load_session()
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._workers = _usable_cpus()
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _load_session(self):
        opts = self._ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        graph = self._graph if isinstance(self._graph, bytes) else str(self._graph)
        try:
            return self._ort.InferenceSession(graph, opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # a truncated or foreign file: say which
            if isinstance(self._graph, bytes):
                raise EmbeddingError(f"ONNX Runtime rejects the graph built for {self._model_dir}: {exc}") from exc
            raise EmbeddingError(f"cannot load exported model {self._graph}: {exc}; delete it to re-export") from exc

    def start(self, batches: list[list[str]]) -> Iterator[np.ndarray]:
        """Vectors of each batch (texts sorted by length), in order. A bulk call keeps the worker pool
        fed `_AHEAD` texts beyond the batch being read, across batch boundaries: no worker waits for
        the caller between batches, and a caller's work between reads runs while the model does."""
        texts = sum(map(len, batches))
        if self._workers == 1 or texts <= 1:  # (none: nothing to run)
            return (np.concatenate([self._run(g) for g in _groups(batch)]) for batch in batches)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="clawrecall-onnx")
        if texts <= SMALL_BATCH:  # a search's queries (the whole one and its vector leg's): one run each, side by side
            vectors = self._side_by_side([t for batch in batches for t in batch])
            return iter(np.split(vectors, np.cumsum([len(batch) for batch in batches])[:-1]))
        return _Queued(self, batches)

    def _side_by_side(self, texts: list[str]) -> np.ndarray:
        """Each text in a run of its own, the first on this thread and the others on the pool at once: two
        queries take what one does on two cores (all-MiniLM-L6-v2: 7.7 ms; 14 ms as one run of both)."""
        feeds = [self._feed([t]) for t in texts]
        assert self._pool is not None
        others = [self._pool.submit(self._infer, feed) for feed in feeds[1:]]
        hidden = [self._infer(feeds[0]), *(f.result() for f in others)]
        return np.concatenate([self._pooled(h, feed) for h, feed in zip(hidden, feeds)])

    def token_counts(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._tokenizer.encode_batch(texts)]

    @property
    def dimensions(self) -> int:
        return int(self._session.get_outputs()[0].shape[2])

    def _run(self, texts: list[str]) -> np.ndarray:
        feed = self._feed(texts)
        return self._pooled(self._infer(feed), feed)

    def _feed(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The model's inputs for one group: token ids, attention mask and token types, padded."""
        encodings: list[Any] = self._tokenizer.encode_batch(texts)  # WordPiece's or tokenizers' Encoding
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
            types[row, :n] = enc.type_ids
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}

    def _infer(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """The transformer's last hidden states: all a worker thread runs (ONNX Runtime releases the GIL)."""
        return self._session.run(None, {name: feed[name] for name in self._inputs})[0]

    def _pooled(self, hidden: np.ndarray, feed: dict[str, np.ndarray]) -> np.ndarray:
        if self.pooling == "cls":
            return hidden[:, 0, :]
        weights = feed["attention_mask"][:, :, None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)


class _Queued:
    """Batches on the worker pool, submitted `_AHEAD` texts ahead of the reader; `close()` cancels the
    ones not started (a bounded queue also lets another caller's batch in within ~`_AHEAD` texts).

    The reading thread tokenises and pools; a worker only runs the model. A worker that needed the
    GIL between its steps waited up to the interpreter's 5 ms switch interval each time the caller
    was busy in Python, so work the caller did between reads slowed the model instead of overlapping it."""

    def __init__(self, encoder: OnnxEncoder, batches: list[list[str]]) -> None:
        self._encoder = encoder
        self._batches = batches
        self._queued: deque[list[tuple[dict[str, np.ndarray], Future]]] = deque()
        self._submitted = 0
        self._top_up()

    def _top_up(self) -> None:
        ahead = sum(len(b) for b in self._batches[self._submitted - len(self._queued) : self._submitted])
        pool, encoder = self._encoder._pool, self._encoder
        assert pool is not None
        while self._submitted < len(self._batches) and ahead < _AHEAD:
            batch = self._batches[self._submitted]
            feeds = [encoder._feed(group) for group in _groups(batch)]
            self._queued.append([(feed, pool.submit(encoder._infer, feed)) for feed in feeds])
            self._submitted += 1
            ahead += len(batch)

    def __iter__(self) -> _Queued:
        return self

    def __next__(self) -> np.ndarray:
        if not self._queued:
            raise StopIteration
        runs = self._queued.popleft()
        self._top_up()
        return np.concatenate([self._encoder._pooled(future.result(), feed) for feed, future in runs])

    def close(self) -> None:
        self._submitted = len(self._batches)
        while self._queued:
            for _, future in self._queued.popleft():
                future.cancel()


def _groups(texts: list[str]) -> list[list[str]]:
    return [texts[s : s + _SUB_BATCH] for s in range(0, len(texts), _SUB_BATCH)]


def _usable_cpus() -> int:
    """CPUs this process may run on (a container or `taskset` may allow fewer than the machine has)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _max_seq_length(model_dir: Path) -> int:
    try:
        return int(json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError):
        return 512


def load(model_dir: Path, *, known_digest: str | None = None) -> OnnxEncoder | None:
    """The ONNX encoder for `model_dir` (a BERT graph built now, else exported once with PyTorch),
    or None if it does not qualify."""
    pooling = plain_encoder(model_dir)
    if pooling is None:
        return None
    config = _bert.config_of(model_dir)
    if config is not None:
        return OnnxEncoder(model_dir, _bert.build(model_dir, config), pooling)
    digest = weights_digest(model_dir, known_digest)
    target = cache_dir() / f"{model_dir.name}-{digest[:16]}-v{_EXPORT_VERSION}.onnx"
    if not target.exists():
        # once per model, and silent work of 10-20 s otherwise: say what is happening and where it goes
        log.warning("exporting model %s to ONNX once with PyTorch (10-20 s); it will be kept in %s", model_dir, target)
        started = time.monotonic()
        export(model_dir, target)
        log.warning("exported model %s to ONNX in %.1f s", model_dir.name, time.monotonic() - started)
    return OnnxEncoder(model_dir, target, pooling)
