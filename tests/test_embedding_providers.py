"""The remote and external embedding providers, against real sockets and real subprocesses.

Each test starts a stub server (tests/embedding_stub_server.py) on a free 127.0.0.1 port and
drives the providers through `create_embedder`, as the rest of clawrecall does.
"""

from __future__ import annotations

import os
import socket
import sys
import textwrap

import numpy as np
import pytest
from embedding_stub_server import StubEmbeddingServer, fake_embed

from clawrecall import Memory
from clawrecall.config import EmbeddingConfig
from clawrecall.embeddings import configured_model, create_embedder
from clawrecall.errors import ConfigError, EmbeddingError, ValidationError

SECRET = "sk-test-SECRET-0123456789"
TEXTS = ["alpha bravo", "charlie delta echo", "foxtrot", "golf hotel india juliet", "kilo lima"]


@pytest.fixture
def stub():
    server = StubEmbeddingServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _no_provider_keys(monkeypatch):
    for name in ("OPENAI_API_KEY", "VOYAGE_API_KEY", "GEMINI_API_KEY", "ZAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def unit(vec: list[float]) -> np.ndarray:
    arr = np.asarray(vec, dtype=np.float32)
    return arr / np.linalg.norm(arr)


def compat(stub: StubEmbeddingServer, **kw) -> EmbeddingConfig:
    kw.setdefault("model", "stub-embed")
    kw.setdefault("api_key", SECRET)
    return EmbeddingConfig(provider="openai-compatible", base_url=stub.url + "/v1", **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the happy paths, one per wire format ---------------------------------------------------


def test_openai_compatible_returns_normalised_vectors_in_input_order(stub):
    emb = create_embedder(compat(stub))
    out = emb.embed(TEXTS, kind="passage")  # the stub answers `data` in reverse order
    assert out.shape == (len(TEXTS), 8)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    for text, vec in zip(TEXTS, out):
        assert np.allclose(vec, unit(fake_embed(text)), atol=1e-5)
    (req,) = stub.posts()
    assert req.path == "/v1/embeddings"
    assert req.body == {"model": "stub-embed", "input": TEXTS}
    assert req.headers["authorization"] == f"Bearer {SECRET}"
    assert emb.fingerprint.provider == "openai-compatible"
    assert (emb.fingerprint.model, emb.fingerprint.dimensions) == ("stub-embed", 8)


def test_openai_compatible_key_is_optional_and_read_from_env(stub, monkeypatch):
    create_embedder(compat(stub, api_key=None)).embed(["no key"])
    assert "authorization" not in stub.posts()[-1].headers
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    create_embedder(compat(stub, api_key=None)).embed(["env key"])
    assert stub.posts()[-1].headers["authorization"] == "Bearer sk-from-env"


def test_openai_reads_env_key_and_sends_dimensions_for_text_embedding_3(stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-openai")
    emb = create_embedder(EmbeddingConfig(provider="openai", base_url=stub.url + "/v1", dimensions=8))
    assert emb.model == "text-embedding-3-small"
    emb.embed(["one", "two"])
    (req,) = stub.posts()
    assert req.body == {"model": "text-embedding-3-small", "input": ["one", "two"], "dimensions": 8}
    assert req.headers["authorization"] == "Bearer sk-env-openai"


def test_zai_sends_embedding_3_its_size_and_the_key_from_zai_api_key(stub, monkeypatch):
    monkeypatch.setenv("ZAI_API_KEY", "zai-env-key")
    emb = create_embedder(EmbeddingConfig(provider="zai", base_url=stub.url + "/api/paas/v4"))
    assert (emb.model, emb.dimensions) == ("embedding-3", 1024)
    out = emb.embed(TEXTS[:2])
    assert out.shape == (2, 1024) and np.allclose(out[0], unit(fake_embed(TEXTS[0], 1024)), atol=1e-5)
    (req,) = stub.posts()
    assert req.path == "/api/paas/v4/embeddings"
    assert req.body == {"model": "embedding-3", "input": TEXTS[:2], "dimensions": 1024}
    assert req.headers["authorization"] == "Bearer zai-env-key"
    # another size is asked for by name; embedding-2, which has one size, is sent none
    create_embedder(EmbeddingConfig(provider="zai", base_url=stub.url, api_key=SECRET, dimensions=256)).embed(["x"])
    create_embedder(EmbeddingConfig(provider="zai", base_url=stub.url, api_key=SECRET, model="embedding-2",
                                    dimensions=8)).embed(["x"])
    assert [r.body.get("dimensions") for r in stub.posts()[1:]] == [256, None]
    assert configured_model(EmbeddingConfig(provider="zai")) == "embedding-3"


def test_zai_defaults_to_z_ai_and_needs_a_key():
    with pytest.raises(ConfigError, match="the zai embedding provider needs an API key: set ZAI_API_KEY"):
        create_embedder(EmbeddingConfig(provider="zai"))
    emb = create_embedder(EmbeddingConfig(provider="zai", api_key=SECRET))
    assert emb.base_url == "https://api.z.ai/api/paas/v4" and SECRET not in repr(emb)


def test_zai_errors_name_z_ai_without_the_key(stub):
    stub.mode = "error500"
    with pytest.raises(EmbeddingError, match=r"^Z\.AI embedding failed: HTTP 500") as info:
        create_embedder(EmbeddingConfig(provider="zai", base_url=stub.url, api_key=SECRET)).embed(["x"])
    assert SECRET not in str(info.value)


def test_openai_compatible_prefixes_e5_models(stub):
    emb = create_embedder(compat(stub, model="intfloat/e5-small-v2", dimensions=8))
    emb.embed(["what is x"], kind="query")
    emb.embed(["x is y"], kind="passage")
    assert [r.body["input"] for r in stub.posts()] == [["query: what is x"], ["passage: x is y"]]


def test_ollama(stub):
    emb = create_embedder(EmbeddingConfig(provider="ollama", base_url=stub.url, model="stub-embed"))
    out = emb.embed(TEXTS[:3])
    assert np.allclose(out, np.stack([unit(fake_embed(t)) for t in TEXTS[:3]]), atol=1e-5)
    (req,) = stub.posts()
    assert (req.path, req.body) == ("/api/embed", {"model": "stub-embed", "input": TEXTS[:3]})
    assert configured_model(EmbeddingConfig(provider="ollama")) == "nomic-embed-text"


def test_voyage_sends_input_type_and_key(stub):
    emb = create_embedder(EmbeddingConfig(provider="voyage", base_url=stub.url + "/v1", api_key=SECRET, dimensions=8))
    out = emb.embed(TEXTS[:2], kind="passage")
    emb.embed_one("a question", kind="query")
    assert np.allclose(out[1], unit(fake_embed(TEXTS[1])), atol=1e-5)
    doc, query = stub.posts()
    assert doc.body == {"input": TEXTS[:2], "model": "voyage-3", "input_type": "document"}
    assert query.body["input_type"] == "query"
    assert doc.headers["authorization"] == f"Bearer {SECRET}"


def test_gemini_sends_task_types_and_key_header(stub, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    emb = create_embedder(EmbeddingConfig(provider="gemini", base_url=stub.url + "/v1beta", dimensions=8))
    out = emb.embed(TEXTS[:3])
    emb.embed_one("a question")
    assert np.allclose(out, np.stack([unit(fake_embed(t)) for t in TEXTS[:3]]), atol=1e-5)
    doc, query = stub.posts()
    assert doc.path == "/v1beta/models/text-embedding-004:batchEmbedContents"
    assert doc.headers["x-goog-api-key"] == SECRET
    first = doc.body["requests"][0]
    assert first["model"] == "models/text-embedding-004"
    assert first["content"] == {"parts": [{"text": TEXTS[0]}]}
    assert first["taskType"] == "RETRIEVAL_DOCUMENT"
    assert query.body["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
    assert not any(SECRET in r.path for r in stub.requests)  # never in the URL


def test_e5_sends_type_without_prefixing_and_reports_health(stub):
    emb = create_embedder(EmbeddingConfig(provider="e5", base_url=stub.url, dimensions=8))
    assert emb.model == "multilingual-e5-large"
    emb.embed(["stored fact"], kind="passage")
    emb.embed_one("a question", kind="query")
    passage, query = stub.posts()
    assert passage.path == "/batch"
    assert passage.body == {"texts": ["stored fact"], "type": "passage"}
    assert query.body == {"texts": ["a question"], "type": "query"}  # the server adds the prefixes
    assert emb.health() == {"status": "ok", "model": "intfloat/multilingual-e5-large", "dimension": 8}


def test_e5_refuses_a_server_that_embeds_with_another_model(stub):
    """The seed's E5 server picks the model itself: vectors of another model must not be stored under this one's name."""
    stub.model = "sentence-transformers/all-MiniLM-L6-v2"
    emb = create_embedder(EmbeddingConfig(provider="e5", base_url=stub.url, dimensions=8))
    with pytest.raises(EmbeddingError, match="embeds with sentence-transformers/all-MiniLM-L6-v2, not multilingual-e5-large"):
        emb.embed(["stored fact"])
    assert stub.posts() == []  # nothing embedded
    named = create_embedder(EmbeddingConfig(provider="e5", base_url=stub.url, model="all-MiniLM-L6-v2", dimensions=8))
    assert named.embed(["stored fact"]).shape == (1, 8)


# --- what the base class adds, seen on the wire ---------------------------------------------


def test_batches_are_split_by_batch_size(stub):
    emb = create_embedder(compat(stub, batch_size=2))
    out = emb.embed(TEXTS)
    assert [len(r.body["input"]) for r in stub.posts()] == [2, 2, 1]
    assert np.allclose(out, np.stack([unit(fake_embed(t)) for t in TEXTS]), atol=1e-5)


def test_a_remote_stream_calls_the_provider_only_as_it_is_read(stub):
    emb = create_embedder(compat(stub, batch_size=2))
    stream = emb.stream(["a", "b", "c"])
    assert stub.posts() == []
    positions, vectors = next(stream)
    assert positions == [0, 1] and vectors.shape == (2, 8) and len(stub.posts()) == 1
    stream.close()
    assert len(stub.posts()) == 1


def test_a_batch_that_fails_validation_never_reaches_a_remote_provider(stub, tmp_path):
    embedding = {"provider": "openai-compatible", "base_url": stub.url + "/v1", "model": "stub-embed", "dimensions": 8}
    with Memory.open(tmp_path / "remote.db", embedding=embedding) as mem:
        with pytest.raises(ValidationError, match="item 2: unknown category"):
            mem.add_many([{"content": "fine"}, {"content": "also fine", "category": "nope"}])
        assert stub.posts() == [] and mem.count() == 0
        assert [r.action for r in mem.add_many([{"content": "fine"}, {"content": "also fine"}])] == ["created"] * 2
        assert len(stub.posts()) == 1


def test_query_cache_avoids_a_second_request(stub):
    emb = create_embedder(compat(stub))
    first = emb.embed_one("where is the key?", kind="query")
    second = emb.embed_one("where is the key?", kind="query")
    assert len(stub.posts()) == 1
    assert np.array_equal(first, second)
    emb.embed(["where is the key?", "new question"], kind="query")
    assert stub.posts()[-1].body["input"] == ["new question"]  # only the miss is fetched
    emb.embed(["a passage"], kind="passage")
    emb.embed(["a passage"], kind="passage")
    assert len(stub.posts()) == 4  # passages are not cached


def test_query_ms_is_what_queries_not_cached_took_lately_and_nothing_for_a_cached_one(stub, monkeypatch):
    """A search runs its keyword legs beside a query embedding worth waiting for (`Embedder.query_ms`)."""
    from clawrecall.embeddings import base

    clock = iter([0.0, 0.010, 1.0, 1.030, 2.0, 2.005])  # embeddings of 10 ms, then 30 ms, then 5 ms
    monkeypatch.setattr(base, "perf_counter", lambda: next(clock))
    emb = create_embedder(compat(stub))
    assert emb.query_ms(["where is the key?"]) == 0.0  # nothing measured yet
    emb.embed_one("where is the key?", kind="query")
    assert emb.query_ms(["where is the key?"]) == 0.0  # cached: nothing to wait for
    assert emb.query_ms(["new question"]) == pytest.approx(10.0)
    emb.embed_one("new question", kind="query")
    assert emb.query_ms(["another"]) == pytest.approx(0.8 * 10 + 0.2 * 30)  # a moving average
    uncached = create_embedder(compat(stub, query_cache_size=0))
    uncached.embed_one("where is the key?", kind="query")  # measured without a cache too
    assert uncached.query_ms(["where is the key?"]) == pytest.approx(5.0)


def test_dimension_change_between_calls_is_an_error(stub):
    emb = create_embedder(compat(stub))
    emb.embed(["first"])
    stub.dim = 12
    with pytest.raises(EmbeddingError, match="returned 12-dimensional vectors, expected 8"):
        emb.embed(["second"])


# --- failures: one EmbeddingError, one line, no key -----------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("error500", "HTTP 500 from http://127.0.0.1:"),
        ("error500_text", "HTTP 500 from http://127.0.0.1:"),
        ("badjson", "is not valid JSON"),
        ("short", "expected 3 vectors, got 2"),
    ],
)
@pytest.mark.parametrize("provider", ["openai-compatible", "voyage", "gemini", "ollama", "e5"])
def test_bad_responses_raise_embedding_error_without_the_key(stub, provider, mode, expected):
    base = {"openai-compatible": "/v1", "voyage": "/v1", "gemini": "/v1beta"}.get(provider, "")
    cfg = EmbeddingConfig(provider=provider, base_url=stub.url + base, model="stub-embed", api_key=SECRET)
    emb = create_embedder(cfg)
    stub.model = "stub-embed"
    stub.mode = mode
    with pytest.raises(EmbeddingError) as info:
        emb.embed(TEXTS[:3])
    message = str(info.value)
    label = "E5" if provider == "e5" else provider
    assert message.startswith(f"{label} embedding failed: ")
    assert expected in message
    assert "\n" not in message
    assert SECRET not in message
    if mode == "error500":
        assert "model crashed while serving" in message  # the server's own words are kept
    if mode == "error500_text":
        assert "upstream exploded stack trace line 2" in message


def test_connection_refused_e5_message():
    emb = create_embedder(EmbeddingConfig(provider="e5", base_url=f"http://127.0.0.1:{free_port()}"))
    with pytest.raises(EmbeddingError) as info:
        emb.embed(["hello"])
    assert str(info.value).startswith("E5 embedding failed: Connection refused")


def test_connection_refused_does_not_leak_key():
    cfg = EmbeddingConfig(
        provider="openai-compatible", base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", api_key=SECRET
    )
    with pytest.raises(EmbeddingError, match="openai-compatible embedding failed: Connection refused") as info:
        create_embedder(cfg).embed(["hello"])
    assert SECRET not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_timeout_is_an_embedding_error(stub):
    stub.mode, stub.slow_s = "slow", 1.0
    emb = create_embedder(compat(stub, timeout_s=0.2))
    with pytest.raises(EmbeddingError, match=r"openai-compatible embedding failed: timed out after 0.2s"):
        emb.embed(["slow"])


# --- configuration errors, at construction time ---------------------------------------------


@pytest.mark.parametrize(
    ("provider", "env"), [("openai", "OPENAI_API_KEY"), ("voyage", "VOYAGE_API_KEY"), ("gemini", "GEMINI_API_KEY")]
)
def test_missing_api_key_is_a_config_error(provider, env):
    with pytest.raises(ConfigError, match=env):
        create_embedder(EmbeddingConfig(provider=provider))


def test_openai_compatible_requires_base_url_and_model():
    with pytest.raises(ConfigError, match="base_url"):
        create_embedder(EmbeddingConfig(provider="openai-compatible", model="m"))
    with pytest.raises(ConfigError, match="model"):
        create_embedder(EmbeddingConfig(provider="openai-compatible", base_url="http://127.0.0.1:1/v1"))


@pytest.mark.parametrize("url", ["localhost:8765", "ftp://host/v1", "http://", "http://host:99999"])
def test_malformed_base_url_is_a_config_error(url):
    with pytest.raises(ConfigError, match="base_url must be an http"):
        create_embedder(EmbeddingConfig(provider="ollama", base_url=url))


def test_repr_does_not_show_the_key(stub):
    assert SECRET not in repr(create_embedder(compat(stub)))


# --- the command provider --------------------------------------------------------------------

SCRIPT = """
import hashlib, json, sys
req = json.load(sys.stdin)
def vec(t):
    v = [0.25, 0, 0, 0]
    for tok in t.split():
        v[int(hashlib.md5(tok.encode()).hexdigest(), 16) % 4] += 1
    return v
vectors = [vec(req["type"] + " " + t) for t in req["texts"]]
print(json.dumps({WRAP}))
"""


def write_script(tmp_path, body: str, name: str = "embed.py") -> list[str]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


@pytest.mark.parametrize("wrap", ["vectors", '{"embeddings": vectors}'])
def test_command_provider_runs_the_program(tmp_path, wrap):
    argv = write_script(tmp_path, SCRIPT.replace("{WRAP}", wrap))
    emb = create_embedder(EmbeddingConfig(provider="command", command=argv, batch_size=2))
    out = emb.embed(["a b", "c d", "e"], kind="passage")
    assert out.shape == (3, 4)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    query = emb.embed_one("a b", kind="query")
    assert not np.allclose(query, out[0])  # the script saw `type` and embedded differently
    assert emb.model == emb.fingerprint.model == f"{os.path.basename(sys.executable)} embed.py"
    other_argv = write_script(tmp_path, SCRIPT.replace("{WRAP}", wrap), name="other.py")
    other = create_embedder(EmbeddingConfig(provider="command", command=other_argv))
    assert other.fingerprint.model == f"{os.path.basename(sys.executable)} other.py"  # another script, another model


def test_command_model_name_and_string_command(tmp_path):
    argv = write_script(tmp_path, SCRIPT.replace("{WRAP}", "vectors"))
    cfg = EmbeddingConfig(provider="command", command=" ".join(argv), model="my-embedder")
    emb = create_embedder(cfg)
    assert emb.model == "my-embedder"
    assert emb.embed(["x"]).shape == (1, 4)


def test_command_failure_reports_last_stderr_line(tmp_path):
    argv = write_script(
        tmp_path,
        """
        import sys
        sys.stdin.read()
        print("loading model...", file=sys.stderr)
        print("RuntimeError: weights not found", file=sys.stderr)
        sys.exit(3)
        """,
    )
    emb = create_embedder(EmbeddingConfig(provider="command", command=argv))
    with pytest.raises(EmbeddingError) as info:
        emb.embed(["x"])
    message = str(info.value)
    assert message.startswith("command embedding failed: ")
    assert "exited with status 3: RuntimeError: weights not found" in message
    assert "loading model" not in message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("import sys; sys.stdin.read(); print('not json')", "did not print JSON"),
        ("import sys; sys.stdin.read(); print('[[1, 2]]')", "expected 2 vectors"),
        ("import sys; sys.stdin.read(); print('{\"vectors\": []}')", "neither a list of vectors"),
    ],
)
def test_command_bad_output(tmp_path, body, expected):
    emb = create_embedder(EmbeddingConfig(provider="command", command=write_script(tmp_path, body)))
    with pytest.raises(EmbeddingError, match=expected):
        emb.embed(["x", "y"])


def test_command_missing_program_and_missing_command(tmp_path):
    emb = create_embedder(EmbeddingConfig(provider="command", command=[str(tmp_path / "nope")]))
    with pytest.raises(EmbeddingError, match="command embedding failed: cannot run nope"):
        emb.embed(["x"])
    with pytest.raises(ConfigError, match="embedding.command"):
        create_embedder(EmbeddingConfig(provider="command"))


def test_command_timeout(tmp_path):
    argv = write_script(tmp_path, "import time; time.sleep(5)")
    emb = create_embedder(EmbeddingConfig(provider="command", command=argv, timeout_s=0.3))
    with pytest.raises(EmbeddingError, match="timed out after 0.3s"):
        emb.embed(["x"])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0])
