"""The one configuration model, and how it is read from a file, the environment and code.

Precedence, lowest first: defaults < config file (TOML or JSON) < `CLAWRECALL_*`
environment variables < keyword arguments to `Memory.open`. String values may use
`${VAR}`; a missing variable is an error naming it, never an empty string.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from pathlib import Path
from types import UnionType
from typing import Any, ClassVar, Iterator, Literal, Mapping, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from .errors import ConfigError, pydantic_message
from .importers.systems import owners
from .models import DEFAULT_CATEGORIES
from .scopes import ALL, SHARED_KINDS, validate_scope

EMBEDDING_PROVIDERS = ("local", "openai", "openai-compatible", "ollama", "voyage", "gemini", "zai", "e5", "command", "hash")
ENV_PREFIX = "CLAWRECALL_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    # keys of earlier releases and what took their place: a config that still sets one loads, with a warning
    RETIRED: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _drop_retired(cls, data: Any) -> Any:
        if isinstance(data, dict) and cls.RETIRED.keys() & data.keys():
            for key in cls.RETIRED.keys() & data.keys():
                logging.getLogger("clawrecall.config").warning(cls.RETIRED[key])
            data = {k: v for k, v in data.items() if k not in cls.RETIRED}
        return data


class EmbeddingConfig(_Section):
    provider: str = "local"
    model: str | None = None
    dimensions: int | None = Field(default=None, gt=0)
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    command: list[str] | None = None
    batch_size: int = Field(default=64, ge=1, le=4096)
    query_cache_size: int = Field(default=1024, ge=0)
    timeout_s: float = Field(default=30.0, gt=0)
    device: str = "cpu"
    # local provider: `auto` runs plain encoders on ONNX Runtime (3x faster queries), others on PyTorch
    runtime: Literal["auto", "onnx", "torch"] = "auto"

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in EMBEDDING_PROVIDERS:
            raise ValueError(f"Unknown embedding provider: {value} (choose one of: {', '.join(EMBEDDING_PROVIDERS)})")
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _split_command(cls, value: Any) -> Any:
        if isinstance(value, str):
            import shlex

            return shlex.split(value)
        return value


class LegConfig(_Section):
    """One candidate leg of the retrieval pipeline."""

    enabled: bool = True
    weight: float = Field(default=1.0, ge=0)


class RerankConfig(_Section):
    """Optional cross-encoder rerank: `local` (a sentence-transformers CrossEncoder) or `http`."""

    provider: Literal["none", "local", "http"] = "none"
    model: str | None = None
    url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    timeout_s: float = Field(default=3.0, gt=0)
    top_k: int = Field(default=30, ge=1)
    weight: float = Field(default=0.6, ge=0, le=1)

    @model_validator(mode="after")
    def _complete(self) -> "RerankConfig":
        if self.provider == "local" and not self.model:
            raise ValueError("rerank provider 'local' needs a model (a sentence-transformers CrossEncoder name or path)")
        if self.provider == "http" and not self.url:
            raise ValueError("rerank provider 'http' needs a url")
        return self


# (intercept, cosine, coverage) of the local models, each fitted by `bench/relevance.py --fit
# [--embedding-model M]` on its own cosine scale (docs/retrieval.md, docs/embeddings.md)
RELEVANCE_FITS: dict[str, tuple[float, float, float]] = {
    "local/all-MiniLM-L6-v2": (-3.24, 7.41, 0.04),
    "local/multilingual-e5-small": (-35.21, 42.88, 0.02),
}


class RelevanceConfig(_Section):
    """The absolute score's calibration (retrieval/relevance.py). Each embedding model has its own
    cosine scale: the local models' fits are built in (`RELEVANCE_FITS`); a config that names another
    `model` with its coefficients brings its own fit."""

    # the embedding model (`provider/model`) the coefficients belong to: with a model that neither
    # they nor a built-in fit belong to, scores are ranking scores (relative to the query's best hit)
    model: str = "local/all-MiniLM-L6-v2"
    intercept: float = RELEVANCE_FITS["local/all-MiniLM-L6-v2"][0]
    cosine: float = Field(default=RELEVANCE_FITS["local/all-MiniLM-L6-v2"][1], ge=0)
    coverage: float = Field(default=RELEVANCE_FITS["local/all-MiniLM-L6-v2"][2], ge=0)

    def for_model(self, model: str) -> RelevanceConfig | None:
        """The calibration of a store embedded by `model`: this one if its coefficients were set for it,
        else a built-in one (naming a local model without coefficients does not give it MiniLM's)."""
        coefficients_set = bool(self.model_fields_set & {"intercept", "cosine", "coverage"})
        if model == self.model and (coefficients_set or model not in RELEVANCE_FITS):
            return self
        return _built_in_fit(model) if model in RELEVANCE_FITS else None


@functools.cache
def _built_in_fit(model: str) -> RelevanceConfig:
    """One config per built-in fit, made once (every search asks for its store's)."""
    intercept, cosine, coverage = RELEVANCE_FITS[model]
    return RelevanceConfig(model=model, intercept=intercept, cosine=cosine, coverage=coverage)


class RetrievalConfig(_Section):
    """The named stages of the one retrieval pipeline (see docs/retrieval.md for why these defaults)."""

    candidates: int = Field(default=50, ge=1, le=10_000)
    vector: LegConfig = LegConfig(weight=1.0)
    # the vector leg's query leaves out words found in more than this share of the searched memories (0 = off)
    vector_common_share: float = Field(default=0.4, ge=0, le=1)
    bm25: LegConfig = LegConfig(weight=1.0)
    trigram: LegConfig = LegConfig(weight=0.3)
    fusion: Literal["weighted", "rrf"] = "weighted"
    rrf_k: int = Field(default=60, ge=1)
    neighbor_weight: float = Field(default=0.25, ge=0)
    rerank: RerankConfig = RerankConfig()
    recency_half_life_days: float = Field(default=14.0, gt=0)
    recency_weight: float = Field(default=0.0, ge=0)
    # a time named in the query ("yesterday", "in May") adds this to the hits from that time (0 = off; docs/time.md)
    time_query_weight: float = Field(default=0.2, ge=0)
    importance_weight: float = Field(default=0.3, ge=0, le=1)
    # a fact discussed n times: × (1 + w·min(log2 n, 3)), memento-local's capped log2 shape, scaled so
    # that a recurring topic wins near-ties (n = 8: +30%, as much as importance moves) without lifting
    # an unrelated fact over a relevant one (memento-local's own factor doubles a fact said twice)
    recurrence_weight: float = Field(default=0.1, ge=0, le=1)
    length_norm_anchor: int = Field(default=500, ge=0)
    time_decay_half_life_days: float = Field(default=0.0, ge=0)
    timeless_categories: list[str] = Field(default_factory=lambda: ["decision", "preference", "person", "entity", "rule"])
    relevance: RelevanceConfig = RelevanceConfig()
    # hits whose absolute score (the estimated probability of being relevant) is below this are dropped
    min_score: float = Field(default=0.1, ge=0, le=1)
    noise_filter: bool = True
    mmr_threshold: float | None = Field(default=0.95, gt=0, le=1)
    # a search over several sources multiplies each hit's ranking score by its source's weight, so
    # what was stored as a memory leads the raw record it may have come from (docs/conversations.md)
    source_weights: dict[Literal["memory", "message", "chunk"], float] = Field(
        default={"memory": 1.0, "message": 0.8, "chunk": 0.9}
    )
    # what a search that names no sources covers, at every door and in recall: memories, what users and
    # assistants said in the conversation record (reasoning and tool output stay out), and file chunks;
    # a fact said in passing is found wherever one asks (docs/retrieval.md#what-a-search-covers)
    sources: list[Literal["memory", "message", "chunk"]] = Field(default=["memory", "message", "chunk"], min_length=1)
    message_roles: list[Literal["user", "assistant", "reasoning", "tool_call", "tool_result", "system"]] = Field(
        default=["user", "assistant"], min_length=1
    )
    # an agent's search multiplies another agent's shared memory (the master knowledge base) by this,
    # so its own memories and its user's words lead at equal relevance; memento-local: 0.5 (docs/agents.md)
    master_weight: float = Field(default=0.8, ge=0, le=1)


class WritesConfig(_Section):
    enabled: bool = True
    # memories soft-deleted, or expired, longer ago than this are erased by `purge` and by the server
    retention_days: float = Field(default=30.0, ge=0)
    # how often `clawrecall serve` purges them (ShadowDB's automatic purge); 0: only `clawrecall purge` does
    purge_every_hours: float = Field(default=1.0, ge=0)
    # a new memory whose embedding fails (the provider down) is kept without a vector and not
    # deduplicated; keyword search finds it at once and the backfill embeds it later. false: the add fails
    embed_later: bool = True


class BackupsConfig(_Section):
    """memory-lancedb-pro's daily backup: `clawrecall serve` writes one every `every_hours` into `dir`
    (set it to turn backups on) and keeps the newest `keep` (docs/backups.md)."""

    dir: str | None = None
    every_hours: float = Field(default=24.0, gt=0)
    keep: int = Field(default=7, ge=1)


class SecretsConfig(_Section):
    """The key that seals secret memories (docs/agents.md): `key` (set it from the environment,
    `CLAWRECALL_SECRETS__KEY`), else the key file `key_file`, else a SQLite store's own key file beside
    it (`<database>.key`, made with mode 0600 when the first secret is written). Several keys, comma- or
    line-separated: the first seals, every one opens (a rotation under way)."""

    key: str | None = Field(default=None, repr=False)
    key_file: str | None = None
    # an agent's `secrets=True` search reads (and decrypts) at most this many of its newest secrets
    search_limit: int = Field(default=1000, ge=1, le=100_000)


class DedupConfig(_Section):
    enabled: bool = True
    threshold: float = Field(default=0.95, gt=0, le=1)


class DatabaseConfig(_Section):
    """Seed 000's `database` block: the parts of a PostgreSQL connection URL, spelled out."""

    host: str = "localhost"
    port: int = Field(default=5432, ge=1, le=65535)
    database: str = "clawrecall"
    user: str = "postgres"
    password: str | None = Field(default=None, repr=False)
    ssl: bool = False

    def url(self) -> str:
        from urllib.parse import quote

        from urllib.parse import urlencode

        auth = quote(self.user, safe="") + (f":{quote(self.password, safe='')}" if self.password else "")
        params = {"sslmode": "require"} if self.ssl else {}
        if self.host.startswith("/"):  # a Unix socket directory
            params |= {"host": self.host, "port": str(self.port)}
            location = ""
        else:
            location = f"{self.host}:{self.port}"
        query = f"?{urlencode(params)}" if params else ""
        return f"postgresql://{auth}@{location}/{quote(self.database, safe='')}{query}"


class PostgresConfig(_Section):
    """Backend settings that only PostgreSQL has."""

    text_search_config: str = Field(default="english", pattern=r"^[a-z_][a-z0-9_]*$")
    pool_size: int = Field(default=10, ge=1, le=200)
    # how long a request waits for a pooled connection before it fails (`storage_error`): a server outage
    # shorter than this is only a delay
    pool_timeout_s: float = Field(default=10.0, gt=0, le=600)
    # The HNSW graph (see docs/scaling.md for how these were chosen): links per node, and the
    # candidate list while building it; changes apply to the next build (`reembed`, `index build`).
    hnsw_m: int = Field(default=24, ge=2, le=100)
    hnsw_ef_construction: int = Field(default=128, ge=4, le=1000)
    # The candidate list of a search: at least this, and at least the retrieval candidate pool.
    hnsw_ef_search: int = Field(default=100, ge=1, le=1000)
    # Memory for building the vector index (and other maintenance) in the building transaction.
    maintenance_work_mem: str = Field(default="1GB", pattern=r"^[1-9][0-9]*\s*(kB|MB|GB|TB)$")
    # Filters that leave at most this many rows read them exactly (recall 1.0) instead of through HNSW.
    exact_search_rows: int = Field(default=50_000, ge=0, le=10_000_000)

    @model_validator(mode="after")
    def _ef_construction_covers_m(self) -> "PostgresConfig":
        if self.hnsw_ef_construction < 2 * self.hnsw_m:
            raise ValueError("hnsw_ef_construction must be at least 2 * hnsw_m (a pgvector rule)")
        return self


class SQLiteConfig(_Section):
    """Backend settings that only SQLite has."""

    # A scope holding more rows than this is searched through clusters of its vectors, the nearest
    # third of them (as PostgreSQL's HNSW serves a filter beyond `postgres.exact_search_rows`);
    # up to it every row is compared: exact. Measured in docs/vector-search.md.
    exact_search_rows: int = Field(default=50_000, ge=0, le=10_000_000)


class RecallHookConfig(_Section):
    """`before_prompt_build`: seed 002's auto-recall budgets, plus a time budget so a slow store never stalls a turn."""

    enabled: bool = True
    max_items: int = Field(default=3, ge=1, le=20)
    max_chars: int = Field(default=600, ge=1)
    per_item_max_chars: int = Field(default=180, ge=10)
    min_repeat_turns: int = Field(default=8, ge=0)
    timeout_ms: int = Field(default=2000, ge=1)
    # the absolute score a line needs by itself (not lent by a session neighbour) to be injected unasked,
    # on the scale of `retrieval.min_score` (which it replaces when set): stricter than a search's, since
    # it lands in every prompt. 0.3 (a cosine of about 0.32 with the default calibration) kept every
    # needed English fact of bench/agent_loop.py's tuning set and no unrelated line (docs/benchmarks/agent-loop.md)
    min_score: float | None = Field(default=0.3, ge=0, le=1)
    # an assistant's earlier reply needs this much: it mostly restates what the user said, or is its own
    # small talk ("Anything else I can help with?"), which no threshold near `min_score` keeps out
    assistant_min_score: float = Field(default=0.8, ge=0, le=1)
    min_length: int | None = Field(default=None, ge=1)
    # a prompt or line whose words the embedding model has fewer than this share of whole in its vocabulary is in
    # a language it was not trained on, where its cosine says little (the bundled model calls any two Czech
    # sentences alike): such a line needs a word stem in common with the prompt (0 = trust the cosine always;
    # a model whose vocabulary is not known is trusted). English prompts read 0.78–1, Czech ones 0.14–0.6
    min_known_words: float = Field(default=0.7, ge=0, le=1)
    # a line sharing at least this share of its words with a line already in the block is left out
    # (a captured fact and the message it came from; a fact said twice)
    near_duplicate: float = Field(default=0.8, gt=0, le=1)
    # what recall draws on, when it should differ from every search's `retrieval.sources` (the default:
    # the same, so what recall shows every search door finds)
    sources: list[Literal["memory", "message", "chunk"]] | None = Field(default=None, min_length=1)
    RETIRED = {
        "min_similarity": "hooks.recall.min_similarity is no longer used: recall gates on hooks.recall.min_score, an "
        "absolute relevance score (0.15 is about the cosine 0.2 that min_similarity defaulted to); see docs/retrieval.md",
    }


class StartupHookConfig(_Section):
    """Seed 001's startup identity injection."""

    enabled: bool = True
    mode: Literal["always", "first-run", "digest"] = "digest"
    max_chars: int = Field(default=4000, ge=1)
    max_chars_by_model: dict[str, int] = Field(default_factory=dict)
    ttl_s: float = Field(default=600.0, gt=0)
    # the user's standing facts (memories tagged `standing`: an allergy, a diet, a health constraint, which
    # capture tags) after the entries, newest first and in the same budget, as untrusted memory text; 0 = none
    standing: int = Field(default=5, ge=0, le=50)


class CaptureHookConfig(_Section):
    """`agent_end`: seeds 000/002's rule-based capture."""

    enabled: bool = True
    max_per_turn: int = Field(default=2, ge=0)
    capture_assistant: bool = False
    importance: float = Field(default=0.7, ge=0, le=1)
    min_chars: int = Field(default=10, ge=1)
    min_chars_cjk: int = Field(default=4, ge=1)
    max_chars: int = Field(default=500, ge=1)


class ConversationsConfig(_Section):
    """The conversation record (memento-local's capture buffer and segmenter; openclaw-memory-pgvector's tables)."""

    # `agent_end` stores every message of the transcript it is sent (idempotently)
    record: bool = True
    pause_minutes: float = Field(default=5.0, gt=0)
    max_turns: int = Field(default=50, ge=1)
    # topic shift: cosine between the mean vectors of the `topic_window` messages before and from a
    # user message; at the lowest point below the threshold the segment closes (0 = never). Measured
    # for the default model by bench/segments.py (docs/benchmarks/segments.md): on LoCoMo no setting
    # cuts between spliced chats without also cutting inside one, so the default fires on stark
    # shifts only (no false cut in 115 sessions; a coding chat followed by a cooking one dips to -0.04)
    topic_threshold: float = Field(default=0.15, ge=0, le=1)
    topic_window: int = Field(default=4, ge=1, le=50)
    # where closed segments are written as JSONL: default `conversations/` beside a SQLite store, else
    # in the data directory
    dir: str | None = None
    # the messages, segments and JSONL files of segments closed longer ago than this are erased by the
    # server's sweep and by `clawrecall conversations prune` / `sweep` (None: keep them)
    retention_days: float | None = Field(default=None, gt=0)


class JobsConfig(_Section):
    """The job queue (docs/jobs.md): background work such as extracting facts from a closed segment."""

    # worker threads `clawrecall serve` runs when a handler is registered: jobs wait on a remote LLM, so
    # one thread keeps a local model or a rate-limited API busy without competing with requests
    workers: int = Field(default=1, ge=0, le=64)
    # how long a claimed job is a worker's before another may take it: a heartbeat renews it every third
    # of that while the handler runs, so it only runs out when the worker died; 5 minutes is long enough
    # for a slow LLM call between renewals and short enough that a killed worker's job is soon run again
    lease_s: float = Field(default=300.0, gt=0)
    # failures (not RetryLaterError) before a job is dead: with the backoff below, 5 attempts span
    # 30 s + 1 min + 2 min + 4 min, long enough to ride out a restart, short enough to report a real bug
    max_attempts: int = Field(default=5, ge=1, le=1000)
    # retry n waits backoff_base_s * 2^(n-1) (jittered, at most backoff_max_s): a provider that is down
    # is asked again a few times a minute at first, then at most hourly
    backoff_base_s: float = Field(default=30.0, ge=0)
    backoff_max_s: float = Field(default=3600.0, ge=0)
    # how long an idle worker sleeps between looks for ready jobs: one indexed query every 2 s is
    # nothing to the store, and a job closed with a segment starts within 2 s
    poll_s: float = Field(default=2.0, gt=0)


class ExtractionVisibility(_Section):
    """memento-local's `visibility`: a fact's level by its category; the model may only make it stricter."""

    default: Literal["private", "shared", "secret"] = "shared"
    rules: dict[str, Literal["private", "shared", "secret"]] = Field(default_factory=dict)


class ExtractionConfig(_Section):
    """Facts made from closed conversation segments (docs/extraction.md)."""

    enabled: bool = True  # runs when an LLM is configured (`llm.provider`); without one capture stays rule-based
    # segments with fewer turns are not sent to the model: one exchange rarely states a durable fact,
    # and the rules (run on it instead) keep a single "remember …"; memento-local waits for 3, which
    # skips a short but real exchange ("I moved to Brno" – answer – "in May")
    min_turns: int = Field(default=2, ge=1)
    known_facts: int = Field(default=50, ge=0, le=500)  # current facts shown to the model as F1…Fn (memento-local: 50)
    max_segment_chars: int = Field(default=24_000, ge=500)  # the latest messages are kept past it
    summaries: bool = True  # a `session_summary` memory when a session ends
    # the messages a fact came from are found by the fact's words too (LongMemEval: key = value + fact)
    augment_keys: bool = True
    # an update the model is less sure of than this keeps both facts instead of superseding
    update_min_confidence: float = Field(default=0.6, ge=0, le=1)
    visibility: ExtractionVisibility = ExtractionVisibility()


class FilesConfig(_Section):
    """File ingestion: `mem.files`, `clawrecall files add`, `POST /v1/files` (docs/files.md)."""

    # the folders a server's clients (REST) may have it read files from; empty: none. The CLI and the
    # Python API read any file the user running them can: they are that user already.
    roots: list[str] = Field(default_factory=list)
    max_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    # what reading one file may cost, whatever its size in bytes (a small PDF can hold millions of characters):
    # its text, its pages, and the seconds its reading takes; past one, the file is refused
    max_text_chars: int = Field(default=2_000_000, ge=1)
    max_pages: int = Field(default=2000, ge=1)
    max_seconds: float = Field(default=60.0, gt=0)
    # files a server reads at once (on their own threads, not the request threads); more wait their turn
    workers: int = Field(default=1, ge=1, le=64)
    types: list[Literal["markdown", "text", "code", "pdf"]] = Field(
        default=["markdown", "text", "code", "pdf"], min_length=1
    )
    # tokens per chunk; default: the local model's window (254 for all-MiniLM-L6-v2), else 256
    chunk_tokens: int | None = Field(default=None, ge=16, le=8192)
    # the share of a chunk the next one repeats, so a passage cut in two is whole in one of them
    overlap: float = Field(default=0.15, ge=0, lt=0.5)


class LLMConfig(_Section):
    """The LLM that background jobs (fact extraction, summaries) call; none by default (docs/llm.md).
    `openai` is any OpenAI-compatible server by `base_url`: Ollama, vLLM, llama.cpp, LM Studio, OpenRouter."""

    provider: Literal["none", "openai", "anthropic"] = "none"
    model: str | None = None
    base_url: str | None = None  # default: the provider's own API
    api_key: str | None = Field(default=None, repr=False)
    # the variable read when api_key is unset; default OPENAI_API_KEY / ANTHROPIC_API_KEY
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    timeout_s: float = Field(default=60.0, gt=0)
    # more attempts after the first for a connection error, a timeout, 429 or 5xx
    max_retries: int = Field(default=3, ge=0, le=20)
    # the longest wait a Retry-After gets before the next attempt
    max_retry_after_s: float = Field(default=60.0, ge=0)
    max_concurrency: int = Field(default=4, ge=1, le=1000)
    requests_per_minute: float | None = Field(default=None, gt=0)  # None: no limit
    structured_output: Literal["auto", "json_schema", "json_object", "none"] = "auto"
    max_output_tokens: int = Field(default=2048, ge=1)
    # US dollars per million tokens, for the cost of each job; unset: not priced
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _complete(self) -> "LLMConfig":
        if self.provider != "none" and not (self.model or "").strip():
            raise ValueError(f"llm provider {self.provider!r} needs llm.model (the model's name at the provider)")
        if self.base_url is not None and not re.match(r"^https?://[^/\s]+", self.base_url.strip()):
            raise ValueError(f"llm.base_url must be an http:// or https:// URL, got {self.base_url!r}")
        if (self.price_input_per_mtok is None) != (self.price_output_per_mtok is None):
            raise ValueError("set both llm.price_input_per_mtok and llm.price_output_per_mtok, or neither")
        return self


class InsightConfig(_Section):
    """Insight into memory (docs/insight.md): the search log, the change feed."""

    # every search and recall, through every door: query, caller, scopes, hits, time taken (false: none)
    search_log: bool = True
    # searches logged longer ago than this are removed by the sweep (None: keep them)
    search_log_days: float | None = Field(default=90.0, gt=0)
    # the change feed (/v1/events) on SQLite: how often another process's changes are looked for, in
    # seconds (this process's own arrive at once; PostgreSQL is told by NOTIFY, and reconnects this often)
    events_poll_s: float = Field(default=0.25, gt=0, le=60)
    # a stream with nothing to say sends a comment this often, so proxies keep it open and a server notices
    # a client that left (its write fails), in seconds
    events_keepalive_s: float = Field(default=15.0, gt=0, le=300)


class HooksConfig(_Section):
    """The lifecycle hooks agent runtimes call (OpenClaw's before_prompt_build and agent_end)."""

    recall: RecallHookConfig = RecallHookConfig()
    startup: StartupHookConfig = StartupHookConfig()
    capture: CaptureHookConfig = CaptureHookConfig()


class ScopeAccess(_Section):
    """The members of one shared scope besides the administrator: `user:<id>`, `agent:<id>`, or `*` for
    every identified caller. `write` members also read, and may add, change and erase memories."""

    read: list[str] = Field(default_factory=list)
    write: list[str] = Field(default_factory=list)

    @field_validator("read", "write")
    @classmethod
    def _members(cls, members: list[str]) -> list[str]:
        for member in members:
            if member != ALL and not (member.startswith(("user:", "agent:")) and validate_scope(member)):
                raise ValueError(f"a member is user:<id>, agent:<id> or {ALL}, got {member!r}")
        return members


class AgentAccess(_Section):
    """One agent of a household (docs/agents.md): the level of its new memories (memento-local's
    `visibility.defaultLevel` and `rules`, by category; unset: `extraction.visibility`'s), and whether
    it reads the master knowledge base, the other agents' shared memories (memento-local's
    `crossAgentRecall`)."""

    visibility: Literal["private", "shared", "secret"] | None = None
    rules: dict[str, Literal["private", "shared", "secret"]] = Field(default_factory=dict)
    master: bool = True


class AccessConfig(_Section):
    """Who may use the shared scopes (docs/security.md): `scopes` maps `global`, `project:<id>` or
    `custom:<name>` to its members. `global` is read by everyone, so it takes `write` only. `agents`
    maps an agent id (or `*`, every agent not named) to its household settings (docs/agents.md)."""

    scopes: dict[str, ScopeAccess] = Field(default_factory=dict)
    agents: dict[str, AgentAccess] = Field(default_factory=dict)

    def agent(self, agent_id: str | None) -> AgentAccess:
        """The settings of an agent: its own, else `*`'s, else the defaults."""
        return self.agents.get(agent_id or "") or self.agents.get(ALL) or _NO_AGENT

    @field_validator("scopes")
    @classmethod
    def _shared(cls, scopes: dict[str, ScopeAccess]) -> dict[str, ScopeAccess]:
        for scope, members in scopes.items():
            validate_scope(scope)
            if scope.partition(":")[0] not in SHARED_KINDS:
                raise ValueError(f"{scope!r} is no shared scope: a user: or agent: scope is its owner's alone")
            if scope == "global" and members.read:
                raise ValueError("global is read by every caller: give its members as write, or narrow a token's scopes")
        return scopes


_NO_AGENT = AgentAccess()


class Config(_Section):
    """Everything clawrecall can be told. Unknown keys are rejected, listing them."""

    db: str | None = None
    database: DatabaseConfig | None = None
    postgres: PostgresConfig = PostgresConfig()
    sqlite: SQLiteConfig = SQLiteConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    writes: WritesConfig = WritesConfig()
    backups: BackupsConfig = BackupsConfig()
    dedup: DedupConfig = DedupConfig()
    secrets: SecretsConfig = SecretsConfig()
    categories: list[str] = Field(default_factory=lambda: list(DEFAULT_CATEGORIES))
    hooks: HooksConfig = HooksConfig()
    conversations: ConversationsConfig = ConversationsConfig()
    files: FilesConfig = FilesConfig()
    jobs: JobsConfig = JobsConfig()
    access: AccessConfig = AccessConfig()
    llm: LLMConfig = LLMConfig()
    extraction: ExtractionConfig = ExtractionConfig()
    insight: InsightConfig = InsightConfig()

    @model_validator(mode="after")
    def _categories_nonempty(self) -> "Config":
        if not self.categories:
            raise ValueError("categories must not be empty")
        if blank := [c for c in self.categories if not c.strip() or c != c.strip()]:
            raise ValueError(f"categories must be names without surrounding spaces, got {blank[0]!r}")
        if len(set(self.categories)) < len(self.categories):
            repeated = sorted({c for c in self.categories if self.categories.count(c) > 1})
            raise ValueError(f"categories repeat {', '.join(repeated)}")
        if "other" not in self.categories:  # else every add that names no category fails
            raise ValueError("categories must include 'other', the category of a memory that names none")
        if unknown := sorted(set(self.extraction.visibility.rules) - set(self.categories)):
            raise ValueError(f"extraction.visibility.rules name categories that are not in categories: {', '.join(unknown)}")
        for agent, settings in self.access.agents.items():
            if unknown := sorted(set(settings.rules) - set(self.categories)):
                raise ValueError(f"access.agents.{agent}.rules name categories that are not in categories: {', '.join(unknown)}")
        return self


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the default store and config live: `$CLAWRECALL_HOME`, else `$XDG_DATA_HOME/clawrecall`."""
    env = os.environ if env is None else env
    if env.get("CLAWRECALL_HOME"):
        return Path(env["CLAWRECALL_HOME"]).expanduser()
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "clawrecall"


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("CLAWRECALL_CONFIG"):
        return Path(env["CLAWRECALL_CONFIG"]).expanduser()
    return data_dir(env) / "config.toml"


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    return data_dir(env) / "memory.db"


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def substitute_env(value: Any, env: Mapping[str, str]) -> Any:
    """Replace `${VAR}` in every string of a nested structure; a missing variable is an error."""
    if isinstance(value, str):

        def repl(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in env:
                raise ConfigError(f"Environment variable {name} is not set")
            return env[name]

        return _VAR.sub(repl, value)
    if isinstance(value, dict):
        return {k: substitute_env(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_env(v, env) for v in value]
    return value


def _unknown_keys(model: type[BaseModel], data: Mapping[str, Any], path: str = "") -> list[str]:
    unknown: list[str] = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            if key not in getattr(model, "RETIRED", {}):
                unknown.append(f"{path}{key}")
            continue
        sub = _model_of(field.annotation)
        if isinstance(value, Mapping) and sub is not None:
            unknown.extend(_unknown_keys(sub, value, f"{path}{key}."))
    return unknown


def _named_with_origin(key: str, origins: Mapping[str, str]) -> str:
    """`foo (from CLAWRECALL_FOO)` when variables set the key or keys under it: a stray variable is
    otherwise hard to find, since no file holds it."""
    names = sorted(name for path, name in origins.items() if path == key or path.startswith(key + "."))
    return f"{key} (from {', '.join(names)})" if names else key


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model class of a field annotated `Model` or `Model | None` (not `dict[str, Model]`, whose keys are names)."""
    options = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else ()
    for candidate in (annotation, *options):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def toml_value(value: Any) -> str:
    """A value as TOML: JSON's spelling (which TOML reads for strings, numbers, booleans and arrays),
    but tables inline as `{ key = value }`."""
    if isinstance(value, dict):
        items = ", ".join(f"{k if re.fullmatch(r'[A-Za-z0-9_-]+', k) else json.dumps(k)} = {toml_value(v)}" for k, v in value.items())
        return f"{{ {items} }}" if items else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a TOML or JSON config file (by extension; `.toml` otherwise)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import tomllib

            data = tomllib.loads(text)
    except (ValueError, json.JSONDecodeError) as exc:
        kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
        raise ConfigError(f"config file {path} is not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold an object at the top level")
    return data


# Documented variables that are not config keys: where config and models live, the torch
# build the installer picks, who the stdio MCP server acts as; `CLAWRECALL_TEST_*` is the
# test suite's.
NON_CONFIG_ENV = frozenset(
    f"{ENV_PREFIX}{name}" for name in ("HOME", "CONFIG", "MODEL_CACHE", "TORCH", "USER", "AGENT", "SESSION")
)


def env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """`CLAWRECALL_DB=…`, `CLAWRECALL_EMBEDDING__PROVIDER=openai`: `__` separates sections.

    A key that holds text takes the value as written (a password `12345` stays text); any other
    value is parsed as JSON when it is valid JSON (`true`, `0.9`, `["a"]`), else kept as text.
    """
    out: dict[str, Any] = {}
    for _name, parts, raw in _config_variables(env):
        value: Any = raw
        if not _holds_text(_annotation_at(parts)):
            try:
                value = json.loads(raw)
            except ValueError:
                pass
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _config_variables(env: Mapping[str, str]) -> Iterator[tuple[str, list[str], str]]:
    """Each `CLAWRECALL_*` variable that sets a config key: its name, the key's path, its value."""
    for name, raw in env.items():
        if name.startswith(ENV_PREFIX) and name not in NON_CONFIG_ENV and not name.startswith(ENV_PREFIX + "TEST_"):
            yield name, name[len(ENV_PREFIX) :].lower().split("__"), raw


def _annotation_at(parts: list[str]) -> Any:
    """The type of the config key a path of names leads to (a name after a mapping is one of its keys,
    `access.agents.*.master`); None when it leads to no key."""
    model: type[BaseModel] | None = Config
    annotation: Any = None
    for part in parts:
        if get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
        else:
            field = model.model_fields.get(part) if model is not None else None
            if field is None:
                return None
            annotation = field.annotation
        model = _model_of(annotation)
    return annotation


def _holds_text(annotation: Any) -> bool:
    """`str`, `str | None` or a `Literal` of strings: nothing but text fits, so no JSON is parsed."""
    options = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    present = [o for o in options if o is not type(None)]
    return bool(present) and all(
        o is str or (get_origin(o) is Literal and all(isinstance(v, str) for v in get_args(o))) for o in present
    )


def load_config(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the config: defaults, then the file, then the environment, then `overrides`.

    A relative SQLite `db` in the file names a file in the file's folder, wherever the command runs;
    one from the environment or `overrides` stays relative to the working directory, as a path typed
    on a command line is.
    """
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    file_path = Path(path).expanduser() if path is not None else default_config_path(env)
    if path is not None or file_path.exists():
        if not file_path.exists():
            raise ConfigError(f"config file not found: {file_path}")
        data = read_config_file(file_path)
    db_from_file = "db" in data
    from_env = env_overrides(env)
    data = _deep_merge(data, from_env)
    if overrides:
        data = _deep_merge(data, overrides)
    origins = {".".join(parts): name for name, parts, _ in _config_variables(env)}
    config = build_config(data, env, origins=origins)
    if db_from_file and "db" not in from_env and "db" not in (overrides or {}) and config.db:
        config.db = _sqlite_path_in(file_path.absolute().parent, config.db)
    return config


def _foreign_hint(unknown: list[str]) -> str:
    """When the unknown keys are another memory system's, say which and how to translate them."""
    names = owners(unknown)
    if not names:
        return ""
    return f" (settings of {' or '.join(names)}: `clawrecall config import FILE --from {names[0]}` translates them)"


def _sqlite_path_in(folder: Path, db: str) -> str:
    """A relative SQLite path or `sqlite:///relative/path` taken as relative to `folder`; anything else as it is."""
    scheme = "sqlite:///" if db.startswith("sqlite:///") else ""
    path = db[len(scheme) :]
    if (not scheme and "://" in db) or not path.strip() or Path(path).expanduser().is_absolute():
        return db
    return scheme + str(folder / path)


def build_config(
    data: Mapping[str, Any], env: Mapping[str, str] | None = None, *, origins: Mapping[str, str] | None = None,
) -> Config:
    """Validate `data`; `origins` maps a key's dotted path to the variable that set it, for the messages."""
    env = os.environ if env is None else env
    unknown = _unknown_keys(Config, data)
    if unknown:
        named = [_named_with_origin(key, origins or {}) for key in unknown]
        raise ConfigError(f"clawrecall config has unknown keys: {', '.join(named)}{_foreign_hint(unknown)}")
    data = substitute_env(dict(data), env)
    try:
        return Config.model_validate(data)
    except PydanticValidationError as exc:
        raise ConfigError(f"invalid config: {pydantic_message(exc)}") from None
