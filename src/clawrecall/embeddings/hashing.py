"""`hash`: a deterministic embedding for tests whose subject is not the model. Never a default, and
not for real memories: it knows spelling, not meaning.

A text's vector (384 dimensions unless `embedding.dimensions` says otherwise) sums hashed features,
its lower-cased words and their character trigrams, and is L2-normalised, so texts that share
words (or parts of words) have a positive cosine similarity and a text repeated is a duplicate. It
needs no model and no network, takes microseconds, and gives the same vector in every process.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

from .base import Embedder, Kind

DIMENSIONS = 384
_WORDS = re.compile(r"\w+")
_TRIGRAM_WEIGHT = 0.5  # a shared word counts more than a shared spelling


class HashEmbedder(Embedder):
    provider = "hash"
    default_model = "hashed-word-trigrams"

    def __init__(self, model: str, *, dimensions: int | None = None, **kwargs) -> None:
        super().__init__(model, dimensions=dimensions or DIMENSIONS, **kwargs)

    def _embed_batch(self, texts: list[str], kind: Kind) -> np.ndarray:
        dims = self.dimensions
        assert dims is not None
        out = np.zeros((len(texts), dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in _features(text):
                h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
                out[row, h % dims] += weight if (h // dims) & 1 else -weight
        return out


def _features(text: str) -> list[tuple[str, float]]:
    words = _WORDS.findall(text.lower()) or [text.strip() or "\0"]  # punctuation alone is still a text
    features = [(f"w:{word}", 1.0) for word in words]
    for word in words:
        padded = f"^{word}$"
        features += [(f"t:{padded[i:i + 3]}", _TRIGRAM_WEIGHT) for i in range(len(padded) - 2)]
    return features
