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

    _served: str | None = None  # the model the server named in /health, once checked

    def _embed_batch(self, texts: list[str], kind: Kind) -> list[list[float]]:
        if self._served is None:
            self._check_server_model()
        # seed 000's server takes no key; `clawrecall serve` with tokens configured needs one
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        body = self._post("/batch", {"texts": texts, "type": kind}, headers=headers)
        return self._vectors(self._field(body, "embeddings"), len(texts))

    def _check_server_model(self) -> None:
        """The server, not the request, picks the model: a store must not take its vectors under
        another model's name, so the model it names in /health must be `embedding.model`."""
        served = str(self.health().get("model") or "")
        if served and _name(served) != _name(self.model):
            raise self._fail(f"the server at {self.base_url} embeds with {served}, not {self.model}: set embedding.model = {served!r}")
        self._served = served

    def health(self) -> dict[str, Any]:
        """The server's `GET /health` answer: `{"status", "model", "dimension"}`."""
        body = self._request("GET", "/health")
        if not isinstance(body, dict):
            raise self._fail("unexpected /health response: not a JSON object")
        return body


def _name(model: str) -> str:
    """"intfloat/multilingual-e5-large" and "multilingual-e5-large" name one model."""
    return model.rstrip("/").rsplit("/", 1)[-1].lower()
