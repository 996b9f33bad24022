"""The one embedding interface. Providers only turn a batch of texts into raw vectors;
batching, the query cache, normalisation and the dimension check live here, once."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from time import perf_counter
from typing import Any, Callable, Iterator, Literal, Sequence

import numpy as np

from ..config import EmbeddingConfig
from ..errors import EmbeddingError
from ..models import EmbeddingFingerprint

Kind = Literal["query", "passage"]

# openclaw-memory-pgvector's vectorDimsForModel, extended with the other providers' defaults. Used to know a
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


# each local model's `measure_unrelated`, known so that no search or add pays to measure it;
# the similarity thresholds were set with all-MiniLM-L6-v2 (`Embedder.cosine_for`)
KNOWN_UNRELATED = {"all-MiniLM-L6-v2": 0.0599, "multilingual-e5-small": 0.7215}
REFERENCE_UNRELATED = KNOWN_UNRELATED["all-MiniLM-L6-v2"]

# questions and passages on six topics, no question about any passage's (`Embedder.measure_unrelated`)
_UNRELATED_QUESTIONS = [
    "How do I reset my router?", "What is the capital of Peru?", "Which wine goes with fish?",
    "When was the printing press invented?", "How many legs does a spider have?", "Who won the chess final?",
]
_UNRELATED_PASSAGES = [
    "The museum opens at nine on Sundays.", "My sister adopted a grey kitten last week.",
    "Deploys to production happen on Tuesdays.", "The recipe needs two cups of flour and an egg.",
    "He ran the marathon in under four hours.", "Our invoices are due within thirty days.",
]


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
        self._query_ms = 0.0  # what embedding queries not cached took lately (a moving average; 0 before one)

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

    def unrelated_cosine(self) -> float | None:
        """The cosine this model gives a question and a text that have nothing to do with each other:
        where its similarity starts to mean something. None when not known: a remote provider would
        bill a call to measure it (`measure_unrelated`)."""
        return None

    def known_share(self, text: str) -> float | None:
        """The share of `text`'s words (of two letters or more) that this model has whole in its
        vocabulary: how far it reads the text as a language it was trained on. all-MiniLM-L6-v2 knows
        English words and cuts Czech ones into pieces, and then calls any two Czech sentences alike.
        None when not known (a remote provider, a model whose vocabulary is not read here), or the
        text has no such word."""
        return None

    def cosine_for(self, cosine: float) -> float:
        """This model's cosine for a cosine of all-MiniLM-L6-v2, with which the similarity thresholds
        were set (`dedup.threshold`; the vector leg's "no match", 0): as far from its unrelated cosine
        towards 1. multilingual-e5-small calls "green tea" and "black tea" 0.96 similar, MiniLM 0.86.
        For MiniLM, and a provider whose unrelated cosine is not known, the cosine as it is."""
        unrelated = self.unrelated_cosine()
        if unrelated is None:
            return cosine
        return unrelated + (cosine - REFERENCE_UNRELATED) * (1 - unrelated) / (1 - REFERENCE_UNRELATED)

    def measure_unrelated(self) -> float:
        """The mean cosine of six questions and six passages on other topics (all-MiniLM-L6-v2 0.0599,
        multilingual-e5-small 0.7215)."""
        questions = self.stream(_UNRELATED_QUESTIONS, "query").collect()
        passages = self.stream(_UNRELATED_PASSAGES, "passage").collect()
        return float(np.mean(questions @ passages.T))

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
        if kind == "query":
            return self._embed_queries(texts)
        return self.stream(texts, kind).collect()

    def query_ms(self, texts: Sequence[str]) -> float:
        """About how long embedding these queries would take now: 0 when each is cached, else what queries
        took lately (0 before the first). A search runs other work beside an embedding worth waiting for."""
        with self._lock:
            return 0.0 if all(t in self._cache for t in texts) else self._query_ms

    def embed_one(self, text: str, kind: Kind = "query") -> np.ndarray:
        return self.embed([text], kind)[0]

    def _embed_queries(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            cached = {t: self._cache[t] for t in texts if t in self._cache}
            for t in cached:
                self._cache.move_to_end(t)
        missing = list(dict.fromkeys(t for t in texts if t not in cached))
        if missing:
            start = perf_counter()
            fresh = self.stream(missing, "query").collect()
            took = (perf_counter() - start) * 1000
            with self._lock:
                self._query_ms = took if not self._query_ms else 0.8 * self._query_ms + 0.2 * took
                for t, v in zip(missing, fresh):
                    cached[t] = v
                    if self._cache_size:
                        self._cache[t] = v
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return np.stack([cached[t] for t in texts])

    def stream(self, texts: Sequence[str], kind: Kind = "passage") -> EmbeddingStream:
        """Embed `texts` batch by batch; the stream yields (positions in `texts`, unit vectors) per batch.

        A model run here starts on the first batches at once, so the caller's own work overlaps the
        embedding; a remote provider is called only as the stream is read (nothing is spent on a
        batch the caller rejects first). Close a stream that is not read to the end."""
        texts = list(texts)
        if self.pads_batches and len(texts) > 1:
            lengths = self._lengths(texts)
            order = sorted(range(len(texts)), key=lengths.__getitem__)
        else:
            order = list(range(len(texts)))
        positions = [order[start : start + self.batch_size] for start in range(0, len(texts), self.batch_size)]
        raw = self._start_batches([[texts[i] for i in batch] for batch in positions], kind)
        return EmbeddingStream(self, texts, positions, raw)

    def _start_batches(self, batches: list[list[str]], kind: Kind) -> Iterator[Any]:
        """One raw result per batch, in order. A model run here overrides this to queue batches ahead."""
        return (self._embed_batch(batch, kind) for batch in batches)

    def _checked(self, raw: Any, expected: int) -> np.ndarray:
        """A provider's raw batch as unit float32 vectors, after checking their count and dimensions."""
        arr = np.asarray(raw, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != expected:
            raise EmbeddingError(f"{self.provider} embedding failed: expected {expected} vectors, got shape {arr.shape}")
        dims = arr.shape[1]
        if self._dimensions is None:
            self._dimensions = dims
        elif dims != self._dimensions:
            raise EmbeddingError(
                f"{self.provider}/{self.model} returned {dims}-dimensional vectors, expected {self._dimensions}"
            )
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        if not np.all(np.isfinite(arr)) or np.any(norms == 0):
            # stored, such a vector would match nothing (or everything) and break every later search
            raise EmbeddingError(f"{self.provider}/{self.model} returned vectors that are not finite or are all zero")
        return arr / norms


class EmbeddingStream:
    """The vectors of one `Embedder.stream` call, a batch at a time (texts of similar length together).

    Provider errors of any kind surface as `EmbeddingError`; after one, or on `close()`, batches
    not yet started are dropped."""

    def __init__(self, embedder: Embedder, texts: list[str], positions: list[list[int]], raw: Iterator[Any]) -> None:
        self.texts = texts
        self.done = 0  # texts embedded so far
        self._embedder = embedder
        self._positions = positions
        self._raw = raw
        self._next = 0

    def __iter__(self) -> EmbeddingStream:
        return self

    def __next__(self) -> tuple[list[int], np.ndarray]:
        if self._next == len(self._positions):
            raise StopIteration
        positions = self._positions[self._next]
        try:
            vectors = self._embedder._checked(next(self._raw), len(positions))
        except EmbeddingError:
            self.close()
            raise
        except Exception as exc:  # provider libraries raise anything; callers get one class
            self.close()
            raise EmbeddingError(f"{self._embedder.provider} embedding failed: {exc}") from exc
        self._next += 1
        self.done += len(positions)
        return positions, vectors

    def collect(self, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Every vector, in the order of the texts; `progress(done, total)` after each batch."""
        out: np.ndarray | None = None
        for positions, vectors in self:
            if progress:
                progress(self.done, len(self.texts))
            if out is None:
                out = np.empty((len(self.texts), vectors.shape[1]), dtype=np.float32)
            out[positions] = vectors
        return out if out is not None else np.zeros((0, self._embedder.dimensions or 0), dtype=np.float32)

    def close(self) -> None:
        close = getattr(self._raw, "close", None)
        if close is not None:
            close()


def e5_prefix(model: str, texts: list[str], kind: Kind) -> list[str]:
    """E5 models expect `query: ` / `passage: ` prefixes; other models get the text as it is."""
    if "e5" not in model.lower().rsplit("/", 1)[-1]:
        return texts
    prefix = "query: " if kind == "query" else "passage: "
    return [t if t.startswith(prefix) else prefix + t for t in texts]
