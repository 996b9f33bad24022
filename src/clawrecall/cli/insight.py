"""`clawrecall insight …`: the search log's reports, a memory's recalls and origin, embedding coverage,
groups of near-identical memories and the clean-up report (`mem.insight`, docs/insight.md)."""

from __future__ import annotations

from typing import Any

import click

from .._time import age_string
from ..insight.cleanup import REASONS
from ..models import QueryCount
from . import output as out
from .commands import (
    IsoTime,
    State,
    by_id,
    engine_args,
    group_json_option,
    json_option,
    pass_state,
    rows_format_options,
    scope_options,
)

_since = click.option("--since", type=IsoTime(), help="Only searches at or after this time: ISO, or 7d, 2h, yesterday.")


def _limit(default: int) -> Any:
    return click.option("--limit", "-n", type=click.IntRange(1, 10_000), default=default, show_default=True)


@click.group("insight")
@group_json_option
def insight_group() -> None:
    """What memory is asked and what it finds: the search log's reports, and why a memory was recalled."""


@insight_group.command("searches")
@_since
@_limit(100)
@scope_options
@rows_format_options
@pass_state
def searches(state: State, fmt: out.Format, **params: Any) -> None:
    """The latest searches you may read (yours; the administrator: all), newest first."""
    found = state.open(embeds=False).insight.searches(**engine_args(params))
    rows = [[age_string(s.at), s.door, s.scope or "(admin)", str(s.result_count),
             "" if s.top_score is None else f"{s.top_score:.2f}", f"{s.took_ms:.1f}", _cut(s.query)] for s in found]
    headers = ["AGE", "DOOR", "BY", "HITS", "TOP", "MS", "QUERY"]
    out.respond_rows(fmt, found, out.table(headers, rows, right=(3, 4, 5)) if rows else "No searches logged.")


def _queries(fmt: out.Format, found: list[QueryCount], empty: str) -> None:
    rows = [[str(q.count), f"{q.mean_results:g}", age_string(q.last_at), _cut(q.query)] for q in found]
    out.respond_rows(fmt, found, out.table(["TIMES", "HITS", "LAST", "QUERY"], rows, right=(0, 1)) if rows else empty)


@insight_group.command("popular")
@_since
@_limit(20)
@scope_options
@rows_format_options
@pass_state
def popular(state: State, fmt: out.Format, **params: Any) -> None:
    """The queries asked most."""
    _queries(fmt, state.open(embeds=False).insight.popular(**engine_args(params)), "No searches logged.")


@insight_group.command("unanswered")
@_since
@_limit(20)
@scope_options
@rows_format_options
@pass_state
def unanswered(state: State, fmt: out.Format, **params: Any) -> None:
    """The queries that found nothing: what memory is missing."""
    _queries(fmt, state.open(embeds=False).insight.unanswered(**engine_args(params)), "No query went unanswered.")


@insight_group.command("recalled")
@_since
@_limit(20)
@scope_options
@rows_format_options
@pass_state
def recalled(state: State, fmt: out.Format, **params: Any) -> None:
    """The memories searches found most."""
    found = state.open(embeds=False).insight.recalled(**engine_args(params))
    rows = [[out.short_id(r.memory.id), str(r.count), age_string(r.last_at), _cut(r.memory.content)] for r in found]
    out.respond_rows(fmt, found, out.table(["ID", "TIMES", "LAST", "CONTENT"], rows, right=(1,)) if rows
                     else "No memory recalled.")


@insight_group.command("never-recalled")
@click.option("--days", type=click.FloatRange(0, 36_500, min_open=True), default=30, show_default=True,
              help="Older than this, and not found by any search in this many days.")
@_limit(100)
@scope_options
@rows_format_options
@pass_state
def never_recalled(state: State, fmt: out.Format, **params: Any) -> None:
    """Memories no search found lately: candidates for a clean-up."""
    found = state.open(embeds=False).insight.never_recalled(**engine_args(params))
    rows = [[out.short_id(m.id), m.scope, age_string(m.created_at), _cut(m.content)] for m in found]
    out.respond_rows(fmt, found, out.table(["ID", "SCOPE", "AGE", "CONTENT"], rows) if rows
                     else "Every memory was recalled lately.")


@insight_group.command("recalls")
@by_id
def recalls(state: State, memory_id: str, caller: Any, as_json: bool) -> None:
    """Each time a search found this memory: when, score, rank, and the query if you may read that search."""
    found = state.open(embeds=False).insight.recalls(memory_id, caller=caller)
    rows = [[age_string(r.at), f"{r.score:.2f}", str(r.rank), r.door or "", _cut(r.query or "(another's search)")]
            for r in found]
    out.respond(as_json, found, out.table(["WHEN", "SCORE", "RANK", "DOOR", "QUERY"], rows, right=(1, 2)) if rows
                else "No search has found it.")


def _cut(text: str) -> str:
    return out.truncate(text, 60)


