"""What the HTTP providers share: config resolution, one pooled client, a bounded retry of a busy
or failing server (429, 5xx; `Retry-After` honoured), and requests whose every failure (refused,
timeout, non-2xx, bad JSON, wrong shape) becomes a one-line `EmbeddingError` that names the
provider and the cause and never contains the API key."""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

import httpx

from .._time import retry_after_seconds
from ..config import EmbeddingConfig
from ..errors import ConfigError, EmbeddingError
from .base import Embedder

_MAX_DETAIL = 300
RETRIES = 2  # more attempts after the first, for an answer in RETRY_STATUSES
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
BACKOFF_S = 0.5  # the first wait when the server names none; doubled each time, with jitter
MAX_RETRY_AFTER_S = 10.0


class HTTPEmbedder(Embedder):
    """An embedder that talks JSON to an HTTP endpoint; subclasses build payloads and parse replies."""

    default_base_url: str = ""
    api_key_env: str | None = None  # read when `embedding.api_key` is unset
    api_key_required: bool = False
    label: str = ""  # how messages name the provider; defaults to `provider`

    @classmethod
    def from_config(cls, cfg: EmbeddingConfig) -> "HTTPEmbedder":
        model = cls.default_model_for(cfg)
        base_url = (cfg.base_url or cls.default_base_url).strip()
        if not base_url:
            raise ConfigError(f"the {cls.provider} embedding provider needs embedding.base_url")
        _check_base_url(base_url)
        api_key = cfg.api_key or (os.environ.get(cls.api_key_env) if cls.api_key_env else None) or None
        if cls.api_key_required and not api_key:
            raise ConfigError(
                f"the {cls.provider} embedding provider needs an API key: set {cls.api_key_env} or embedding.api_key"
            )
        return cls(
            model,
            base_url=base_url,
            api_key=api_key,
            timeout_s=cfg.timeout_s,
            requested_dimensions=cfg.dimensions,
            batch_size=cfg.batch_size,
            query_cache_size=cfg.query_cache_size,
        )

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        requested_dimensions: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(model, dimensions=requested_dimensions, **kwargs)
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s
        # Only an explicitly configured size is sent to APIs that can shorten vectors.
        self.requested_dimensions = requested_dimensions
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:  # no key, and no credentials or query from the URL either
        return f"{type(self).__name__}(model={self.model!r}, base_url={_where(self.base_url)!r})"

    @property
    def _label(self) -> str:
        return self.label or self.provider

    def _http(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout_s)
            return self._client

    def close(self) -> None:
        """Release pooled connections; the embedder reconnects if used again."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _scrub(self, text: str) -> str:
        """Remove the API key from text that may be shown (servers sometimes echo it back)."""
        return text.replace(self.api_key, "***") if self.api_key else text

    def _fail(self, cause: str) -> EmbeddingError:
        message = self._scrub(f"{self._label} embedding failed: {cause}")
        return EmbeddingError(" ".join(message.split()))  # one line, whatever the server sent

    def _request(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Send one request to `base_url + path` and return its decoded JSON body. A busy or failing
        server (429, 5xx) is asked again, at most `RETRIES` more times, after the wait its `Retry-After`
        asks for (up to `MAX_RETRY_AFTER_S`) or a short exponential backoff."""
        url = self.base_url + path
        for attempt in range(RETRIES + 1):
            response = self._send(method, url, payload, headers)
            wait = _retry_wait(response, attempt) if attempt < RETRIES else None
            if wait is None:
                break
            time.sleep(wait)
        if not response.is_success:
            detail = _server_message(response, self._scrub)
            tries = f" (after {attempt + 1} attempts)" if attempt else ""
            raise self._fail(f"HTTP {response.status_code} from {_where(url)}{tries}: {detail}")
        try:
            return response.json()
        except ValueError:
            text = _snippet(self._scrub(response.text)) or "empty body"
            raise self._fail(f"response from {_where(url)} is not valid JSON: {text!r}") from None

    def _send(self, method: str, url: str, payload: Any, headers: Mapping[str, str] | None) -> httpx.Response:
        try:
            return self._http().request(method, url, json=payload, headers=headers)
        except httpx.TimeoutException:
            raise self._fail(f"timed out after {self.timeout_s:g}s ({_where(url)})") from None
        except httpx.ConnectError as exc:
            raise self._fail(f"{_connect_cause(exc)} ({_where(url)})") from None
        except httpx.HTTPError as exc:
            raise self._fail(f"{type(exc).__name__}: {self._scrub(str(exc)) or 'request failed'} ({_where(url)})") from None
        except (httpx.InvalidURL, ValueError) as exc:  # a bad base_url, or a key that is not a valid header
            raise self._fail(f"invalid request to {_where(url)}: {self._scrub(str(exc))}") from None

    def _post(self, path: str, payload: Any, *, headers: Mapping[str, str] | None = None) -> Any:
        return self._request("POST", path, payload, headers=headers)

    def _vectors(self, vectors: Any, expected: int) -> list[list[float]]:
        """Check a decoded list of vectors: right count, each a non-empty list of numbers."""
        if not isinstance(vectors, list):
            raise self._fail(f"unexpected response: expected a list of vectors, got {type(vectors).__name__}")
        if len(vectors) != expected:
            raise self._fail(f"expected {expected} vectors, got {len(vectors)}")
        for vec in vectors:
            if not isinstance(vec, list) or not vec or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in vec
            ):
                raise self._fail("unexpected response: a vector is not a non-empty list of numbers")
        return vectors

    def _field(self, body: Any, key: str) -> Any:
        if not isinstance(body, dict) or key not in body:
            raise self._fail(f"unexpected response: no {key!r} field")
        return body[key]

    def _openai_data(self, body: Any, expected: int) -> list[list[float]]:
        """OpenAI-style `{"data": [{"index", "embedding"}]}` (also Voyage), put back in input order."""
        data = self._field(body, "data")
        if not isinstance(data, list) or not all(isinstance(d, dict) and "embedding" in d for d in data):
            raise self._fail("unexpected response: 'data' is not a list of embeddings")
        if all("index" in d for d in data):
            data = sorted(data, key=lambda d: d["index"])
        return self._vectors([d["embedding"] for d in data], expected)


