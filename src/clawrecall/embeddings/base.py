"""The one embedding interface. Providers only turn a batch of texts into raw vectors;
batching, the query cache, normalisation and the dimension check live here, once."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Literal, Sequence

import numpy as np

from ..config import EmbeddingConfig
from ..errors import EmbeddingError
from ..models import EmbeddingFingerprint

Kind = Literal["query", "passage"]

# Seed 000's vectorDimsForModel, extended with the other providers' defaults. Used to know a
# model's dimensions without loading it (so `stats` and the open-time check stay fast).
KNOWN_DIMENSIONS: dict[str, int] = {
    "all-minilm-l6-v2": 384,
    "all-minilm": 384,
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "embedding-3": 1024,
    "e5-large-v2": 1024,
    "multilingual-e5-large": 1024,
    "multilingual-e5-base": 768,
    "multilingual-e5-small": 384,
    "e5-small-v2": 384,
    "e5-base-v2": 768,
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "bge-m3": 1024,
    "voyage-3": 1024,
    "voyage-3-lite": 512,
    "voyage-3-large": 1024,
    "text-embedding-004": 768,
    "gemini-embedding-001": 3072,
}


def known_dimensions(model: str | None) -> int | None:
    if not model:
        return None
    name = model.rstrip("/").rsplit("/", 1)[-1].lower()
    name = name.split(":", 1)[0]  # ollama tags: nomic-embed-text:latest
    return KNOWN_DIMENSIONS.get(name)


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    provider: str = ""
    # A model run here pads each batch to its longest text, so texts of similar length are batched together.
    pads_batches: bool = False

    def __init__(self, model: str, *, dimensions: int | None = None, batch_size: int = 64, query_cache_size: int = 1024):
        self.model = model
        self._dimensions = dimensions or known_dimensions(model)
        self.batch_size = batch_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = query_cache_size
        self._lock = threading.Lock()

    default_model: str = ""

    @classmethod
    def default_model_for(cls, cfg: EmbeddingConfig) -> str:
        """The model this provider uses for `cfg` (the configured one, else its default)."""
        return cfg.model or cls.default_model

    @classmethod
    def from_config(cls, cfg: EmbeddingConfig) -> "Embedder":
        """Providers with settings beyond the common ones override this."""
        return cls(
            cls.default_model_for(cfg),
            dimensions=cfg.dimensions,
            batch_size=cfg.batch_size,
            query_cache_size=cfg.query_cache_size,
        )

    @property
    def dimensions(self) -> int | None:
        """Known without a call when configured or in the table; otherwise set by the first call."""
        return self._dimensions

    @property
    def fingerprint(self) -> EmbeddingFingerprint:
        return EmbeddingFingerprint(provider=self.provider, model=self.model, dimensions=self.ensure_dimensions())

    def ensure_dimensions(self) -> int:
        if self._dimensions is None:
            self.embed(["dimension probe"], kind="passage")
        assert self._dimensions is not None
        return self._dimensions

    def _lengths(self, texts: list[str]) -> list[int]:
        """Sort keys that group texts of similar padded length (providers that pad batches)."""
        return [len(t) for t in texts]

    @abstractmethod
    def _embed_batch(self, texts: list[str], kind: Kind) -> Sequence[Sequence[float]] | np.ndarray:
        """Embed one batch (at most `batch_size` texts); return one vector per text, in order."""

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        """Embed texts; `query` embeddings are cached (agents repeat their questions)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        if kind == "query" and self._cache_size:
            return self._embed_queries(texts)
        return self._embed_uncached(texts, kind)

    def embed_one(self, text: str, kind: Kind = "query") -> np.ndarray:
        return self.embed([text], kind)[0]

    def _embed_queries(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            cached = {t: self._cache[t] for t in texts if t in self._cache}
            for t in cached:
                self._cache.move_to_end(t)
        missing = list(dict.fromkeys(t for t in texts if t not in cached))
        if missing:
            fresh = self._embed_uncached(missing, "query")
            with self._lock:
                for t, v in zip(missing, fresh):
                    cached[t] = v
                    self._cache[t] = v
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return np.stack([cached[t] for t in texts])

    def _embed_uncached(self, texts: list[str], kind: Kind) -> np.ndarray:
        if self.pads_batches and len(texts) > 1:
            lengths = self._lengths(texts)
            order = sorted(range(len(texts)), key=lengths.__getitem__)
        else:
            order = list(range(len(texts)))
        parts = []
        for start in range(0, len(texts), self.batch_size):
            batch = [texts[i] for i in order[start : start + self.batch_size]]
            try:
                raw = self._embed_batch(batch, kind)
            except EmbeddingError:
                raise
            except Exception as exc:  # provider libraries raise anything; callers get one class
                raise EmbeddingError(f"{self.provider} embedding failed: {exc}") from exc
            arr = np.asarray(raw, dtype=np.float32)
            if arr.ndim != 2 or arr.shape[0] != len(batch):
                raise EmbeddingError(
                    f"{self.provider} embedding failed: expected {len(batch)} vectors, got shape {arr.shape}"
                )
            parts.append(arr)
        joined = np.concatenate(parts)
        out = np.empty_like(joined)
        out[order] = joined
        dims = out.shape[1]
        if self._dimensions is None:
            self._dimensions = dims
        elif dims != self._dimensions:
            raise EmbeddingError(
                f"{self.provider}/{self.model} returned {dims}-dimensional vectors, expected {self._dimensions}"
            )
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def e5_prefix(model: str, texts: list[str], kind: Kind) -> list[str]:
    """E5 models expect `query: ` / `passage: ` prefixes; other models get the text as it is."""
    if "e5" not in model.lower().rsplit("/", 1)[-1]:
        return texts
    prefix = "query: " if kind == "query" else "passage: "
    return [t if t.startswith(prefix) else prefix + t for t in texts]
