"""Ollama: local models behind `POST /api/embed`, no API key; the usual self-hosted choice."""

from __future__ import annotations

from ._http import HTTPEmbedder
from .base import Kind, e5_prefix


class OllamaEmbedder(HTTPEmbedder):
    provider = "ollama"
    default_model = "nomic-embed-text"
    default_base_url = "http://127.0.0.1:11434"

    def _embed_batch(self, texts: list[str], kind: Kind) -> list[list[float]]:
        # Ollama can serve e5 models too; they need their prefixes whoever hosts them.
        payload = {"model": self.model, "input": e5_prefix(self.model, texts, kind)}
        body = self._post("/api/embed", payload)
        return self._vectors(self._field(body, "embeddings"), len(texts))
