"""Secret memories (docs/agents.md): sealed at rest under the store's key, opened only for an explicit
request by whoever may read them (`memory_get`, a `secrets=True` search, an export with secrets).

A secret's row keeps `MASK` as its content and neither title nor keys; its text is in `sealed`,
encrypted. So the full-text and trigram indexes, the vectors (none is made), history and every read
that does not ask see the mask. The key: `secrets.key` (`CLAWRECALL_SECRETS__KEY`), else
`secrets.key_file`, else a SQLite store's `<database>.key` (PostgreSQL: the data directory's
`secrets.key`), made on the first secret: a secret a model marks during capture must not fail. The store
records the sealing key's fingerprint (`meta.secrets_key`), so a process holding another key fails
clearly instead of sealing what the others cannot open.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..config import Config, data_dir
from ..errors import SecretKeyError
from ..models import MASK, MemoryRecord, SecretRotation, SecretsStatus, SearchHit, Visibility
from ..sealing import Keyring, new_key, parse_keys, write_key_file
from ..storage import Store
from ..storage.migrations import UNSEALED_KEY
from ..storage.text import keywords

if TYPE_CHECKING:
    from ..storage import Filters

log = logging.getLogger("clawrecall.secrets")

_STORE_KEY = "secrets_key"  # meta: the fingerprint of the key that seals this store's secrets
_BATCH = 200
Progress = Callable[[int, int], None]


class Secrets:
    """The store's keyring, and sealing, opening, searching and re-sealing secret memories."""

    def __init__(self, store: Store, config: Config):
        self.store = store
        self.config = config
        self._ring: Keyring | None = None
        self._stamp: int | None = None  # the key file's mtime when it was read: a rotation elsewhere rewrites it

    # -- keys ----------------------------------------------------------------------------------
    def key_file(self) -> Path:
        """Where the keys are kept when the config gives none itself: `secrets.key_file`, else beside a SQLite
        store (`<database>.key`), else (PostgreSQL) `secrets.key` in the data directory."""
        if self.config.secrets.key_file:
            return Path(self.config.secrets.key_file).expanduser()
        folder = self.store.local_folder()
        return data_dir() / "secrets.key" if folder is None else folder / f"{Path(self.store.location).name}.key"

    def keyring(self, *, create: bool = False) -> Keyring:
        """The keys to seal and open with. `create`: a store without a key (and without secrets sealed under
        one) gets one, in a file only this user reads; a store whose secrets are sealed already never does."""
        if self.config.secrets.key:
            if self._ring is None:
                self._ring = Keyring(tuple(parse_keys(self.config.secrets.key, "secrets.key")), "secrets.key")
            return self._ring
        path = self.key_file()
        try:
            stamp = path.stat().st_mtime_ns
        except FileNotFoundError:
            stamp = None
        if stamp is None:
            if not create or self.config.secrets.key_file:
                raise SecretKeyError(f"no key for secret memories: {path} does not exist (CLAWRECALL_SECRETS__KEY "
                                     "or secrets.key_file names the key)")
            if (recorded := self.store.get_meta(_STORE_KEY)) is not None:
                raise SecretKeyError(f"{path} is missing: the secrets of {self.store.location} are sealed with key "
                                     f"{recorded}; put that key file back (a new key would not open them)")
            try:
                write_key_file(path, [new_key()], new=True)
                log.info("made a key for secret memories in %s (mode 0600): keep a copy apart from the store", path)
            except FileExistsError:  # another process made it meanwhile: that one is the key
                pass
            stamp = path.stat().st_mtime_ns
        if self._ring is None or stamp != self._stamp:
            self._ring = Keyring(tuple(parse_keys(path.read_text(), str(path))), str(path), path)
            self._stamp = stamp
        return self._ring

    def _sealing(self) -> Keyring:
        """The keyring to seal with: it must hold the key the store records (or none is recorded yet), else what
        it seals the store's other processes could not open."""
        ring = self.keyring(create=True)
        recorded = self.store.get_meta(_STORE_KEY)
        if recorded is None:  # the first secret: this key is the store's, unless another process recorded its own first
            with self.store.transaction():
                self.store.run(f"INSERT INTO meta (key, value) VALUES ({self.store.dialect.marks(2)}) "
                               "ON CONFLICT (key) DO NOTHING", (_STORE_KEY, ring.fingerprint))
            recorded = self.store.get_meta(_STORE_KEY)
        if recorded not in ring.fingerprints:  # among them, not first: a rotation under way, whose keys open both
            raise SecretKeyError(f"the secrets of {self.store.location} are sealed with key {recorded}, but {ring.source} "
                                 f"seals with {ring.fingerprint}: give this process the store's key (first)")
        return ring

    # -- sealing and opening -------------------------------------------------------------------
    def seal(self, record: MemoryRecord) -> MemoryRecord:
        """The record as stored: a secret's text sealed, its content the mask; any other record as it is."""
        if record.visibility != Visibility.secret or record.kind != "memory":
            return record
        payload = {"content": record.content, "title": record.title, "keys": record.keys}
        return record.model_copy(update={"content": MASK, "title": None, "keys": None, "embedding_model": None,
                                         "sealed": self._sealing().seal(payload)})

    def reveal(self, record: MemoryRecord) -> MemoryRecord:
        """A sealed record with its text (for a caller that asked for it by id or by a secret search)."""
        if record.sealed is None:
            return record
        payload = self.keyring().open(record.sealed)
        return record.model_copy(update={"content": payload["content"], "title": payload.get("title"),
                                         "keys": payload.get("keys"), "sealed": None})

    def search(self, query: str, filters: Filters, limit: int) -> list[SearchHit]:
        """The caller's secrets that pass `filters` and share words with the query: at most
        `secrets.search_limit` of the newest are opened and matched here, in this process. Nothing of
        them is indexed or embedded, so no other reader's search can find them; what is lost: meaning
        (a secret is found by its words, not by a paraphrase), typos, and secrets older than the limit."""
        from dataclasses import replace

        words = set(keywords(query))
        if not words:
            return []
        candidates = self.store.memories.find(replace(filters, only_sealed=True), limit=self.config.secrets.search_limit,
                                     offset=0, order="newest")
        hits: list[SearchHit] = []
        for record in candidates:
            shown = self.reveal(record)
            text = " ".join(filter(None, (shown.content, shown.title, shown.keys))).lower()
            have = set(keywords(text, limit=100_000))
            found = sorted(w for w in words if w in have or any(h.startswith(w) for h in have))
            if found:
                hits.append(SearchHit(memory=shown, score=round(len(found) / len(words), 4), age=shown.age,
                                      matched=["secret"]))
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits[:limit]

    # -- a secret's text out of every index -----------------------------------------------------
    def hide(self, ids: list[str]) -> None:
        """In a write transaction: memories just made secret keep no copy of their text elsewhere (their
        vectors, the text indexes' old terms, history)."""
        self.store.memories.forget_text(ids)
        self.store.history.mask(ids, MASK)

    def seal_legacy(self, progress: Progress | None = None) -> int:
        """Seal the secrets stored in plain text before encryption (the sealed-secrets migration noted
        them); how many. Without a key (a PostgreSQL store not given one) they wait, and are said to."""
        if self.store.get_meta(UNSEALED_KEY) is None or not self.config.writes.enabled:
            return 0
        try:
            self._sealing()
        except SecretKeyError as exc:
            log.warning("secret memories stored before encryption stay unsealed until a key is given: %s", exc)
            return 0
        done = 0
        total = self.store.memories.count_secrets()[1]
        while batch := self.store.memories.unsealed_secrets(_BATCH):
            with self.store.transaction():
                for record in batch:
                    self.store.memories.update(self.seal(record), None)
                self.hide([r.id for r in batch])
            done += len(batch)
            if progress is not None:
                progress(done, total)
        with self.store.transaction():
            self.store.run(f"DELETE FROM meta WHERE key = {self.store.dialect.p}", (UNSEALED_KEY,))
        return done

    # -- rotation ------------------------------------------------------------------------------
    def rotate(self, progress: Progress | None = None, *, keep_old: bool = False) -> SecretRotation:
        """Seal every secret again under a new key. With a key file: a new key goes first in the file (the
        old ones stay, so every row opens while the rows move), the rows are sealed again batch by batch,
        then the old keys leave the file (`keep_old`: they stay, to open older backups). A rotation cut
        short leaves a store whose every secret opens; running it again finishes it. With keys from
        `secrets.key`, put the new key first there and run it: the rows move to it."""
        ring = self.keyring(create=True)
        if ring.path is not None and len(ring.keys) == 1:
            write_key_file(ring.path, [new_key(), *ring.keys])
            ring = self.keyring()
        elif ring.path is None and len(ring.keys) == 1 and self.store.get_meta(_STORE_KEY) in (None, ring.fingerprint):
            raise SecretKeyError("secrets.key holds one key: put a new key first (CLAWRECALL_SECRETS__KEY=new,old; "
                                 "`clawrecall secrets new-key` prints one), then rotate")
        self.store.set_meta(_STORE_KEY, ring.fingerprint)  # new secrets are sealed with the new key from now on
        total = self.store.memories.count_secrets()[0]
        done = resealed = 0
        after: str | None = None
        while batch := self.store.memories.sealed_tokens(after, _BATCH):
            moved = [(i, token, new) for i, token in batch if (new := ring.reseal(token)) is not None]
            if moved:
                self.store.memories.reseal(moved)
            resealed += len(moved)
            done += len(batch)
            after = batch[-1][0]
            if progress is not None:
                progress(done, total)
        dropped = 0
        if ring.path is not None and not keep_old and len(ring.keys) > 1:
            dropped = len(ring.keys) - 1
            write_key_file(ring.path, [ring.keys[0]])
            self.keyring()
        return SecretRotation(key=ring.fingerprint, resealed=resealed, total=total, dropped_keys=dropped)

    def status(self) -> SecretsStatus:
        sealed, unsealed = self.store.memories.count_secrets()
        try:
            ring: Keyring | None = self.keyring()
        except SecretKeyError:
            ring = None
        return SecretsStatus(
            source=None if ring is None else ring.source, key=None if ring is None else ring.fingerprint,
            keys=0 if ring is None else len(ring.keys), store_key=self.store.get_meta(_STORE_KEY),
            sealed=sealed, unsealed=unsealed,
        )



class SecretKeys:
    """`mem.secrets`: the key secret memories are sealed with, its status and its rotation; sealing and
    opening rows is the write path's and the reads' business (`Secrets`), not a user's."""

    def __init__(self, secrets: Secrets):
        self._secrets = secrets

    def status(self) -> SecretsStatus:
        """Where the key comes from, and how many secrets are sealed under which key."""
        return self._secrets.status()

    def rotate(self, progress: Progress | None = None, *, keep_old: bool = False) -> SecretRotation:
        """Seal every secret again under a new key (`Secrets.rotate`)."""
        return self._secrets.rotate(progress, keep_old=keep_old)
