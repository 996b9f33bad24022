"""The `hash` provider the other tests embed with: deterministic in every process, unit vectors of a
fixed dimension, and similar in proportion to the words two texts share. Never the default."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from clawrecall.config import EmbeddingConfig, load_config
from clawrecall.embeddings import create_embedder

TEXTS = [
    "Remember that my locker code is 4711",
    "remember that my LOCKER code is 4711!",
    "Alice prefers dark mode in every editor",
    "which editor theme does alice prefer?",
    "The team deploys the API to a Kubernetes cluster in Frankfurt",
    "用户喜欢深色主题",
    "",
]


def embed(texts, **cfg) -> np.ndarray:
    return create_embedder(EmbeddingConfig(provider="hash", **cfg)).embed(texts)


def test_unit_vectors_of_384_dimensions_unless_configured():
    vectors = embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embed(["one text"], dimensions=64).shape == (1, 64)
    fingerprint = create_embedder(EmbeddingConfig(provider="hash")).fingerprint
    assert str(fingerprint) == "hash/hashed-word-trigrams (384 dims)"


def test_shared_words_make_texts_similar_and_case_or_punctuation_do_not_matter():
    sims = embed(TEXTS) @ embed(TEXTS).T
    assert sims[0, 1] > 0.99  # the same words: a duplicate at the default 0.95
    assert sims[2, 3] > 0.15  # "alice", "editor" and the spelling of "prefer…" shared
    assert abs(sims[0, 4]) < 0.15 and abs(sims[2, 4]) < 0.15  # nothing shared
    near = embed(["memory number 1 about cats", "memory number 2 about cats"])
    assert 0.7 < float(near[0] @ near[1]) < 0.95  # close, but not a duplicate


def test_the_same_vector_in_another_process():
    code = (
        "import json; from clawrecall.config import EmbeddingConfig; from clawrecall.embeddings import create_embedder; "
        f"print(json.dumps(create_embedder(EmbeddingConfig(provider='hash')).embed({TEXTS!r}).tolist()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert np.allclose(np.asarray(json.loads(out.stdout), dtype=np.float32), embed(TEXTS))


def test_never_the_default(tmp_path):
    assert EmbeddingConfig().provider == "local"
    assert load_config(env={"CLAWRECALL_HOME": str(tmp_path)}).embedding.provider == "local"
