"""Load the embedding model in the background, so a server answers (and an MCP handshake completes) at once.

The first search waits for the load instead; `/health` says where it stands.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Literal

from ..errors import ClawrecallError

if TYPE_CHECKING:
    from ..engine import Memory

log = logging.getLogger("clawrecall.server")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s)]+", re.IGNORECASE)


class ModelWarmup:
    def __init__(self, mem: Memory):
        self.mem = mem
        self.state: Literal["idle", "loading", "ready", "failed"] = "idle"
        self.error: str | None = None

    def start(self) -> None:
        self.state = "loading"
        threading.Thread(target=self._load, name="clawrecall-model", daemon=True).start()

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            self.mem.upkeep.embedder.embed(["warm up"], kind="query")
        except ClawrecallError as exc:
            log.error("embedding model failed to load", extra={"error": str(exc)})
            # `/health` answers without a token: where the provider lives is for the log, not for anyone asking
            self.state, self.error = "failed", _URL.sub("<provider URL>", str(exc))
            return
        self.state = "ready"
        seconds = round(time.perf_counter() - started, 2)
        log.info("embedding model ready", extra={"model": self.mem.upkeep.embedder.model, "s": seconds})
