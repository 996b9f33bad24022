"""Seed 000's E5 embedding server API (`POST /embed`, `POST /batch`), serving whichever model is configured.

Same request and response shapes as `e5-server.py`, so the `e5` embedding provider of another
clawrecall (or the seed's plugin) can use this server; E5 models get their `query: `/`passage: `
prefixes here, as there. `GET /health` (in app.py) answers `status`, `model` and `dimension`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from ..engine import MAX_CONTENT_CHARS, Memory
from ..errors import EmbeddingError
from .deps import memory
from .openapi import errors

# One request's work is bounded: 256 texts (what the bundled model embeds in ~3 s at its 256-token
# limit on 2 cores) answer in seconds, where 2,048 long ones held a worker for ~28 s.
MAX_BATCH = 256
Text = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)]
Kind = Literal["query", "passage"]

router = APIRouter(tags=["embeddings"])


class Embedding(BaseModel):
    embedding: list[float]


class Embeddings(BaseModel):
    embeddings: list[list[float]]


class EmbedIn(BaseModel):
    text: Text
    type: Kind = "passage"


class BatchIn(BaseModel):
    texts: list[Text] = Field(min_length=1, max_length=MAX_BATCH)
    type: Kind = "passage"


@router.post("/embed", responses=errors(EmbeddingError))
def embed(body: EmbedIn, mem: Memory = Depends(memory)) -> Embedding:
    """One text's embedding (L2-normalised)."""
    return Embedding(embedding=mem.upkeep.embedder.embed_one(body.text, kind=body.type).tolist())


@router.post("/batch", responses=errors(EmbeddingError))
def embed_batch(body: BatchIn, mem: Memory = Depends(memory)) -> Embeddings:
    """Embeddings of several texts, in order."""
    return Embeddings(embeddings=mem.upkeep.embedder.embed(body.texts, kind=body.type).tolist())
