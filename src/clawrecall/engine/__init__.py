"""The engine: `Memory`, a facade over one private module per job.

    _memory       Memory: the verbs every door calls, and its namespaces (`mem.startup`)
    _upkeep       `mem.upkeep`: what runs the store (sweep, backfill, vector index, embedding model, background work)
    _validate     checks on input, and the one place an item becomes a record
    _writes       the one write path: add, update, delete/undelete (one or by filter), forget — scope, dedup, history
    _reads        the filters of a read; an id or prefix resolved in the caller's scopes
    _embedding    the embedding provider and the store's model fingerprint
    _secrets      secret memories: sealed under the store's key, opened on request, searched by their words, key rotation
    _maintenance  purge, re-embedding, the vector index
    _erasure      erasing a person: every kind of row of one user or agent, counted per kind
    _startup      startup entries (`mem.startup`)
    _transfer     JSONL export and import
    _jobs         the job queue (`mem.jobs`): enqueue in the caller's transaction, leases, retries, dead jobs
    _worker       the loop that runs ready jobs (`clawrecall worker`, `serve`'s worker threads)
    _changes      the change feed (`mem.changes`): memory changes in commit order, scoped, for `/v1/events`
    _events       the events parts emit (`segment_closed`, `vectors_stored`, job kinds) and who handles them
"""

from ._facts import SOURCE_TYPE as FACT_SOURCE
from ._memory import Memory
from ._reads import is_id_or_prefix
from ._validate import MAX_CONTENT_CHARS, check_text

__all__ = ["FACT_SOURCE", "MAX_CONTENT_CHARS", "Memory", "check_text", "is_id_or_prefix"]
