"""Client of the standalone E5 embedding server (seed 000's `e5-server.py`, multilingual-e5-large).

The server takes `type` (query/passage) and adds the E5 prefixes itself, so texts go unprefixed.
"""

from __future__ import annotations

from typing import Any

from ._http import HTTPEmbedder
from .base import Kind


class E5Embedder(HTTPEmbedder):
    provider = "e5"
    label = "E5"  # seed 000's message: "E5 embedding failed: Connection refused"
    default_model = "multilingual-e5-large"
    default_base_url = "http://127.0.0.1:8765"

    def _embed_batch(self, texts: list[str], kind: Kind) -> list[list[float]]:
        # seed 000's server takes no key; `clawrecall serve` with tokens configured needs one
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        body = self._post("/batch", {"texts": texts, "type": kind}, headers=headers)
        return self._vectors(self._field(body, "embeddings"), len(texts))

    def health(self) -> dict[str, Any]:
        """The server's `GET /health` answer: `{"status", "model", "dimension"}`."""
        body = self._request("GET", "/health")
        if not isinstance(body, dict):
            raise self._fail("unexpected /health response: not a JSON object")
        return body
