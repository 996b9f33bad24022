"""`clawrecall jobs list|show|retry|cancel` and `clawrecall worker`: the job queue (`mem.jobs`, docs/jobs.md)."""

from __future__ import annotations

import json
import signal
from typing import Any

import click

from .._time import age_string, utcnow
from ..errors import ConfigError
from ..models import JOB_STATUSES, Job, JobStatus
from ..scopes import Caller
from . import output as out
from .commands import (
    State, caller_options, group_json_option, handlers_option, json_option, load_handlers, pass_state, rows_format_options,
)


@click.group("jobs")
@group_json_option
def jobs_group() -> None:
    """Background jobs (extraction of facts from closed segments): their state, retries and failures."""


@jobs_group.command("list")
@click.option("--status", type=click.Choice(JOB_STATUSES), help="Only jobs in this state.")
@click.option("--kind", metavar="KIND", help="Only jobs of this kind (extract, summarize, …).")
@click.option("--limit", "-n", type=click.IntRange(1, 100_000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@caller_options
@rows_format_options
@pass_state
def list_jobs(state: State, status: JobStatus | None, kind: str | None, limit: int, offset: int, caller: Caller,
              fmt: out.Format) -> None:
    """The jobs in the scopes you read, the newest first."""
    found = state.open(embeds=False).jobs.list(caller=caller, status=status, kind=kind, limit=limit, offset=offset)
    rows = [[out.short_id(j.id), j.kind, j.status, f"{j.attempts}/{j.max_attempts}", j.scope, age_string(j.created_at),
             _when(j), j.last_error or ""] for j in found]
    headers = ["ID", "KIND", "STATUS", "TRIES", "SCOPE", "AGE", "NEXT", "LAST ERROR"]
    out.respond_rows(fmt, found, out.table(headers, rows) if rows else "No jobs.")


@jobs_group.command("show")
@click.argument("job_id", metavar="ID")
@caller_options
@json_option
@pass_state
def show(state: State, job_id: str, caller: Caller, as_json: bool) -> None:
    """One job, by id or its first 8+ characters."""
    job = state.open(embeds=False).jobs.get(job_id, caller=caller)
    out.respond(as_json, job, job_text(job))


@jobs_group.command("retry")
@click.argument("job_id", metavar="ID")
@caller_options
@json_option
@pass_state
def retry(state: State, job_id: str, caller: Caller, as_json: bool) -> None:
    """Queue a dead or cancelled job again, due now, its attempts back to 0."""
    job = state.open(embeds=False).jobs.retry(job_id, caller=caller)
    out.respond(as_json, job, f"Queued job {out.short_id(job.id)} ({job.kind}) again.")


@jobs_group.command("cancel")
@click.argument("job_id", metavar="ID")
@caller_options
@json_option
@pass_state
def cancel(state: State, job_id: str, caller: Caller, as_json: bool) -> None:
    """Cancel a queued job (a running one cannot be: its worker holds it)."""
    job = state.open(embeds=False).jobs.cancel(job_id, caller=caller)
    out.respond(as_json, job, f"Cancelled job {out.short_id(job.id)} ({job.kind}).")


@click.command("worker")
@click.option("--once", is_flag=True, help="Run the jobs ready now, then exit (default: keep running until stopped).")
@click.option("--kinds", metavar="KIND,…", help="Only jobs of these kinds, comma-separated (default: every kind with a handler).")
@handlers_option
@json_option
@pass_state
def worker(state: State, once: bool, kinds: str | None, handler_specs: tuple[str, ...], as_json: bool) -> None:
    """Run background jobs in the foreground until Ctrl-C or SIGTERM (the job running then is finished first).

    `clawrecall serve` runs `jobs.workers` workers itself; run this to work elsewhere, or more. With --json,
    one line of JSON per job run, as it ended."""
    mem = state.open(embeds=True)
    load_handlers(mem, handler_specs)
    handled = mem.upkeep.handlers().jobs
    if not handled:
        raise ConfigError("no job handlers are registered, so there is nothing to run (extraction registers its own "
                          "when an LLM is configured; --handlers MODULE adds yours)")
    wanted = [k.strip() for k in kinds.split(",") if k.strip()] if kinds else None
    unknown = sorted(set(wanted or []) - set(handled))
    if unknown:
        raise click.UsageError(f"no handler for {', '.join(unknown)} (handlers: {', '.join(sorted(handled))})")

    def finished(job: Job) -> None:
        if as_json:
            click.echo(json.dumps(out.jsonable(job), ensure_ascii=False))
        else:
            click.echo(f"{out.short_id(job.id)} {job.kind} {outcome_text(job)}")

    loop = mem.upkeep.worker(kinds=wanted, on_finish=finished)
    before = {sig: signal.signal(sig, lambda *_: loop.stop(wait=False)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ran = loop.run(once=once)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    if not as_json:
        click.echo(f"Ran {out.plural(ran, 'job')}.", err=True)


def _when(job: Job) -> str:
    """When a queued job runs next (`in 5m`, `now`); nothing for the others."""
    now = utcnow()
    if job.status != "queued":
        return ""
    if job.run_after <= now:
        return "now"
    if (job.run_after - now).total_seconds() < 60:  # an age under a minute is "just now": no time to come
        return "in <1m"
    return "in " + age_string(now - (job.run_after - now), now).removesuffix(" ago")


def outcome_text(job: Job) -> str:
    """`done`, `queued again, runs in 2m: …`, `dead after 5 of 5 attempts: …`: how a run ended, for the worker's log."""
    if job.status == "queued":
        return f"queued again, runs {_when(job)}: {job.last_error}"
    if job.status == "dead":
        return f"dead after {job.attempts} of {job.max_attempts} attempts: {job.last_error}"
    return job.status


def job_text(j: Job) -> str:
    cost = f"{j.cost:.4f}" if j.cost is not None else None
    return out.key_values([
        ("id", j.id), ("kind", j.kind), ("status", j.status), ("scope", j.scope), ("subject", j.subject_id),
        ("attempts", f"{j.attempts} of {j.max_attempts}"), ("run after", out.timestamp(j.run_after)),
        ("lease until", out.timestamp(j.lease_until)), ("worker", j.worker), ("last error", j.last_error),
        ("tokens", f"{j.input_tokens} in, {j.output_tokens} out"), ("cost", cost),
        ("payload", json.dumps(j.payload, ensure_ascii=False) if j.payload else None),
        ("created", out.timestamp(j.created_at)), ("updated", out.timestamp(j.updated_at)),
        ("finished", out.timestamp(j.finished_at)),
    ])


COMMANDS: list[Any] = [jobs_group, worker]
