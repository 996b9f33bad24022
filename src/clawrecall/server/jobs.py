"""REST `/v1/jobs`: the job queue (`mem.jobs`): list, read, retry and cancel, in the caller's scopes."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from ..engine import Memory
from ..errors import AmbiguousIdError, JobStateError, NotFoundError, ScopeError, ValidationError
from ..models import Job, JobStatus
from ..scopes import Caller
from .deps import caller, memory
from .openapi import errors

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
READ = errors(ValidationError, ScopeError)
ONE = errors(ValidationError, ScopeError, NotFoundError, AmbiguousIdError)
CHANGE = errors(ValidationError, ScopeError, NotFoundError, AmbiguousIdError, JobStateError)


class Jobs(BaseModel):
    jobs: list[Job]


@router.get("", responses=READ)
def list_jobs(
    status: JobStatus | None = None, kind: str | None = None, limit: int = Query(50, ge=1, le=10_000),
    offset: int = Query(0, ge=0), mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Jobs:
    """The jobs in the scopes the caller reads, the newest first."""
    return Jobs(jobs=mem.jobs.list(caller=ctx, status=status, kind=kind, limit=limit, offset=offset))


@router.get("/{job_id}", responses=ONE)
def get_job(job_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Job:
    """One job, by id or its first 8+ characters."""
    return mem.jobs.get(job_id, caller=ctx)


@router.post("/{job_id}/retry", responses=CHANGE)
def retry_job(job_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Job:
    """Queue a dead or cancelled job again, due now, its attempts back to 0 (`job_state` for any other)."""
    return mem.jobs.retry(job_id, caller=ctx)


@router.post("/{job_id}/cancel", responses=CHANGE)
def cancel_job(job_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Job:
    """Cancel a queued job (`job_state` for a running one: its worker holds it)."""
    return mem.jobs.cancel(job_id, caller=ctx)
