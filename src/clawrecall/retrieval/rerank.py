"""Optional cross-encoder rerank: a local sentence-transformers CrossEncoder or an HTTP API.

A reranker that fails or is slow never fails the search: `score` returns None and the
pipeline keeps the fused order (seed 002's graceful fallback).
"""

from __future__ import annotations

import logging
import math
from typing import Any, Protocol

from ..config import RerankConfig

log = logging.getLogger("clawrecall.rerank")


class Reranker(Protocol):
    def score(self, query: str, documents: list[str]) -> list[float] | None: ...


class LocalCrossEncoder:
    def __init__(self, model: str):
        self.model_name = model
        self._model: Any = None  # a CrossEncoder, loaded at the first search (PyTorch is an extra)

    def score(self, query: str, documents: list[str]) -> list[float] | None:
        try:
            if self._model is None:
                try:
                    from sentence_transformers import CrossEncoder
                except ImportError:
                    log.warning("local rerank needs PyTorch (pip install 'clawrecall[torch]'), keeping fused order")
                    return None

                self._model = CrossEncoder(self.model_name, device="cpu")
            raw = self._model.predict([(query, d) for d in documents], show_progress_bar=False)
        except Exception as exc:  # a broken model must not break search
            log.warning("local rerank failed, keeping fused order: %s", exc)
            return None
        return [_sigmoid(float(x)) for x in raw]


class HttpReranker:
    """Jina/Cohere/TEI-style `POST {url}` with `{model, query, documents, top_n}` → `results[{index, relevance_score}]`."""

    def __init__(self, url: str, *, model: str | None, api_key: str | None, timeout_s: float):
        self.url, self.model, self.api_key, self.timeout_s = url, model, api_key, timeout_s

    def score(self, query: str, documents: list[str]) -> list[float] | None:
        import httpx

        body = {"query": query, "documents": documents, "top_n": len(documents)}
        if self.model:
            body["model"] = self.model
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = httpx.post(self.url, json=body, headers=headers, timeout=self.timeout_s)
            response.raise_for_status()
            results = response.json()["results"]
            scores = [0.0] * len(documents)
            for item in results:
                value = float(item.get("relevance_score", item.get("score", 0.0)))
                scores[int(item["index"])] = value if 0.0 <= value <= 1.0 else _sigmoid(value)
            return scores
        except Exception as exc:
            log.warning("rerank API %s failed, keeping fused order: %s", self.url, exc)
            return None


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def create_reranker(cfg: RerankConfig) -> Reranker | None:
    if cfg.provider == "local" and cfg.model:
        return LocalCrossEncoder(cfg.model)
    if cfg.provider == "http" and cfg.url:
        return HttpReranker(cfg.url, model=cfg.model, api_key=cfg.api_key, timeout_s=cfg.timeout_s)
    return None
