"""Voyage AI: OpenAI-shaped replies, but queries and documents are embedded differently
(`input_type`), which is why `kind` is passed through rather than dropped."""

from __future__ import annotations

from ._http import HTTPEmbedder
from .base import Kind


class VoyageEmbedder(HTTPEmbedder):
    provider = "voyage"
    default_model = "voyage-3"
    default_base_url = "https://api.voyageai.com/v1"
    api_key_env = "VOYAGE_API_KEY"
    api_key_required = True

    def _embed_batch(self, texts: list[str], kind: Kind) -> list[list[float]]:
        payload = {"input": texts, "model": self.model, "input_type": "query" if kind == "query" else "document"}
        headers = {"Authorization": f"Bearer {self.api_key}"}
        return self._openai_data(self._post("/embeddings", payload, headers=headers), len(texts))