@insight_group.command("why")
@by_id
def why(state: State, memory_id: str, caller: Any, as_json: bool) -> None:
    """Why a memory is stored (where it came from, what it came from, its changes) and why it was recalled."""
    p = state.open(embeds=False).insight.why(memory_id, caller=caller)
    pairs: list[tuple[str, Any]] = [
        ("Memory", f"{out.short_id(p.memory.id)} {_cut(p.memory.content)}"), ("Origin", f"{p.origin}: {p.explanation}"),
        ("Added", f"{age_string(p.added_at)} by {p.added_by or 'the administrator'}" if p.added_at else None),
        ("Changes", ", ".join(h.action for h in p.history) or None),
        ("Segment", f"{out.short_id(p.segment.id)} ({p.segment.title or p.segment.session_id})" if p.segment else None),
        ("Job", f"{out.short_id(p.job.id)} {p.job.kind} {p.job.status}" if p.job else None),
        ("File", p.file.path if p.file else None),
        ("Stated", out.plural(len(p.occurrences), "time", "times") if p.occurrences else None),
        ("Recalled", out.plural(len(p.recalls), "time", "times")),
    ]
    text = out.key_values(pairs)
    said = [f"  {m.role}: {_cut(m.content)}" for m in p.messages]
    out.respond(as_json, p, text + ("\nFrom:\n" + "\n".join(said) if said else ""))


@insight_group.command("coverage")
@scope_options
@rows_format_options
@pass_state
def coverage(state: State, fmt: out.Format, **params: Any) -> None:
    """Embedding coverage per kind of row: how many have a vector, wait for one, or have another model's."""
    found = state.open(embeds=False).insight.coverage(**engine_args(params))
    rows = [[c.kind, str(c.total), str(c.embedded), f"{c.percent:g}%", str(c.waiting), str(c.other_model)] for c in found]
    out.respond_rows(fmt, found, out.table(["KIND", "ROWS", "EMBEDDED", "%", "WAITING", "OTHER MODEL"], rows,
                                           right=(1, 2, 3, 4, 5)) if rows else "Nothing stored.")


_yes = click.option("--yes", "-y", "yes", is_flag=True,
                    help="Soft-delete what is suggested (restorable with `undelete` until purged); without it, only report.")


@insight_group.command("clusters")
@click.option("--threshold", type=click.FloatRange(0.5, 1), default=0.8, show_default=True,
              help="Cosine at or above which two memories are near-identical.")
@_limit(20)
@_yes
@scope_options
@rows_format_options
@pass_state
def clusters(state: State, fmt: out.Format, yes: bool, **params: Any) -> None:
    """Groups of memories that say nearly the same thing, largest first, each with the one to keep."""
    mem = state.open(embeds=False)
    args = engine_args(params)
    found = mem.insight.clusters(**args)
    rows = [[str(c.size), f"{c.min_similarity:.2f}", c.scope, out.short_id(c.keep), _cut(c.memories[0].content)]
            for c in found]
    text = out.table(["SIZE", "MIN SIM", "SCOPE", "KEEP", "CONTENT"], rows, right=(0, 1)) if rows else "No near-identical memories."
    if yes and found:
        deleted = _delete(mem, [i for c in found for i in c.remove], args)
        text += f"\nDeleted {out.memories(len(deleted))}, kept one of each group."
    out.respond_rows(fmt, found, text)


@insight_group.command("cleanup")
@click.option("--days", type=click.FloatRange(0, 36_500, min_open=True), default=90, show_default=True,
              help="Older than this and not found by any search in this many days: never_recalled.")
@click.option("--duplicate-threshold", type=click.FloatRange(0.5, 1), default=0.95, show_default=True,
              help="Cosine at or above which a memory is a near-copy of one kept.")
@click.option("--reason", "reasons", multiple=True, type=click.Choice(REASONS),
              help="Only memories flagged for this reason (repeatable).")
@_limit(1_000)
@_yes
@scope_options
@json_option
@pass_state
def cleanup(state: State, as_json: bool, yes: bool, reasons: tuple[str, ...], **params: Any) -> None:
    """Low-quality memories — noise, near-empty, template placeholders, questions, near-copies, never
    recalled — oldest first, and with --yes their soft deletion."""
    mem = state.open(embeds=False)
    args = engine_args(params)
    report = mem.insight.cleanup(**args)
    if reasons:
        report.items = [i for i in report.items if set(i.reasons) & set(reasons)]
    rows = [[out.short_id(i.memory.id), ",".join(i.reasons), age_string(i.memory.created_at), _cut(i.memory.content)]
            for i in report.items]
    counts = ", ".join(f"{k} {v}" for k, v in report.counts.items())
    text = (out.table(["ID", "REASONS", "AGE", "CONTENT"], rows) + f"\n{len(rows)} of {report.scanned} memories ({counts})."
            if rows else f"Nothing to clean up in {out.memories(report.scanned)}.")
    deleted: list[str] = []
    if yes and report.items:
        deleted = [m.id for m in _delete(mem, [i.memory.id for i in report.items], args)]
        text += f"\nDeleted {out.memories(len(deleted))} (`undelete ID` restores one until purged)."
    elif report.items:
        text += "\nRun again with --yes to delete them."
    out.respond(as_json, {**report.model_dump(mode="json"), "deleted": deleted}, text)


def _delete(mem: Any, ids: list[str], args: dict[str, Any]) -> list[Any]:
    with out.progress_bar("Deleting") as progress:
        deleted = []
        for n, memory_id in enumerate(ids, 1):
            deleted.extend(mem.insight.confirm_cleanup([memory_id], caller=args["caller"]))
            if progress is not None:
                progress(n, len(ids))
    return deleted
