"""Z.AI (Zhipu) `embedding-3`: OpenAI's wire format at Z.AI's address, with a key from `ZAI_API_KEY`.

embedding-3 answers 2048-d vectors unless the request names a size (256, 512, 1024 or 2048), so
every request names one: `embedding.dimensions`, else 1024, the size openclaw-memory-pgvector
documents for it (its own client asked for none and got 2048 into a 1024 column).
"""

from __future__ import annotations

from typing import Any

from ._http import HTTPEmbedder
from .base import Kind

DEFAULT_DIMENSIONS = 1024


class ZAIEmbedder(HTTPEmbedder):
    provider = "zai"
    label = "Z.AI"
    default_model = "embedding-3"
    # Z.AI's general API; subscribers of its GLM Coding Plan have https://api.z.ai/api/coding/paas/v4
    default_base_url = "https://api.z.ai/api/paas/v4"
    api_key_env = "ZAI_API_KEY"
    api_key_required = True

    def _embed_batch(self, texts: list[str], kind: Kind) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self.model == "embedding-3":  # embedding-2 has one size and takes no field
            payload["dimensions"] = self.requested_dimensions or DEFAULT_DIMENSIONS
        headers = {"Authorization": f"Bearer {self.api_key}"}
        return self._openai_data(self._post("/embeddings", payload, headers=headers), len(texts))