def test_vectors_that_are_not_finite_or_all_zero_are_refused_never_stored(tmp_path, monkeypatch, bad):
    """A provider answering NaN, infinity or all-zero vectors: such a vector is never stored (once stored, it
    broke every later search of its scope). The add fails with EmbeddingError, or with `writes.embed_later`
    (the default) keeps the memory without a vector; a vector search fails, a hybrid one matches words only."""
    from clawrecall import EmbeddingError

    with Memory.open(tmp_path / "bad.db") as mem:
        mem.add("a memory from before the provider broke")
        dims = mem.upkeep.embedder.dimensions
        monkeypatch.setattr(type(mem.upkeep.embedder), "_embed_batch",
                            lambda self, texts, kind: np.full((len(texts), dims), bad, dtype=np.float32))
        with pytest.raises(EmbeddingError, match="not finite or are all zero"):
            mem.add("a memory the provider cannot embed", embed_later=False)
        assert [m.content for m in mem.list()] == ["a memory from before the provider broke"]
        kept = mem.add("a memory kept until the provider answers")
        assert mem._store.vectors([kept.id]) == {}  # no garbage stored
        with pytest.raises(EmbeddingError, match="not finite or are all zero"):
            mem.search("a query the provider cannot embed either", mode="vector")
        assert "not finite or are all zero" in mem.search("a query the provider cannot embed either").without_vectors


