"""Extraction: facts from closed segments by the configured LLM, as background jobs
(memento-local's extraction layer; docs/extraction.md).

A segment that closes queues its `extract` job in the closing transaction; a session that ends
queues a `summarize` job too. A worker runs them: the segment and the facts already known go to the
model, whose JSON answer is validated (one repair attempt, then the rule-based capture), decided
(new, repeat, update) and applied by `Facts` inside the job's lease commit, so a worker killed
mid-job leaves nothing half-written and the job runs again. An LLM that is down makes the job wait
(`RetryLaterError`); the record is kept meanwhile. With no LLM configured (the default) nothing is
queued and capture stays rule-based.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from ..config import Config
from ..errors import EmbeddingError, LLMError, LLMRefusedError, LLMUnavailableError, RetryLaterError
from ..extraction.schema import answer_schema, validate
from ..extraction import prompt as prompts
from ..models import Job, Segment
from ..storage import Store
from ._facts import Facts
from ._jobs import Jobs, Lease

if TYPE_CHECKING:
    from ..llm import LLM

log = logging.getLogger("clawrecall.extraction")

EXTRACT, SUMMARIZE = "extract", "summarize"
SCHEMA_NAME = "facts"
SESSION_ENDS = ("session_end", "explicit")
SUMMARY_WAIT_S = 30.0  # a session's summary waits this long for its segments' extraction jobs
SUMMARY_CHARS = 1000  # a segment's summary sentence, as kept


class Extraction:
    def __init__(self, store: Store, config: Config, facts: Facts, jobs: Jobs):
        """Its handlers (`queue` on `segment_closed`, `extract` and `summarize` jobs) are wired in `_events.wire`."""
        self.store = store
        self.config = config
        self.facts = facts
        self.jobs = jobs
        self._llm: LLM | None = None
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """An LLM is configured: closed segments get extraction jobs (else capture stays rule-based)."""
        return self.facts.active

    @property
    def llm(self) -> LLM:
        """The configured client, made on first use (its SDK is imported then, not when a store opens)."""
        with self._lock:
            if self._llm is None:
                from ..llm import create_llm

                made = create_llm(self.config.llm)
                assert made is not None, "extraction runs only with an LLM configured"
                self._llm = made
            return self._llm

    # -- queueing, inside the transaction that closes the segment -----------------------------------
    def queue(self, segment: Segment) -> None:
        # every closed segment: the job is the one writer of its facts (the model's, or for a short one the rules')
        if segment.closed_at is not None:
            self.jobs.enqueue(EXTRACT, scope=segment.scope, subject_id=segment.id)
        if segment.close_reason in SESSION_ENDS and self.config.extraction.summaries:
            self.jobs.enqueue(SUMMARIZE, scope=segment.scope, subject_id=segment.id)

    # -- the jobs -----------------------------------------------------------------------------------
    def extract(self, job: Job, lease: Lease) -> None:
        """One segment: prompt, answer (one repair), decisions, applied in the lease's commit. An embedding
        provider that is down makes the job wait, as an LLM that is down does (the prompt's known facts are
        found by meaning, before the LLM is asked: no tokens are spent on a job that cannot finish)."""
        with _waits_for_embedding():
            self._extract_segment(job, lease)

    def _extract_segment(self, job: Job, lease: Lease) -> None:
        segment = self.store.segments.get(job.subject_id)
        if segment is None:  # erased (retention, GDPR) since it was queued: nothing left to extract
            with lease.commit():
                return
        if not self.facts.wanted(segment):  # too short to be worth a model's tokens: the rules find its facts
            self.facts.rule_fallback(segment, self.store.messages.in_segment(segment.id), within=lease.commit)
            return
        prompt = self.facts.prompt(segment)
        if not prompt.shown:
            with lease.commit():
                return
        extraction = self._answer(prompt, lease)
        if extraction is None:
            self.facts.rule_fallback(segment, prompt.shown, within=lease.commit)
            return
        decisions = self.facts.decide(segment, prompt, extraction)
        summary = (extraction.summary or "").strip()[:SUMMARY_CHARS] or None

        @contextmanager
        def commit() -> Iterator[None]:
            """The job's commit, which also keeps the segment's summary sentence (the session summary's part)."""
            with lease.commit():
                yield
                current = self.store.segments.get(segment.id)
                if summary is not None and current is not None:
                    self.store.segments.replace(current.model_copy(update={"summary": summary}))

        self.facts.apply(segment, prompt.shown, decisions, within=commit)

    def _answer(self, prompt: prompts.Prompt, lease: Lease) -> Any:
        """The model's validated answer, after at most one repair; None when it cannot be had (refused, or
        invalid twice), so the rule-based capture runs instead. A provider that is down raises
        `RetryLaterError`: the job waits for it and nothing is lost."""
        categories = self.config.categories
        schema = answer_schema(categories)
        messages = prompt.messages
        for attempt in (1, 2):
            try:
                completion = self.llm.complete(messages, schema=schema, schema_name=SCHEMA_NAME)
            except LLMUnavailableError as exc:
                raise RetryLaterError(f"the LLM is unavailable: {exc}", after=exc.retry_after) from None
            except LLMRefusedError as exc:
                if exc.completion is not None:
                    lease.usage(exc.completion.input_tokens, exc.completion.output_tokens, self.llm.cost(exc.completion))
                log.warning("extraction refused by the model (%s); rule-based capture instead", exc)
                return None
            lease.usage(completion.input_tokens, completion.output_tokens, self.llm.cost(completion))
            extraction, errors = validate(completion.text, categories=categories, messages=len(prompt.shown),
                                          known=len(prompt.known))
            if extraction is not None:
                return extraction
            if attempt == 1:
                log.info("extraction answer invalid (%s); asking once more", "; ".join(errors[:3]))
                messages = prompts.repair(prompt, completion.text, errors)
            else:
                log.warning("extraction answer invalid after a repair (%s); rule-based capture instead", "; ".join(errors[:3]))
        return None

    def summarize(self, job: Job, lease: Lease) -> None:
        """A session that ended: its one summary memory, from the summaries its segments' extractions gave
        (no call of its own). Waits while those extractions are queued, and while the embedding provider is down."""
        with _waits_for_embedding():
            self._summarize_session(job, lease)

    def _summarize_session(self, job: Job, lease: Lease) -> None:
        last = self.store.segments.get(job.subject_id)
        if last is None:
            with lease.commit():
                return
        transcript = self._transcript(last)
        waiting = [s.id for s in transcript if self._pending(s.id)]
        if waiting:
            raise RetryLaterError(f"{len(waiting)} segment(s) of the session are still being extracted",
                                  after=SUMMARY_WAIT_S)
        said = [s for s in transcript if s.summary]
        if not said:
            with lease.commit():
                return
        text = " ".join(s.summary for s in said if s.summary)
        self.facts.summarize(last, f"Session of {said[0].started_at:%Y-%m-%d}: {text}",
                             segment_ids=[s.id for s in said], within=lease.commit)

    def _transcript(self, last: Segment) -> list[Segment]:
        """The segments of the transcript `last` ended: those of its session since the session last ended before it."""
        everything = self.store.segments.find([last.scope], last.session_id, limit=10_000, offset=0)
        ordered = sorted(everything, key=lambda s: (s.started_at, s.id))
        out: list[Segment] = []
        for s in ordered:
            if s.started_at > last.started_at:
                break
            if s.id != last.id and s.close_reason in SESSION_ENDS:
                out = []  # an earlier end: what came before it is another transcript's
                continue
            out.append(s)
        return out

    def _pending(self, segment_id: str) -> bool:
        job = self.store.jobs.for_subject(EXTRACT, segment_id)
        return job is not None and job.status in ("queued", "running")

    # -- doctor ---------------------------------------------------------------------------------------
    def check(self) -> tuple[bool, str]:
        """Whether the LLM answers a one-word request now, in words, for `clawrecall doctor`."""
        try:
            done = self.llm.complete([{"role": "user", "content": "Answer with the word ok."}], max_tokens=5)
        except LLMError as exc:
            return False, f"{self.llm.name}: {exc}"
        return True, f"{self.llm.name} answers ({done.input_tokens + done.output_tokens} tokens)"


@contextmanager
def _waits_for_embedding() -> Iterator[None]:
    """An embedding provider that is down makes a job wait (and retry later), as an LLM that is down does."""
    try:
        yield
    except EmbeddingError as exc:
        raise RetryLaterError(f"the embedding provider is unavailable: {exc}") from None
