"""What every LLM client shares: the answer (`Completion`), the one retry loop, the concurrency cap and
rate limit, cost from the configured prices, and keeping the API key out of every text.

A provider module only builds its SDK request and reads the SDK's answer (`_call`); both official
SDKs (openai, anthropic) raise the same family of exceptions, which `_failure` sorts into "ask
again" and "give up" here, once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from .._time import retry_after_seconds
from ..config import LLMConfig
from ..errors import LLMError, LLMRefusedError, LLMUnavailableError

log = logging.getLogger("clawrecall.llm")

BACKOFF_BASE_S = 1.0  # the first backoff's ceiling when the server names no wait; doubled per attempt
BACKOFF_MAX_S = 30.0
_MAX_DETAIL = 300
NO_KEY = "unused"  # what a local server that checks no key is sent (each SDK insists on one)
_monotonic, _sleep = time.monotonic, time.sleep  # the rate limit's and the retries' clock


@dataclass(frozen=True)
class Completion:
    text: str  # the model's answer (JSON text when a schema was asked for)
    input_tokens: int
    output_tokens: int
    model: str  # what the provider says answered
    finish_reason: str | None
    refusal: str | None = None  # the provider's refusal text, when it refused


class _Retry(Exception):
    """An attempt failed in a way another attempt may not: `retry_after` is what the server asked for."""

    def __init__(self, cause: str, retry_after: float | None = None):
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after


class TokenBucket:
    """`rate` requests per second on average, at most one second's worth at once; shared by threads."""

    def __init__(self, rate: float):
        self.rate = rate
        self.capacity = max(1.0, rate)
        self._tokens = self.capacity
        self._stamp = _monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        """Block until a request may start."""
        while True:
            with self._lock:
                now = _monotonic()
                self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                wait = (1.0 - self._tokens) / self.rate
            _sleep(wait)


class LLM(ABC):
    """A chat model behind one provider's SDK. Thread-safe: one instance serves every worker thread,
    which is what makes its concurrency cap and rate limit mean something."""

    provider: str = ""
    default_key_env: str = ""
    backoff_base_s = BACKOFF_BASE_S
    backoff_max_s = BACKOFF_MAX_S

    def __init__(self, config: LLMConfig, api_key: str | None):
        self.config = config
        self.model = config.model or ""
        self.name = f"{self.provider}/{self.model}"
        self._key = api_key
        self._slots = threading.BoundedSemaphore(config.max_concurrency)
        self._bucket = TokenBucket(config.requests_per_minute / 60.0) if config.requests_per_minute else None

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.where!r})"

    @property
    def where(self) -> str:
        """The server's address without credentials or query, for messages."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host  # an IPv6 literal
        return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"

    @property
    @abstractmethod
    def base_url(self) -> str: ...

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        schema: dict | None = None,
        schema_name: str = "answer",
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Completion:
        """Ask the model. With `schema`, the answer is JSON text in the provider's structured-output
        mode where it has one; whether it is valid against the schema is the caller's to check.
        Raises `LLMUnavailableError` once the retries are spent, `LLMRefusedError`, or `LLMError`."""
        max_tokens = max_tokens or self.config.max_output_tokens
        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            try:
                completion = self._attempt(messages, schema, schema_name, max_tokens, temperature)
            except _Retry as failed:
                if attempt + 1 == attempts:
                    tries = f" (after {attempts} attempts)" if attempts > 1 else ""
                    raise LLMUnavailableError(
                        self._text(f"{self.name} is unavailable{tries}: {failed.cause}"), retry_after=failed.retry_after
                    ) from None
                wait = self._wait(attempt, failed.retry_after)
                log.warning("%s: %s; attempt %d of %d in %.1fs", self.name, self._text(failed.cause), attempt + 2, attempts, wait)
                _sleep(wait)
                continue
            log.debug("%s answered: %d tokens in, %d out", self.name, completion.input_tokens, completion.output_tokens)
            if completion.refusal is not None or completion.finish_reason == "content_filter":
                said = completion.refusal or "its content filter stopped the answer"
                raise LLMRefusedError(self._text(f"{self.name} refused: {said}"), completion=completion)
            return completion
        raise AssertionError("unreachable")  # pragma: no cover

    def cost(self, c: Completion) -> float | None:
        """US dollars from `llm.price_*_per_mtok`; None when the config prices nothing."""
        cin, cout = self.config.price_input_per_mtok, self.config.price_output_per_mtok
        if cin is None or cout is None:
            return None
        return (c.input_tokens * cin + c.output_tokens * cout) / 1_000_000

    def close(self) -> None:
        """Release the SDK client's connections."""

    # -- one attempt -----------------------------------------------------------------------------
    def _attempt(self, messages, schema, schema_name, max_tokens, temperature) -> Completion:
        """One request under the rate limit and the concurrency cap (a wait between attempts holds neither)."""
        if self._bucket is not None:
            self._bucket.take()
        with self._slots:
            try:
                return self._call(messages, schema, schema_name, max_tokens, temperature)
            except self._sdk.APIError as exc:  # every SDK failure is sorted here: none passes raw
                raise self._failure(exc) from None

    @abstractmethod
    def _call(self, messages, schema, schema_name, max_tokens, temperature) -> Completion:
        """Send one request through the SDK and read its answer."""

    @property
    @abstractmethod
    def _sdk(self) -> ModuleType:
        """The SDK module, whose exception classes `_failure` sorts."""

    def _failure(self, exc: Exception) -> Exception:
        """A `_Retry` for what may pass (connection, timeout, 429, 5xx), else an `LLMError`."""
        sdk = self._sdk
        if isinstance(exc, sdk.APITimeoutError):
            return _Retry(f"no answer within {self.config.timeout_s:g}s from {self.where}")
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            return _Retry(f"cannot connect to {self.where}: {_snippet(str(cause or exc))}")
        if isinstance(exc, sdk.APIStatusError):
            status = exc.status_code
            detail = _snippet(self._text(_server_message(exc)))
            if status == 429 or status >= 500:
                asked = retry_after_seconds(exc.response.headers.get("retry-after"))
                return _Retry(f"HTTP {status} from {self.where}: {detail}", asked)
            if status == 401:
                return LLMError(f"{self.name}: the API key was refused (HTTP 401 from {self.where}): {detail}")
            return LLMError(f"{self.name}: HTTP {status} from {self.where}: {detail}")
        return self._bad_answer(f"{type(exc).__name__}: {_snippet(str(exc))}")  # e.g. a body that is no completion

    def _wait(self, attempt: int, asked: float | None) -> float:
        """The server's Retry-After, capped; else exponential backoff with full jitter."""
        if asked is not None:
            return min(asked, self.config.max_retry_after_s)
        return random.uniform(0, min(self.backoff_max_s, self.backoff_base_s * 2**attempt))

    def _text(self, text: str) -> str:
        """One line, without the key (a server may echo it back)."""
        if self._key:
            text = text.replace(self._key, "***")
        return " ".join(text.split())

    def _bad_answer(self, what: str) -> LLMError:
        return LLMError(self._text(f"{self.name}: unexpected answer from {self.where}: {what}"))


def schema_instruction(schema: dict) -> str:
    """The schema in words, for a request whose mode cannot carry it (OpenAI's json_object, or none)."""
    import json

    return "Answer with one JSON object, and nothing else, that matches this JSON schema:\n" + json.dumps(schema)


def _server_message(exc: Any) -> str:
    """The message a server put in its error body (OpenAI's and Anthropic's shapes), else the SDK's."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(getattr(exc, "message", "") or exc)


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"