def test_a_busy_or_failing_server_is_asked_again_within_bounds(stub, monkeypatch):
    """429 and 5xx are retried (at most twice more), after the server's Retry-After or a short backoff;
    a Retry-After longer than is worth holding a write for, and a client error, are not retried."""
    from clawrecall.embeddings import _http

    waits: list[float] = []
    monkeypatch.setattr(_http.time, "sleep", waits.append)
    emb = create_embedder(EmbeddingConfig(provider="ollama", base_url=stub.url, model="stub-embed"))

    stub.failures = [(429, "2"), (503, None)]
    assert emb.embed(["busy"]).shape == (1, 8)
    assert len(stub.posts()) == 3 and waits[0] == 2.0 and 0.5 <= waits[1] <= 1.0  # the second try: 0.5 s × 2, jittered

    stub.requests.clear()
    stub.failures = [(500, None)] * 3
    with pytest.raises(EmbeddingError, match=r"HTTP 500 from .* \(after 3 attempts\)"):
        emb.embed(["down"])
    assert len(stub.posts()) == 3

    for status, retry_after in ((429, "3600"), (400, None)):
        stub.requests.clear()
        stub.failures = [(status, retry_after)]
        with pytest.raises(EmbeddingError, match=f"HTTP {status} from"):
            emb.embed([f"no retry {status}"])
        assert len(stub.posts()) == 1