def _retry_wait(response: httpx.Response, attempt: int) -> float | None:
    """Seconds to wait before asking again, or None when the answer stands (a success, a client
    error, or a server that asks for a longer wait than is worth holding a write for)."""
    if response.status_code not in RETRY_STATUSES:
        return None
    asked = response.headers.get("retry-after")
    if asked is None:
        return BACKOFF_S * 2**attempt * (0.5 + random.random() / 2)
    seconds = retry_after_seconds(asked)
    return seconds if seconds is not None and seconds <= MAX_RETRY_AFTER_S else None


def _check_base_url(base_url: str) -> None:
    """Refuse at startup what would otherwise fail on every call with a confusing message."""
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
        httpx.URL(base_url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except (httpx.InvalidURL, ValueError):
        ok = False
    if not ok:
        raise ConfigError(f"embedding.base_url must be an http:// or https:// URL, got {base_url!r}")


def _where(url: str) -> str:
    """scheme://host[:port]/path of a URL, without query or credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def _connect_cause(exc: httpx.ConnectError) -> str:
    text = str(exc)
    if "refused" in text.lower():
        return "Connection refused"
    # "[Errno -2] Name or service not known" -> "cannot connect: Name or service not known"
    if text.startswith("[Errno") and "]" in text:
        text = text.split("]", 1)[1].strip()
    return f"cannot connect: {text or 'connection failed'}"


def _server_message(response: httpx.Response, scrub: Callable[[str], str]) -> str:
    """The error text a server put in its body, in the shapes the providers use (scrubbed, then cut)."""
    try:
        body = response.json()
    except ValueError:
        return _snippet(scrub(response.text)) or response.reason_phrase or "no message"
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):  # OpenAI {"error": {"message"}}, Gemini {"error": {"message", "status"}}
            err = err.get("message") or err.get("status") or err
        if isinstance(err, list) and err and isinstance(err[0], dict):  # FastAPI validation detail
            err = err[0].get("msg", err[0])
        if err is not None:
            return _snippet(scrub(str(err)))
    return _snippet(scrub(response.text))


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"
