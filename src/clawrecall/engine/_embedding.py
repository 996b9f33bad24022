"""The configured embedding provider, and the fingerprint that ties a store to the model that made its vectors.

The provider is built on first use, so commands that never embed stay light. The first vectors
made for a store record its fingerprint; every later model must match it (or `reembed` moves the
store to a new one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..config import Config
from ..errors import EmbeddingMismatchError, ValidationError
from ..models import EmbeddingFingerprint
from ..storage import Store

if TYPE_CHECKING:
    import numpy as np  # imported where vectors are made: `clawrecall stats` never needs it

    from ..embeddings.base import Embedder, EmbeddingStream

Progress = Callable[[int, int], None]
_FINGERPRINT_KEY = "embedding_fingerprint"


class Embedding:
    """Vectors for passages and queries from the configured model, checked against the store's fingerprint."""

    def __init__(self, store: Store, config: Config):
        self.store = store
        self.config = config
        self._embedder: Embedder | None = None
        self._fingerprint_ok = False  # set once the provider's vectors are known to match the store
        self._checked: str | None = None  # the store's fingerprint as it was then (JSON)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from ..embeddings import create_embedder

            self._embedder = create_embedder(self.config.embedding)
        return self._embedder

    @property
    def model_name(self) -> str:
        """What a record embedded by the configured embedder names as its `embedding_model`."""
        return f"{self.embedder.provider}/{self.embedder.model}"

    # -- fingerprint ---------------------------------------------------------------------------
    def configured_fingerprint(self) -> tuple[str, str, int | None]:
        from ..embeddings import configured_model, known_dimensions

        cfg = self.config.embedding
        model = configured_model(cfg)
        return cfg.provider, model, cfg.dimensions or known_dimensions(model)

    def stored_fingerprint(self) -> EmbeddingFingerprint | None:
        raw = self.store.get_meta(_FINGERPRINT_KEY)
        return None if raw is None else EmbeddingFingerprint.model_validate_json(raw)

    def check_fingerprint(self, *, static_only: bool) -> None:
        """Raise EmbeddingMismatchError when the configured model is not the one that made the stored
        vectors; `static_only` compares what the config names, without loading or calling the model."""
        stored = self.stored_fingerprint()
        if stored is None:
            return
        provider, model, dims = self.configured_fingerprint()
        if not static_only:
            dims = self.embedder.ensure_dimensions()
        if (stored.provider, stored.model) != (provider, model) or (dims is not None and dims != stored.dimensions):
            shown = f"{provider}/{model}" + (f" ({dims} dims)" if dims else "")
            raise EmbeddingMismatchError(
                f"{self.store.location} holds vectors from {stored}, but the configured embedding model is "
                f"{shown}; configure {stored.provider}/{stored.model} again, or run `clawrecall reembed` "
                "to re-embed every memory with the new model"
            )

    def remember_fingerprint(self) -> None:
        """Record which model made the vectors the first time any are made; check it afterwards."""
        if self._fingerprint_ok:
            return
        if self.stored_fingerprint() is None:
            self.store.set_meta(_FINGERPRINT_KEY, self.embedder.fingerprint.model_dump_json())
        else:
            self.check_fingerprint(static_only=False)
        self._checked = self.store.get_meta(_FINGERPRINT_KEY)
        self._fingerprint_ok = True

    def confirm_unchanged(self) -> None:
        """In a write transaction, after its rows took their vectors: the store's model is still the
        one this process checked. A `reembed` in another process may have moved the store to another
        since; the write is then refused (rolled back) rather than mixing models. After the rows'
        write, so on PostgreSQL a swap either waits for this transaction or committed before this read."""
        if self._checked is None:
            return
        stored = self.store.get_meta(_FINGERPRINT_KEY)
        if stored != self._checked:
            self._fingerprint_ok, self._checked = False, None
            now = "none" if stored is None else str(EmbeddingFingerprint.model_validate_json(stored))
            raise EmbeddingMismatchError(
                f"{self.store.location} was re-embedded with {now} while this process embedded with "
                f"{self.model_name}: nothing was written; configure {now} and try again"
            )

    def adopt(self) -> None:
        """Make the configured model the store's, once every vector is its own (after a re-embedding)."""
        self._checked = self.embedder.fingerprint.model_dump_json()
        self.store.set_meta(_FINGERPRINT_KEY, self._checked)
        self._fingerprint_ok = True

    # -- vectors -------------------------------------------------------------------------------
    def passages(self, texts: list[str]) -> np.ndarray:
        vectors = self.embedder.embed(texts, kind="passage")
        self.remember_fingerprint()
        return vectors

    def queries(self, texts: list[str]) -> np.ndarray:
        vectors = self.embedder.embed(texts, kind="query")
        self.remember_fingerprint()
        return vectors

    def start(self, texts: list[str]) -> EmbeddingStream:
        """Start embedding these texts (each distinct one once) while the caller goes on; `collect` waits.
        The texts are validated records' (a secret's is its mask: its own text never reaches a provider)."""
        return self.embedder.stream(list(dict.fromkeys(texts)), "passage")

    def collect(self, stream: EmbeddingStream, texts: list[str], progress: Progress | None) -> np.ndarray:
        """One vector per text, from the stream `start` began on the distinct texts."""
        vectors = stream.collect(progress)
        self.remember_fingerprint()
        row = {text: i for i, text in enumerate(stream.texts)}
        return vectors[[row[t] for t in texts]]

    def given(self, embeddings: np.ndarray, n: int) -> np.ndarray:
        """Vectors a caller made with the configured model (one per item), checked and normalised."""
        import numpy as np

        try:
            vectors = np.asarray(embeddings, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"embeddings must be numbers: {exc}") from None
        dims = self.embedder.ensure_dimensions()
        if vectors.shape != (n, dims):
            raise ValidationError(f"embeddings must have shape ({n}, {dims}), got {vectors.shape}")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(np.isfinite(vectors)) or np.any(norms == 0):
            raise ValidationError("embeddings must be finite, non-zero vectors")
        self.remember_fingerprint()
        return vectors / norms
