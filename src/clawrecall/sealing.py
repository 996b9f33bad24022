"""Secret memories sealed at rest: Fernet (AES-128-CBC with an HMAC-SHA256 tag, from `cryptography`)
under keys read from the config (`secrets.key`, set from `CLAWRECALL_SECRETS__KEY`) or a key file.

A keyring holds one or more keys: the first seals, every one opens, so a rotation can move rows to
a new key one batch at a time while every row stays readable (docs/agents.md). A key is named by its
fingerprint (the first 16 hex characters of its SHA-256), never printed itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import SecretKeyError

if TYPE_CHECKING:
    from cryptography.fernet import Fernet, MultiFernet


def fingerprint(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def new_key() -> bytes:
    """A fresh key, as Fernet writes one (32 random bytes, URL-safe base64)."""
    return base64.urlsafe_b64encode(os.urandom(32))


def parse_keys(text: str, source: str) -> list[bytes]:
    """The keys of a key file or variable: one a line (or comma-separated), `#` comments ignored."""
    from cryptography.fernet import Fernet

    keys = [k.strip().encode() for line in text.splitlines() for k in line.split("#")[0].split(",") if k.strip()]
    if not keys:
        raise SecretKeyError(f"{source} holds no key")
    for key in keys:
        try:
            Fernet(key)
        except ValueError:
            raise SecretKeyError(f"{source} holds something that is not a key (32 bytes, URL-safe base64): "
                                 "`clawrecall secrets rotate` makes one") from None
    return keys


def write_key_file(path: Path, keys: list[bytes], *, new: bool = False) -> None:
    """Write the keys (first: the sealing key) readable by this user only, replacing the file at once:
    a crash leaves the old file or the new one, never half of one. `new`: only if there is none (another
    process that made one first wins: FileExistsError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(b"# clawrecall secret keys: the first seals, every one opens. Keep a copy apart from the store.\n")
            out.write(b"".join(k + b"\n" for k in keys))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        if new:
            os.link(tmp, path)  # atomic, and refused when the file exists
            tmp.unlink()
        else:
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Keyring:
    keys: tuple[bytes, ...]
    source: str  # the key file's path, or the config key that holds them
    path: Path | None = None  # the key file, when they come from one

    @property
    def fingerprint(self) -> str:
        """The sealing key's."""
        return fingerprint(self.keys[0])

    @property
    def fingerprints(self) -> list[str]:
        return [fingerprint(k) for k in self.keys]

    @cached_property
    def _all(self) -> MultiFernet:
        """Seals with the first key, opens with any."""
        from cryptography.fernet import Fernet, MultiFernet

        return MultiFernet([Fernet(k) for k in self.keys])

    @cached_property
    def _first(self) -> Fernet:
        from cryptography.fernet import Fernet

        return Fernet(self.keys[0])

    def seal(self, payload: dict[str, Any]) -> str:
        return self._all.encrypt(json.dumps(payload, ensure_ascii=False).encode()).decode()

    def open(self, token: str) -> dict[str, Any]:
        from cryptography.fernet import InvalidToken

        try:
            return json.loads(self._all.decrypt(token.encode()))
        except InvalidToken:
            raise SecretKeyError(f"a secret memory cannot be opened with the keys of {self.source} "
                                 f"({', '.join(self.fingerprints)}): it was sealed with another key") from None

    def reseal(self, token: str) -> str | None:
        """The token sealed again under the sealing key; None when it already is."""
        from cryptography.fernet import InvalidToken

        try:
            self._first.decrypt(token.encode())
            return None
        except InvalidToken:
            pass
        try:
            return self._all.rotate(token.encode()).decode()
        except InvalidToken:
            raise SecretKeyError(f"a secret memory cannot be opened with the keys of {self.source}: "
                                 "it was sealed with another key") from None
