"""Google Gemini embeddings through `batchEmbedContents`, with the retrieval task types.

The key goes in the `x-goog-api-key` header rather than `?key=`: URLs end up in logs (httpx
logs every request URL at INFO), headers do not.
"""

from __future__ import annotations

from typing import Any

from ._http import HTTPEmbedder
from .base import Kind


class GeminiEmbedder(HTTPEmbedder):
    provider = "gemini"
    default_model = "text-embedding-004"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    api_key_env = "GEMINI_API_KEY"
    api_key_required = True

    def _embed_batch(self, texts: list[str], kind: Kind) -> list[list[float]]:
        name = self.model.removeprefix("models/")
        task = "RETRIEVAL_QUERY" if kind == "query" else "RETRIEVAL_DOCUMENT"
        requests: list[dict[str, Any]] = []
        for text in texts:
            request: dict[str, Any] = {"model": f"models/{name}", "content": {"parts": [{"text": text}]}, "taskType": task}
            if self.requested_dimensions:
                request["outputDimensionality"] = self.requested_dimensions
            requests.append(request)
        body = self._post(
            f"/models/{name}:batchEmbedContents",
            {"requests": requests},
            headers={"x-goog-api-key": self.api_key or ""},
        )
        embeddings = self._field(body, "embeddings")
        if not isinstance(embeddings, list) or not all(isinstance(e, dict) and "values" in e for e in embeddings):
            raise self._fail("unexpected response: 'embeddings' is not a list of {values}")
        return self._vectors([e["values"] for e in embeddings], len(texts))
