"""OpenAI embeddings, and the same wire format at any other address (vLLM, LM Studio, …).

Both speak `POST {base}/embeddings {"model", "input": [...]}` and answer `{"data": [{"index",
"embedding"}]}`; the compatible variant only changes which settings are required.
"""

from __future__ import annotations

from typing import Any

from ..config import EmbeddingConfig
from ..errors import ConfigError
from ._http import HTTPEmbedder
from .base import Kind, e5_prefix


class OpenAIEmbedder(HTTPEmbedder):
    provider = "openai"
    default_model = "text-embedding-3-small"
    default_base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"
    api_key_required = True

    def _embed_batch(self, texts: list[str], kind: Kind) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self.model, "input": e5_prefix(self.model, texts, kind)}
        # Only text-embedding-3 models can shorten their vectors; older ones reject the field.
        if self.requested_dimensions and "text-embedding-3" in self.model:
            payload["dimensions"] = self.requested_dimensions
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        return self._openai_data(self._post("/embeddings", payload, headers=headers), len(texts))


class OpenAICompatibleEmbedder(OpenAIEmbedder):
    """Any OpenAI-shaped endpoint: base_url and model are required, a key only if the server wants one."""

    provider = "openai-compatible"
    default_model = ""
    default_base_url = ""
    api_key_required = False

    @classmethod
    def default_model_for(cls, cfg: EmbeddingConfig) -> str:
        if not cfg.model:
            raise ConfigError("the openai-compatible embedding provider needs embedding.model")
        return cfg.model
