"""`before_prompt_build`: the memories worth prepending to this turn, or nothing, and never late.

Maps 1:1 onto OpenClaw's hook: the event's `prompt` and `messages` in, `{prependContext}` out.
The answer is marked `ephemeral` because a recall block that stays in the transcript is recalled
and re-injected on later turns until compaction loops (memory-lancedb-pro #345).
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from typing_extensions import TypedDict

from ..errors import NotFoundError
from ..conversations.text import (
    RECALL_CLOSE, RECALL_OPEN, discussed_text, percent, sanitize_for_context, strip_envelope, untrusted,
)
from ..models import MemoryRecord, SearchHit
from ..retrieval.noise import is_small_talk
from ..scopes import Caller, may_write
from ..storage.text import shared_stems, words
from .context import message_text, read_scope, request_messages, request_str, session_key
from .text import skip_reason

if TYPE_CHECKING:
    from ..embeddings.base import Embedder
    from ..engine import Memory

log = logging.getLogger("clawrecall.hooks")

MAX_QUERY_CHARS = 1000
SEARCH_THREADS = 4


@dataclass
class _Session:
    turn: int = 0
    injected: dict[str, int] = field(default_factory=dict)  # memory id → turn it was last injected


class RecalledMemory(TypedDict):
    id: str
    score: float


class RecallAnswer(TypedDict):
    """`prependContext` as OpenClaw's before_prompt_build result names it; `skipped` says why nothing is."""

    prependContext: str | None
    ephemeral: bool
    memories: list[RecalledMemory]
    skipped: str | None


def before_prompt_build(mem: "Memory", request: Mapping[str, Any], caller: Caller) -> RecallAnswer:
    """Recall for one turn. Request `{prompt, messages?}`; answer `{prependContext, ephemeral, memories, skipped}`."""
    cfg = mem.config.hooks.recall
    prompt = request_str(request, "prompt")
    messages = request_messages(request)
    if not cfg.enabled:
        return _answer(skipped="disabled")
    key = session_key(caller)
    session = None if key is None else mem.upkeep.runtime.sessions("recall", _Session).get(key, reset=messages == [])
    if messages == [] and caller.session_id is not None:
        end_segment(mem, caller)
    if session is not None:
        session.turn += 1
    query = _query(prompt, messages)
    reason = skip_reason(query, cfg.min_length)
    if reason is not None:
        return _answer(skipped=reason)

    # room for hits the budgets or the no-repeat rule drop, without widening every leg's pool
    limit = min(cfg.max_items * 2 + (len(session.injected) if session else 0), 100)
    # on a queue of its own, so the hook can stop waiting; a search that overruns finishes unobserved
    # explained, for each hit's own score (a session neighbour may lend it a better one)
    future = mem.upkeep.runtime.queue("recall", threads=SEARCH_THREADS).submit(
        contextvars.copy_context().run, mem.search, query, caller=caller, scope=read_scope(caller), limit=limit, min_score=cfg.min_score,
        sources=cfg.sources, exclude_session=caller.session_id, message_roles=mem.config.retrieval.message_roles,
        explain=True,
    )
    assert future is not None  # the queue has no bound
    try:
        hits = future.result(timeout=cfg.timeout_ms / 1000)
    except TimeoutError:
        future.cancel()
        log.warning("recall search overran its %d ms budget; nothing injected", cfg.timeout_ms)
        return _answer(skipped="timeout")
    except Exception:  # a failing recall must not fail the agent's turn
        log.exception("recall search failed; nothing injected")
        return _answer(skipped="error")
    if hits.without_vectors:  # found by words alone, its scores cannot tell relevant from not: inject nothing
        log.warning("recall ran without vectors (%s); nothing injected", hits.without_vectors)
        return _answer(skipped="error")

    chosen, lines = select_lines(mem, hits, caller, evidence(query, mem.upkeep.embedder, cfg.min_known_words), session)
    if not chosen:
        return _answer(skipped="no_memories")
    if session is not None:
        for hit in chosen:
            session.injected[hit.id] = session.turn
        session.injected = {i: t for i, t in session.injected.items() if session.turn - t < cfg.min_repeat_turns}
    block = "\n".join([RECALL_OPEN, untrusted(lines), RECALL_CLOSE])
    return _answer(block, [{"id": h.id, "score": round(own_score(h), 4)} for h in chosen])


def label(hit: SearchHit) -> str:
    """What a recalled line is: a memory's category, who said a message, or a file."""
    if hit.memory.kind == "message":
        return f"{hit.memory.source_id} said"
    return "file" if hit.memory.kind == "chunk" else hit.memory.category


def via(record: MemoryRecord, caller: Caller) -> str:
    """" [via drjones]" after a line the reading agent has from another agent's shared memory (the
    master knowledge base), so the model knows whose word it is; nothing for its own."""
    if caller.agent_id is None or record.agent_id in (None, caller.agent_id):
        return ""
    return f" [via {sanitize_for_context(record.agent_id, 40)}]"


