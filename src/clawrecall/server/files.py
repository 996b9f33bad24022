"""REST `/v1/files`: ingest a file the server can read, list and remove ingested files (`mem.files`).

The server reads the file with its own rights, so a client may name only paths under `files.roots`
(empty by default: the route refuses every path until an operator names the folders). The file
goes to the caller's own scope; search its chunks with `sources: ["chunk"]`. Files are read on a queue
of `files.workers` threads of their own: a request waiting for its turn holds no request thread, so
ingesting never takes the threads searches are answered on.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from ..engine import Memory
from ..errors import AmbiguousIdError, NotFoundError, ScopeError, ValidationError, WritesDisabledError
from ..models import FileRecord, Ingested
from ..scopes import Caller
from .deps import caller, memory
from .openapi import errors

FIND = errors(ValidationError, ScopeError, NotFoundError, AmbiguousIdError)

router = APIRouter(prefix="/v1/files", tags=["files"])


class FileIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    path: str = Field(min_length=1, max_length=4096, description="An absolute path under one of the server's files.roots.")
    message_id: str | None = Field(None, description="The conversation message the file came with.")


class FileList(BaseModel):
    files: list[FileRecord]


class FileRemoved(BaseModel):
    removed: str = Field(description="The file's id.")
    path: str
    chunks: int


@router.post("", summary="Ingest a file under the server's files.roots (again: replaced if changed, else nothing)",
             responses={**FIND, **errors(WritesDisabledError)})
async def ingest_file(body: FileIn, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Ingested:
    queue = mem.upkeep.runtime.queue("files", threads=mem.config.files.workers)
    future = queue.submit(mem.files.ingest, body.path, caller=ctx, message_id=body.message_id, within_roots=True)
    assert future is not None  # the queue has no bound: a waiting request is an await, not a thread
    return await asyncio.wrap_future(future)


@router.get("", summary="The ingested files the caller may read, by path", responses=errors(ValidationError, ScopeError))
def list_files(
    limit: int = Query(1000, ge=1, le=100_000), offset: int = Query(0, ge=0),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> FileList:
    return FileList(files=mem.files.list(caller=ctx, limit=limit, offset=offset))


@router.get("/{file_id}", summary="One ingested file", responses=FIND)
def get_file(file_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> FileRecord:
    return mem.files.get(file_id, caller=ctx, within_roots=True)


@router.delete("/{file_id}", summary="Remove an ingested file: its chunks and its record",
               responses={**FIND, **errors(WritesDisabledError)})
def remove_file(file_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> FileRemoved:
    file = mem.files.remove(file_id, caller=ctx, within_roots=True)
    return FileRemoved(removed=file.id, path=file.path, chunks=file.chunk_count)
