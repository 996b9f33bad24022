"""Any program as an embedding provider: the escape hatch for models no built-in provider serves.

Protocol: the program gets `{"texts": [...], "type": "query"|"passage"}` as JSON on stdin and
prints a JSON list of vectors, or `{"embeddings": [...]}`, on stdout. A non-zero exit fails the
batch with the last line of its stderr. One process per batch keeps the protocol stateless.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from ..config import EmbeddingConfig
from ..errors import ConfigError, EmbeddingError
from .base import Embedder, Kind


def _argv(cfg: EmbeddingConfig) -> list[str]:
    if not cfg.command:
        raise ConfigError("the command embedding provider needs embedding.command (the program and its arguments)")
    return list(cfg.command)


class CommandEmbedder(Embedder):
    provider = "command"

    @classmethod
    def default_model_for(cls, cfg: EmbeddingConfig) -> str:
        """`embedding.model`, else the command with its paths cut to file names ("python embed.py"):
        two scripts run by one interpreter are two models, and moving a script's folder is not."""
        return cfg.model or " ".join(
            os.path.basename(arg) if os.sep in arg and not arg.startswith("-") else arg for arg in _argv(cfg)
        )

    @classmethod
    def from_config(cls, cfg: EmbeddingConfig) -> "CommandEmbedder":
        return cls(
            _argv(cfg),
            model=cls.default_model_for(cfg),
            timeout_s=cfg.timeout_s,
            dimensions=cfg.dimensions,
            batch_size=cfg.batch_size,
            query_cache_size=cfg.query_cache_size,
        )

    def __init__(self, command: list[str], *, model: str | None = None, timeout_s: float = 30.0, **kwargs: Any):
        if not command:
            raise ConfigError("the command embedding provider needs embedding.command (the program and its arguments)")
        super().__init__(model or os.path.basename(command[0]), **kwargs)
        self.command = list(command)
        self.timeout_s = timeout_s

    def _fail(self, cause: str) -> EmbeddingError:
        return EmbeddingError(" ".join(f"command embedding failed: {cause}".split()))

    def _embed_batch(self, texts: list[str], kind: Kind) -> list[list[float]]:
        program = os.path.basename(self.command[0])
        try:
            proc = subprocess.run(
                self.command,
                input=json.dumps({"texts": texts, "type": kind}),
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=self.timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise self._fail(f"{program} timed out after {self.timeout_s:g}s") from None
        except OSError as exc:
            raise self._fail(f"cannot run {program}: {exc.strerror or exc}") from None
        if proc.returncode != 0:
            lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
            detail = f": {lines[-1][:300]}" if lines else ""
            raise self._fail(f"{program} exited with status {proc.returncode}{detail}")
        try:
            out = json.loads(proc.stdout)
        except ValueError:
            shown = " ".join(proc.stdout.split())[:200] or "nothing"
            raise self._fail(f"{program} did not print JSON (got {shown!r})") from None
        vectors = out.get("embeddings") if isinstance(out, dict) else out
        if not isinstance(vectors, list) or not all(isinstance(v, list) and v for v in vectors):
            raise self._fail(f"{program} printed JSON that is neither a list of vectors nor {{\"embeddings\": [...]}}")
        if len(vectors) != len(texts):
            raise self._fail(f"expected {len(texts)} vectors from {program}, got {len(vectors)}")
        return vectors