def end_segment(mem: "Memory", caller: Caller) -> None:
    """A new session (an empty history: `/new`, a reset) closes the conversation's open segment."""
    if not (mem.config.conversations.record and mem.config.writes.enabled and caller.session_id
            and may_write(caller, access=mem.config.access)):
        return
    try:
        mem.conversations.end(caller.session_id, caller=caller)
    except NotFoundError:  # a session with nothing recorded: nothing to close
        pass
    except Exception:  # recall must not fail the turn over the record
        log.exception("closing the session's segment failed")


def _query(prompt: str | None, messages: list[Mapping[str, Any]] | None) -> str:
    """The turn's own user input: OpenClaw's `prompt`, not the last user message of `messages`.

    `messages` is the history *before* this turn, so its last user message is the previous
    turn's (openclaw PR #141521 fixed memory-lancedb recalling against it). It is used only
    when a caller sends no prompt.
    """
    text = strip_envelope(prompt or "")
    if not text and messages:
        users = [m for m in messages if m.get("role") == "user"]
        text = strip_envelope(message_text(users[-1])) if users else ""
    return text[:MAX_QUERY_CHARS]


def evidence(query: str, embedder: Embedder, min_known: float) -> Callable[[str], bool]:
    """What a line needs besides its score: nothing when the embedding model reads both the prompt and
    the line as a language it knows (`Embedder.known_share`); else a word stem of the prompt's
    (`shared_stems`). The bundled model, trained on English, scores every Czech sentence of a user
    0.3–0.75 against every other, so a Czech block chosen by score was four lines in five unrelated; no
    bar on it, nor on multilingual-e5-small's, separates them."""

    def reads(text: str) -> bool:
        share = embedder.known_share(text)
        return share is None or share >= min_known

    if reads(query):
        return lambda text: reads(text) or bool(shared_stems(query, text))
    return lambda text: bool(shared_stems(query, text))


def select_lines(
    mem: "Memory", hits: list[SearchHit], caller: Caller, evident: Callable[[str], bool], session: _Session | None = None,
) -> tuple[list[SearchHit], list[str]]:
    """Best hits first, within the item, total and per-item budgets, each a line worth its place: relevant
    by its own score (an assistant's reply by a higher one) and, in a language the embedding model does not
    read, by a word it shares with the prompt (`evidence`), telling something (not small talk, not a
    question), not a near-copy of a line already chosen, not injected lately.

    A session neighbour shares the score of the hit it is next to (relevance.py): a search lists it as
    that hit's context, but unasked, "Anything else?" after the fact it follows is not worth a line, nor
    worth that fact's score. So lines are chosen, ordered and labelled by their own absolute score:
    what a search gives the same text for the same question when it is not lent one. An assistant's
    reply mostly restates the user or is its own boilerplate.
    """
    cfg = mem.config.hooks.recall
    floor = mem.config.retrieval.min_score if cfg.min_score is None else cfg.min_score
    master_weight = mem.config.retrieval.master_weight
    chosen: list[SearchHit] = []
    lines: list[str] = []
    said: list[set[str]] = []
    used = 0
    # stable: equal scores keep the search's order; another agent's shared memory after the agent's own
    # (retrieval.master_weight, as the search ranks it)
    for hit in sorted(hits, key=lambda h: own_score(h) * (master_weight if via(h.memory, caller) else 1.0), reverse=True):
        if len(chosen) == cfg.max_items:
            break
        last = session.injected.get(hit.id) if session is not None else None
        if session is not None and last is not None and session.turn - last < cfg.min_repeat_turns:
            continue
        score = own_score(hit)
        reply = hit.memory.kind == "message" and hit.memory.source_id == "assistant"
        if (score < (max(floor, cfg.assistant_min_score) if reply else floor) or _tells_nothing(hit.content)
                or not evident(hit.content)):
            continue
        text = set(words(hit.content))
        if any(_overlap(text, other) >= cfg.near_duplicate for other in said):
            continue
        when = hit.age if hit.discussed is None else f"{hit.age}, {discussed_text(hit.discussed)}"
        line = (f"- [{label(hit)}]{via(hit.memory, caller)} {sanitize_for_context(hit.content, cfg.per_item_max_chars)} "
                f"({percent(score)}, {when})")
        cost = len(line) + (1 if lines else 0)
        if used + cost > cfg.max_chars:
            continue
        chosen.append(hit)
        lines.append(line)
        said.append(text)
        used += cost
    return chosen, lines


def own_score(hit: SearchHit) -> float:
    """A hit's absolute score by itself: not the one a session neighbour lent it (an explained hit says)."""
    return ((hit.explain or {}).get("relevance") or {}).get("own", hit.score)


def _tells_nothing(text: str) -> bool:
    """Small talk ("Thanks, that's all"), or a question: it asks what a line should tell."""
    return is_small_talk(text) or text.rstrip().endswith(("?", "？"))


def _overlap(a: set[str], b: set[str]) -> float:
    """The share of words two lines have in common (Jaccard): 1.0 for the same words in any order."""
    return len(a & b) / len(a | b) if a or b else 1.0


def _answer(
    prepend: str | None = None, memories: list[RecalledMemory] | None = None, *, skipped: str | None = None
) -> RecallAnswer:
    return {"prependContext": prepend, "ephemeral": True, "memories": memories or [], "skipped": skipped}
