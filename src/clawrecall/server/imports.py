"""REST `/v1/import/markdown`: an agent runtime's Markdown memory files, imported into the calling agent's scope.

The OpenClaw plugin reads `MEMORY.md`, `USER.md` and `memory/*.md` of each agent's workspace
(the files live where OpenClaw runs, not where the server does) and posts them here, once per agent.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from ..engine import Memory
from ..errors import EmbeddingError, ScopeError, ValidationError, WritesDisabledError
from ..openclaw import MarkdownFile, import_markdown
from ..openclaw.markdown import MarkdownImported
from ..scopes import Caller
from .deps import caller, memory
from .openapi import errors

router = APIRouter(prefix="/v1/import", tags=["import"])


class MarkdownFileIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    path: str = Field(min_length=1, max_length=1000)
    content: str


class MarkdownImport(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    files: list[MarkdownFileIn]


@router.post(
    "/markdown", summary="Import Markdown memory files into the calling agent's scope (idempotent)",
    responses=errors(ValidationError, ScopeError, WritesDisabledError, EmbeddingError),
)
def import_markdown_files(
    body: MarkdownImport, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)
) -> MarkdownImported:
    """`{files, sections, created, duplicates, scope}`; importing the same files again creates nothing."""
    return import_markdown(mem, ctx, [MarkdownFile(f.path, f.content) for f in body.files])
