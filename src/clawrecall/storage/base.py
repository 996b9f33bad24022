"""The storage interface every backend implements, and the filter object it receives.

Kept small on purpose: records in and out, three candidate legs for retrieval
(vector, full-text, trigram), history rows, and a little metadata. Everything above it —
validation, scopes, dedup, fusion, scoring — is shared by all backends.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterator, Literal, Sequence

from ..models import HistoryEntry, MemoryRecord, StartupEntry

if TYPE_CHECKING:  # numpy is most of a read command's start-up (`clawrecall stats`)
    import numpy as np

Order = Literal["newest", "oldest", "updated"]
TOKEN_COLUMNS = ("id", "name", "kind", "user_id", "agent_id", "scopes", "created_at", "revoked_at")


@dataclass(frozen=True)
class Filters:
    """What a read may see. `scopes=None` means every scope (already checked by `scopes.py`)."""

    scopes: list[str] | None = None
    categories: list[str] | None = None
    tags: list[str] | None = None  # any of these tags
    user_id: str | None = None
    session_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    include_deleted: bool = False
    only_deleted: bool = False
    include_expired: bool = False
    now: datetime | None = None


@dataclass(slots=True)
class Candidate:
    """One hit from one candidate leg: the memory id and the leg's raw score (higher is better)."""

    id: str
    score: float


@dataclass(slots=True)
class HistoryDraft:
    memory_id: str
    action: str
    before: str | None  # JSON text (a snapshot is serialised once, by pydantic: the add path's biggest cost)
    after: str | None
    actor: str | None
    at: datetime


@dataclass
class StoreStats:
    total: int
    deleted: int
    expired: int
    by_category: dict[str, int] = field(default_factory=dict)
    by_scope: dict[str, int] = field(default_factory=dict)
    users: int = 0
    oldest: datetime | None = None
    newest: datetime | None = None
    size_bytes: int | None = None


class Store(ABC):
    backend: str
    location: str

    # -- lifecycle and metadata ------------------------------------------------
    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def schema_version(self) -> int: ...

    @abstractmethod
    def get_meta(self, key: str) -> str | None: ...

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """A write transaction; nested calls join the outer one."""

    @abstractmethod
    def integrity_problems(self) -> list[str]:
        """What the backend's own consistency checks find wrong, one line each; empty when the store
        is sound. `clawrecall doctor` runs it: a damaged store can still answer `stats` correctly."""

    # -- writes ----------------------------------------------------------------
    @abstractmethod
    def insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None: ...

    @abstractmethod
    def update(self, record: MemoryRecord, vector: np.ndarray | None) -> None:
        """Replace every field of `record` (by id); replace the vector when one is given."""

    @abstractmethod
    def remove(self, ids: list[str]) -> None:
        """Hard delete: the row, its vector and its index entries are gone."""

    @abstractmethod
    def add_history(self, entries: list[HistoryDraft]) -> None: ...

    @abstractmethod
    def erase_history(self, memory_id: str) -> None:
        """Blank the before/after of every history row of a memory (GDPR forget)."""

    # -- reads -----------------------------------------------------------------
    @abstractmethod
    def fetch(self, ids: list[str]) -> dict[str, MemoryRecord]: ...

    @abstractmethod
    def fetch_for_update(self, memory_id: str) -> MemoryRecord | None:
        """Inside a write transaction: the record as stored now, which no other writer can change
        before COMMIT. An update applies its changes to this, not to what it read before."""

    @abstractmethod
    def ids_with_prefix(self, prefix: str, filters: Filters, limit: int = 6) -> list[str]: ...

    @abstractmethod
    def list(self, filters: Filters, *, limit: int, offset: int, order: Order) -> list[MemoryRecord]: ...

    @abstractmethod
    def iter_all(self, filters: Filters, batch: int = 500) -> Iterator[tuple[MemoryRecord, np.ndarray | None]]: ...

    @abstractmethod
    def count(self, filters: Filters) -> int: ...

    @abstractmethod
    def stats(self) -> StoreStats: ...

    @abstractmethod
    def history(self, memory_id: str) -> list[HistoryEntry]: ...

    @abstractmethod
    def history_ids_with_prefix(self, prefix: str, limit: int = 6) -> list[str]:
        """Ids with history that start with `prefix`: an erased memory has no row left to resolve by."""

    @abstractmethod
    def vectors(self, ids: list[str]) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def purgeable(self, deleted_before: datetime) -> list[str]: ...

    @abstractmethod
    def session_neighbors(self, ids: list[str], filters: Filters) -> dict[str, list[str]]:
        """For each id, the memories just before and after it in its session (by creation time)."""

    @abstractmethod
    def drop_vector_index(self) -> None:
        """Before re-embedding: forget any index tied to the old vectors' dimensions."""

    @abstractmethod
    def build_vector_index(self) -> None:
        """After re-embedding or a deferred bulk load: index the vectors (now, if not yet done)."""

    @contextmanager
    def deferred_vector_index(self, *, rebuild: bool = False) -> Iterator[None]:
        """Bulk loads: write without maintaining an on-disk vector index, build it once at the end.

        `rebuild` drops an existing index first. Backends without such an index do nothing.
        """
        yield

    # -- startup identity (seed 001) -----------------------------------------------
    @abstractmethod
    def startup_entries(self, scopes: list[str] | None) -> list[StartupEntry]:
        """Entries of these scopes (all when None), by priority then key."""

    @abstractmethod
    def put_startup(self, entry: StartupEntry) -> None: ...

    @abstractmethod
    def delete_startup(self, scope: str, key: str) -> bool: ...

    # -- API tokens of `clawrecall serve` (auth.py): rows of TOKEN_COLUMNS, secrets only hashed ----------
    @abstractmethod
    def put_token(self, row: Sequence[Any]) -> None:
        """Store a token: id, name, kind, user_id, agent_id, scopes (JSON text), salt, hash, created_at."""

    @abstractmethod
    def tokens(self, *, include_revoked: bool) -> list[tuple]:
        """Every token (active ones unless `include_revoked`), oldest first, as TOKEN_COLUMNS rows."""

    @abstractmethod
    def token(self, token_id: str, *, active_only: bool) -> tuple | None:
        """One token as a TOKEN_COLUMNS row plus its salt and hash."""

    @abstractmethod
    def revoke_token(self, token_id: str, at: datetime) -> None: ...

    @abstractmethod
    def any_active_token(self) -> bool: ...

    # -- candidate legs ----------------------------------------------------------
    @abstractmethod
    def vector_candidates(self, query: np.ndarray, filters: Filters, k: int) -> list[Candidate]:
        """Nearest memories by cosine similarity (score = cosine)."""

    @abstractmethod
    def nearest(self, vectors: np.ndarray, scope: str, min_score: float) -> list[Candidate | None]:
        """For each vector, the most similar live memory of one scope if its cosine reaches
        `min_score`, else None (batch deduplication)."""

    @abstractmethod
    def text_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        """Full-text (BM25) matches (score = positive BM25)."""

    @abstractmethod
    def fuzzy_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        """Trigram matches: typo-tolerant, and the leg that finds CJK text without word breaks."""
