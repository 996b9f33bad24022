"""The REST door against a real `clawrecall serve` process (uvicorn on a free loopback port), driven with httpx.

One server per module, with tokens for alice (bound to user alice, agent main), bob, and a
trusted service. Memories are seeded over HTTP as each of them.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from clawrecall import Memory
from live_server import db, home, server  # noqa: F401 (fixtures)

from clawrecall._time import utcnow
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.server import create_app

ALICE_PREF = "Alice prefers dark mode in every code editor"
BOB_SECRET = "Bob keeps his bank PIN 4921 in a note titled zebra-lantern"
GLOBAL_FACT = "The team deploys the API to a Kubernetes cluster in Frankfurt"


@pytest.fixture(scope="module")
def tokens(db) -> dict[str, str]:
    store = TokenStore(db)
    made = {
        "alice": store.create(user_id="alice", agent_id="main")[1],
        "bob": store.create(user_id="bob")[1],
        "service": store.create(kind="service", name="plugin")[1],
    }
    store.close()
    return made


def client(server, token: str | None = None, **headers: str) -> httpx.Client:
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=server.url, headers=headers, timeout=60)


@pytest.fixture(scope="module")
def alice(server, tokens):
    with client(server, tokens["alice"]) as c:
        yield c


@pytest.fixture(scope="module")
def bob(server, tokens):
    with client(server, tokens["bob"]) as c:
        yield c


@pytest.fixture(scope="module")
def seeded(alice, bob, server, tokens) -> dict[str, str]:
    """Ids of alice's, bob's and a global memory, all three and a half days old."""
    when = (utcnow() - timedelta(days=3, hours=12)).isoformat()
    with client(server, tokens["service"]) as admin:
        made = {
            "alice": alice.post(
                "/v1/memories", json={"content": ALICE_PREF, "category": "preference", "created_at": when}
            ),
            "bob": bob.post("/v1/memories", json={"content": BOB_SECRET, "category": "fact", "created_at": when}),
            "global": admin.post("/v1/memories", json={"content": GLOBAL_FACT, "scope": "global", "created_at": when}),
        }
    assert all(r.status_code == 201 for r in made.values()), [r.text for r in made.values()]
    return {who: r.json()["id"] for who, r in made.items()}


def error_code(response: httpx.Response) -> str:
    return response.json()["error"]["code"]


# -- the server ---------------------------------------------------------------------------------
def test_health_is_public_and_answers_like_the_e5_server(server):
    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "ok" and health["model"] == "hashed-word-trigrams" and health["dimension"] == 384
    assert health["provider"] == "hash" and health["store"]["backend"] == "sqlite" and health["writes"] is True


def test_connections_to_the_server_send_without_waiting_for_a_delayed_ack():
    """Nagle off on the server's connections: with it on, the body of each response on a kept-alive
    connection waited ~40 ms for the client's delayed ACK of the headers, sent in a write of their own.
    asyncio turns Nagle off only on connections accepted from a socket that says it is TCP, as
    `listen` (what `serve` hands uvicorn) makes it."""
    from clawrecall.server.app import listen

    async def accept_one() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        sock = listen("127.0.0.1", 0)
        async with await asyncio.start_server(connected, sock=sock):
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            try:
                return await asyncio.wait_for(accepted, 30)
            finally:
                writer.close()

    assert asyncio.run(accept_one()) != 0


def test_serve_says_where_it_listens_in_one_line_for_people(server):
    lines = [line for line in server.log().splitlines() if not line.startswith("{")]
    assert len(lines) == 1 and lines[0].startswith("clawrecall serving ") and f" at {server.url} " in lines[0], lines


def test_logs_are_json_lines(server, alice, seeded):
    alice.get("/v1/stats", headers={"X-Clawrecall-Session": "log-check"})
    deadline = time.monotonic() + 30  # the access line is written once the response is sent
    while not any(r.get("path") == "/v1/stats" for r in server.records()) and time.monotonic() < deadline:
        time.sleep(0.05)
    records = server.records()
    assert any(r["logger"] == "clawrecall.access" and r["path"] == "/v1/stats" and r["user"] == "alice" for r in records)
    assert all({"ts", "level", "logger", "msg"} <= r.keys() for r in records)
    complete = [line for line in server.log().splitlines(keepends=True) if line.endswith("\n")]
    people = [line for line in complete if line.startswith("clawrecall serving ")]  # on stdout (the log merges both)
    assert len(people) == 1 and len(complete) >= len(records) + 1
    assert all(line.startswith("{") for line in complete if line not in people)  # logs: nothing but JSON


def test_every_request_needs_a_valid_token(server):
    for headers in ({}, {"Authorization": "Bearer cr_nope_nope"}, {"Authorization": "Basic YWxpY2U6eA=="}):
        response = httpx.get(f"{server.url}/v1/stats", headers=headers)
        assert response.status_code == 401 and error_code(response) == "unauthenticated"
        assert response.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{server.url}/openapi.json").status_code == 200


# -- memories --------------------------------------------------------------------------------
def test_memories_crud_with_history(alice):
    created = alice.post("/v1/memories", json={"content": "Alice's standup is at 9:30", "tags": ["schedule"]})
    assert created.status_code == 201 and created.json()["action"] == "created"
    memory_id = created.json()["id"]
    assert created.json()["memory"]["scope"] == "user:alice" and created.json()["memory"]["agent_id"] == "main"
    duplicate = alice.post("/v1/memories", json={"content": "Alice's standup is at 9:30"})
    assert duplicate.status_code == 200 and duplicate.json()["existing_id"] == memory_id

    assert alice.get(f"/v1/memories/{memory_id[:8]}").json()["content"] == "Alice's standup is at 9:30"
    change = {"content": "Alice's standup is at 10:00", "importance": 0.9}
    patched = alice.patch(f"/v1/memories/{memory_id}", json=change)
    assert patched.json()["content"] == "Alice's standup is at 10:00" and patched.json()["importance"] == 0.9
    assert alice.delete(f"/v1/memories/{memory_id}").json()["deleted_at"] is not None
    listed = alice.get("/v1/memories", params={"only_deleted": True}).json()["memories"]
    assert [m["id"] for m in listed] == [memory_id]
    assert alice.post(f"/v1/memories/{memory_id}/undelete").json()["deleted_at"] is None
    history = alice.get(f"/v1/memories/{memory_id}/history").json()["history"]
    assert [h["action"] for h in history] == ["add", "update", "delete", "undelete"]
    assert history[1]["before"]["content"] == "Alice's standup is at 9:30"

    assert alice.delete(f"/v1/memories/{memory_id}", params={"hard": True}).json() == {"forgotten": memory_id}
    gone = alice.get(f"/v1/memories/{memory_id}")
    assert gone.status_code == 404 and error_code(gone) == "not_found"


def test_errors_are_json_with_stable_codes(alice, seeded):
    cases = [
        (alice.get("/v1/memories/not-an-id!"), 404, "not_found"),  # a path that names nothing
        (alice.get(f"/v1/memories/{uuid.uuid4()}"), 404, "not_found"),
        (alice.post("/v1/memories", json={"content": "x", "scope": "user:bob"}), 403, "scope_denied"),
        (alice.post("/v1/memories", json={"content": "x", "category": "nonsense"}), 400, "invalid_input"),
        (alice.post("/v1/memories", json={"title": "no content"}), 422, "invalid_request"),
        (alice.post("/v1/memories", json={"content": "x", "user_id": "bob"}), 422, "invalid_request"),
        (alice.post("/v1/search", json={"query": "x", "limit": 0}), 422, "invalid_request"),
        (alice.get("/v1/nowhere"), 404, "not_found"),
        (alice.put("/v1/stats"), 405, "method_not_allowed"),
        (alice.post("/v1/tools/memory_recall", content=b"{not json", headers={"Content-Type": "application/json"}), 400,
         "invalid_input"),
        (alice.post("/v1/tools/memory_recall", content=b"{not json"), 415, "unsupported_media_type"),
        (alice.post("/v1/tools/no_such_tool", json={}), 404, "unknown_tool"),
    ]
    for response, status, code in cases:
        assert (response.status_code, error_code(response)) == (status, code), response.text
        assert response.json()["error"]["message"]
    assert "use one of memory_recall" in cases[-1][0].json()["error"]["message"]  # as MCP names them


def test_oversized_bodies_get_413(alice, seeded):
    big = {"content": "x" * (1 << 20)}
    response = alice.post("/v1/memories", json=big)
    assert response.status_code == 413 and error_code(response) == "payload_too_large"
    assert alice.post("/mcp", content=b"z" * (2 << 20)).status_code == 413
    assert alice.get("/mcp", headers={"Accept": "text/event-stream"}, timeout=5).status_code == 405  # no stream to hang on
    routes = [
        ("POST", "/v1/memories"), ("PATCH", f"/v1/memories/{seeded['alice']}"), ("POST", "/v1/search"),
        ("POST", "/v1/context"), ("POST", "/v1/tools/memory_store"), ("POST", "/embed"), ("POST", "/batch"),
        *(("POST", f"/v1/hooks/{name}") for name in ("before_prompt_build", "startup", "agent_end")),
    ]
    for method, path in routes:  # chunked: no Content-Length, so the limit applies as the body arrives
        chunks = iter([b'{"content": "', b"y" * (1 << 20), b'"}'])
        streamed = alice.request(method, path, content=chunks)
        assert "content-length" not in streamed.request.headers, path
        assert (streamed.status_code, error_code(streamed)) == (413, "payload_too_large"), (path, streamed.text)
    assert alice.get(f"/v1/memories/{seeded['alice']}").json()["content"] == ALICE_PREF


def test_bodies_are_checked_never_coerced(alice):
    """As in the Python API, a value of the wrong JSON type is an error, not converted: no `true` importance."""
    refused = [
        ("POST", "/v1/memories", {"content": "x", "importance": True}),
        ("POST", "/v1/memories", {"content": "x", "importance": "0.5"}),
        ("POST", "/v1/memories", {"content": "x", "confidence": False}),
        ("POST", "/v1/memories", {"content": "x", "dedup": "yes"}),
        ("POST", "/v1/memories", {"content": "x", "tags": "schedule"}),
        ("POST", "/v1/memories", {"content": "x", "created_at": 1700000000}),
        ("POST", "/v1/memories", {"content": "x", "created_at": "last Tuesday"}),
        ("POST", "/v1/search", {"query": "x", "limit": "5"}),
        ("POST", "/v1/search", {"query": "x", "explain": 1}),
        ("POST", "/v1/context", {"query": "x", "limit": "5"}),
    ]
    made = alice.post("/v1/memories", json={"content": "Alice's retro is on Fridays", "importance": 1})
    assert made.status_code == 201 and made.json()["memory"]["importance"] == 1.0  # a JSON integer is a number
    memory_id = made.json()["id"]
    refused += [("PATCH", f"/v1/memories/{memory_id}", {"importance": "0.4"}),
                ("PATCH", f"/v1/memories/{memory_id}", {"importance": True})]
    for method, path, body in refused:
        response = alice.request(method, path, json=body)
        assert (response.status_code, error_code(response)) == (422, "invalid_request"), (body, response.text)
    assert "last Tuesday" in alice.post("/v1/memories", json=refused[6][2]).json()["error"]["message"]
    assert alice.get(f"/v1/memories/{memory_id}").json()["importance"] == 1.0

    when = (utcnow() - timedelta(days=2)).isoformat()
    kept = alice.post("/v1/memories", json={
        "content": "Alice's badge expires next spring", "importance": 0, "created_at": when,
        "expires_at": "2099-04-01T00:00:00Z", "visibility": "private", "dedup": False,
    })
    assert kept.status_code == 201, kept.text
    record = kept.json()["memory"]
    assert (record["importance"], record["visibility"], record["expires_at"]) == (0.0, "private", "2099-04-01T00:00:00Z")
    assert record["created_at"].startswith(when[:19])
    changed = alice.patch(f"/v1/memories/{memory_id}", json={"importance": 0, "visibility": "secret",
                                                               "expires_at": "2099-01-01"})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["importance"], changed.json()["visibility"]) == (0.0, "secret")
    found = alice.post("/v1/search", json={"query": "badge", "since": "2000-01-01T00:00:00+02:00", "limit": 5})
    assert found.status_code == 200 and found.json()["results"], found.text
    tool = alice.post("/v1/tools/memory_store", json={"content": "x", "importance": True}).json()
    assert tool["isError"] and tool["details"]["error"]["code"] == "invalid_input"


def test_search_is_absolute_and_takes_min_score(alice, seeded):
    nonsense = {"query": "quantum chromodynamics lattice gauge"}
    assert alice.post("/v1/search", json=nonsense).json()["results"] == []
    everything = alice.post("/v1/search", json={**nonsense, "min_score": 0}).json()["results"]
    assert everything and all(r["score"] < 0.1 for r in everything)
    assert alice.post("/v1/search", json={**nonsense, "min_score": 2}).status_code == 422
    assert alice.post("/v1/search", json={**nonsense, "min_score": True}).status_code == 422


def test_search_context_and_stats(alice, seeded):
    results = alice.post("/v1/search", json={"query": "dark mode code editor", "explain": True}).json()["results"]
    assert results[0]["memory"]["id"] == seeded["alice"] and results[0]["age"] == "3d ago"
    assert "legs" in results[0]["explain"]
    context = alice.post("/v1/context", json={"query": "where is the API deployed?"}).json()
    tool = alice.post("/v1/tools/search_context", json={"query": "where is the API deployed?"}).json()
    assert context == tool["details"]
    assert context["results"][0]["id"] == seeded["global"]
    assert alice.get("/v1/stats").json() == alice.post("/v1/tools/memory_stats", json={}).json()["details"]


# -- tools ---------------------------------------------------------------------------------------
def test_tools_are_listed_and_called_with_results_as_mcp_has_them(alice, seeded):
    listed = alice.get("/v1/tools").json()["tools"]
    assert len(listed) == 14 and all(t["inputSchema"]["type"] == "object" for t in listed)
    result = alice.post("/v1/tools/memory_recall", json={"query": "editor theme"}).json()
    assert result["isError"] is False and result["content"][0]["type"] == "text"
    assert result["details"]["memories"][0]["id"] == seeded["alice"]
    failed = alice.post("/v1/tools/memory_get", json={"id": str(uuid.uuid4())})
    assert failed.status_code == 200 and failed.json()["isError"]
    assert failed.json()["details"]["error"]["code"] == "not_found"
    spec = alice.get("/openapi.json").json()["paths"]["/v1/tools/memory_recall"]["post"]
    assert spec["requestBody"]["content"]["application/json"]["schema"]["required"] == ["query"]


# -- scopes ------------------------------------------------------------------------------------------
def test_alice_never_sees_bobs_memories_whatever_she_asks(alice, seeded):
    secret = seeded["bob"]
    shown = [
        alice.post("/v1/search", json={"query": "Bob bank PIN zebra-lantern", "limit": 100}),
        alice.get("/v1/memories", params={"limit": 1000, "include_deleted": True}),
        alice.post("/v1/context", json={"query": "Bob bank PIN zebra-lantern", "limit": 50}),
        alice.get("/v1/stats"),
        alice.post("/v1/tools/memory_recall", json={"query": "Bob bank PIN zebra-lantern", "limit": 50}),
        alice.post("/v1/tools/memory_search", json={"query": "Bob bank PIN zebra-lantern", "maxResults": 50}),
        alice.post("/v1/tools/memory_recall", json={"query": "Bob bank PIN", "user_id": "bob"}),
        alice.post("/v1/tools/memory_list", json={"scope": "user:bob"}),
        alice.post("/v1/hooks/before_prompt_build", json={"prompt": "what is Bob's bank PIN zebra-lantern?"}),
    ]
    for response in shown:
        assert response.status_code == 200 and secret not in response.text and "zebra" not in response.text
    for response in (
        alice.get(f"/v1/memories/{secret}"), alice.patch(f"/v1/memories/{secret}", json={"content": "hacked"}),
        alice.delete(f"/v1/memories/{secret}", params={"hard": True}), alice.get(f"/v1/memories/{secret}/history"),
    ):
        assert response.status_code == 404 and error_code(response) == "not_found"
    for response in (
        alice.get("/v1/memories", params={"scope": "user:bob"}),
        alice.post("/v1/search", json={"query": "PIN", "scope": ["user:bob"]}),
        alice.get("/v1/stats", headers={"X-Clawrecall-User": "bob"}),
        alice.post("/v1/tools/memory_recall", json={"query": "PIN"}, headers={"X-Clawrecall-User": "bob"}),
    ):
        assert response.status_code == 403 and error_code(response) in ("scope_denied", "forbidden")


def test_a_service_token_names_the_caller_per_request(server, tokens, seeded):
    with client(server, tokens["service"], **{"X-Clawrecall-User": "bob"}) as as_bob:
        hits = as_bob.post("/v1/tools/memory_recall", json={"query": "bank PIN"}).json()["details"]["memories"]
        assert hits[0]["id"] == seeded["bob"]
    with client(server, tokens["service"], **{"X-Clawrecall-User": "alice"}) as as_alice:
        assert seeded["bob"] not in as_alice.post("/v1/search", json={"query": "bank PIN", "limit": 50}).text
    with client(server, tokens["service"]) as admin:
        assert admin.get("/v1/stats").json()["by_scope"].keys() >= {"user:alice", "user:bob", "global"}
    with client(server, tokens["service"], **{"X-Clawrecall-User": "has space"}) as bad:
        assert error_code(bad.get("/v1/stats")) == "invalid_input"
    with client(server, tokens["service"], **{"X-Clawrecall-User": "%E5%B1%B1%E7%94%B0"}) as yamada:  # 山田
        stored = yamada.post("/v1/memories", json={"content": "山田さんは緑茶が好き"}).json()["memory"]
        assert (stored["user_id"], stored["scope"]) == ("山田", "user:山田")
    for broken in ("%FF", "%ZZ", "50%", ""):  # not UTF-8, not an escape, empty: never the administrator
        with client(server, tokens["service"], **{"X-Clawrecall-User": broken}) as sent:
            assert error_code(sent.get("/v1/stats")) == "invalid_input", broken


# -- hooks and embeddings ---------------------------------------------------------------------------
def test_hooks_run_as_the_authenticated_caller(alice, seeded):
    session = {"X-Clawrecall-Session": "rest-hooks"}
    recall = alice.post("/v1/hooks/before_prompt_build", json={"prompt": "Which theme should my code editor use?"},
                        headers=session).json()
    assert ALICE_PREF in recall["prependContext"] and recall["memories"][0]["id"] == seeded["alice"]
    startup = alice.post("/v1/hooks/startup", json={"model": "sonnet"}, headers=session).json()
    assert startup["prependContext"] is None and "reason" in startup
    captured = alice.post("/v1/hooks/agent_end", json={
        "success": True, "messages": [{"role": "user", "content": "Remember that I always deploy on Tuesdays"}],
    }).json()
    assert captured["queued"] == 1 and captured["candidates"][0]["text"] == "Remember that I always deploy on Tuesdays"
    assert error_code(alice.post("/v1/hooks/agent_end", json={"messages": "nope"})) == "invalid_request"


def test_e5_embedding_endpoints(alice):
    one = alice.post("/embed", json={"text": "Search this content", "type": "query"}).json()["embedding"]
    assert len(one) == 384 and abs(sum(x * x for x in one) - 1) < 1e-3
    many = alice.post("/batch", json={"texts": ["Text 1", "Text 2", "Search this content"]}).json()["embeddings"]
    assert len(many) == 3 and all(len(v) == 384 for v in many)
    assert max(abs(a - b) for a, b in zip(many[2], one)) < 1e-4  # no prefixes for a non-E5 model: same vector
    assert alice.post("/embed", json={"text": "x", "type": "document"}).status_code == 422
    assert alice.post("/batch", json={"texts": []}).status_code == 422
    assert len(alice.post("/batch", json={"texts": ["short"] * 256}).json()["embeddings"]) == 256
    assert alice.post("/batch", json={"texts": ["short"] * 257}).status_code == 422  # one request's work is bounded


# -- tokens and binding ----------------------------------------------------------------------------
def test_token_cli_create_list_revoke_against_the_running_server(server, db, seeded):
    runner = CliRunner()
    made = runner.invoke(cli, ["--db", str(db), "token", "create", "--user", "carol", "--name", "laptop", "--json"])
    assert made.exit_code == 0, made.output
    token = json.loads(made.output)
    assert token["token"].startswith("cr_") and token["scopes"] == ["global", "user:carol"]
    with client(server, token["token"]) as carol:
        assert carol.get("/v1/stats").status_code == 200
        listed = runner.invoke(cli, ["--db", str(db), "token", "list", "--json"])
        assert token["id"] in {t["id"] for t in json.loads(listed.output)}
        secret = token["token"].split("_", 2)[2].encode()
        assert secret not in listed.output.encode()
        assert not any(secret in f.read_bytes() for f in db.parent.glob("memory.db*"))  # stored hashed
        revoked = runner.invoke(cli, ["--db", str(db), "token", "revoke", token["id"]])
        assert revoked.exit_code == 0 and "Revoked" in revoked.output
        response = carol.get("/v1/stats")
        assert response.status_code == 401 and error_code(response) == "unauthenticated"
        again = runner.invoke(cli, ["--db", str(db), "token", "revoke", token["id"]])
        assert again.exit_code == 0 and again.output == f"Token {token['id']} was already revoked.\n"
    refused = runner.invoke(cli, ["--db", str(db), "token", "create", "--user", "carol", "--scope", "user:bob"])
    assert refused.exit_code == 1 and "scope 'user:bob'" in refused.output


@pytest.mark.parametrize("how", ["--host", "E5_HOST"])
def test_serve_refuses_a_public_address_without_tokens(tmp_path, how):
    """Given as `--host`, or as the E5 server's own E5_HOST variable (a user moving from it keeps its environment)."""
    args, env = (["--host", "0.0.0.0"], {}) if how == "--host" else ([], {"E5_HOST": "0.0.0.0"})
    result = subprocess.run(
        [sys.executable, "-m", "clawrecall.cli", "--db", str(tmp_path / "fresh.db"), "serve", *args],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "CLAWRECALL_HOME": str(tmp_path / "home"), **env},
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error: refusing to listen on 0.0.0.0 without API tokens: create one with `clawrecall token create`, "
        "or listen on 127.0.0.1"
    ]


def test_serve_on_a_taken_port_is_one_error_line_plain_or_json(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        base = [sys.executable, "-m", "clawrecall.cli", "--db", str(tmp_path / "fresh.db"), "serve", "--port", str(port)]
        env = {**os.environ, "CLAWRECALL_HOME": str(tmp_path / "home")}
        plain = subprocess.run(base, capture_output=True, text=True, timeout=120, env=env)
        as_json = subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert plain.returncode == 1 and plain.stdout == ""
    assert plain.stderr.strip().splitlines() == [f"Error: cannot listen on 127.0.0.1:{port}: Address already in use"]
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["message"] == f"cannot listen on 127.0.0.1:{port}: Address already in use"


def test_without_tokens_a_loopback_server_serves_the_local_user_only_at_loopback_names(tmp_path):
    """In process (no model needed): the no-token mode, and its guard against DNS rebinding."""
    with Memory.open(tmp_path / "anon.db", check_embedding=False) as mem:
        store = TokenStore.for_memory(mem)
        app = create_app(mem, tokens=store, allow_anonymous=True)
        local = TestClient(app, base_url="http://127.0.0.1:8765")
        assert local.get("/v1/stats").json()["active"] == 0
        assert local.get("/v1/memories", headers={"X-Clawrecall-User": "dave"}).status_code == 200
        rebound = TestClient(app, base_url="http://evil.example")
        assert error_code(rebound.get("/v1/stats")) == "forbidden"
        for host in ("[::1]evil.com", "[::1]:18802@evil.com", "127.0.0.1@evil.com", "localhost:80:80", ""):
            assert error_code(local.get("/v1/stats", headers={"Host": host})) == "forbidden", host
        for host in ("[::1]:8765", "LOCALHOST", "127.0.0.2:1"):
            assert local.get("/v1/stats", headers={"Host": host}).status_code == 200, host
        store.create(user_id="dave")
        assert error_code(local.get("/v1/stats")) == "unauthenticated"
        store.close()


def test_a_capture_with_text_the_store_cannot_keep_is_a_400(tmp_path):
    with Memory.open(tmp_path / "capture.db", check_embedding=False) as mem:
        local = TestClient(create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True),
                           base_url="http://127.0.0.1:8765")
        body = '{"messages": [{"role": "user", "content": "Remember that my name is \\ud800 Bob"}]}'
        answer = local.post("/v1/hooks/agent_end", content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 400 and error_code(answer) == "invalid_input"


def test_a_web_page_cannot_drive_a_tool_with_a_simple_request(tmp_path):
    """text/plain and form bodies need no CORS preflight, so any page could POST them to 127.0.0.1:
    a tool's arguments must be declared JSON."""
    with Memory.open(tmp_path / "csrf.db", check_embedding=False) as mem:
        kept = mem.add("Alice's locker code is 7731", dedup=False).id
        local = TestClient(create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True),
                           base_url="http://127.0.0.1:8765")
        for content_type, body in (("text/plain", f'{{"memoryId": "{kept}"}}'),
                                   ("application/x-www-form-urlencoded", f"memoryId={kept}"),
                                   ("multipart/form-data; boundary=x", "--x--")):
            answer = local.post("/v1/tools/memory_forget", content=body, headers={"Content-Type": content_type})
            assert answer.status_code == 415 and error_code(answer) == "unsupported_media_type", content_type
        assert mem.get(kept).id == kept
        assert local.post("/v1/tools/memory_stats", content=b"").status_code == 200  # no arguments, no body
        erased = local.post("/v1/tools/memory_forget", json={"memoryId": kept})
        assert erased.status_code == 200 and erased.json()["details"]["action"] == "deleted"


def test_a_token_reaches_memories_by_id_in_every_scope_it_allows_and_no_other(server, db, seeded, alice):
    store = TokenStore(db)
    secret = store.create(user_id="alice", scopes=["user:alice", "project:apollo"], name="apollo")[1]
    store.close()
    with client(server, secret) as apollo:
        made = apollo.post("/v1/memories", json={"content": "Apollo launch moved to May", "scope": "project:apollo"})
        assert made.status_code == 201, made.text
        memory_id = made.json()["id"]
        assert apollo.get(f"/v1/memories/{memory_id[:10]}").json()["scope"] == "project:apollo"
        changed = apollo.patch(f"/v1/memories/{memory_id}", json={"content": "Apollo launch moved to June"})
        assert changed.status_code == 200 and changed.json()["content"] == "Apollo launch moved to June"
        assert [e["action"] for e in apollo.get(f"/v1/memories/{memory_id}/history").json()["history"]] == ["add", "update"]
        assert apollo.delete(f"/v1/memories/{memory_id}").status_code == 200
        assert apollo.post(f"/v1/memories/{memory_id}/undelete").status_code == 200
        # the token's own user scope, but not the global memory it was never given, nor bob's
        assert apollo.get(f"/v1/memories/{seeded['alice']}").status_code == 200
        for other in (seeded["global"], seeded["bob"]):
            response = apollo.get(f"/v1/memories/{other}")
            assert response.status_code == 404 and error_code(response) == "not_found"
    # alice's default token does not list project:apollo, so the same id is "not found" to it
    assert alice.get(f"/v1/memories/{memory_id}").status_code == 404


def test_health_says_the_model_failed_without_saying_where_the_provider_lives(tmp_path):
    """`/health` needs no token, so a failed model load is reported there without the provider's URL."""
    import time

    with Memory.open(tmp_path / "down.db", embedding={"provider": "ollama", "base_url": "http://127.0.0.1:9/hidden"}) as mem:
        with TestClient(create_app(mem, tokens=TokenStore.for_memory(mem), allow_anonymous=True),
                        base_url="http://127.0.0.1:8765") as local:
            deadline = time.monotonic() + 20
            while (health := local.get("/health")).json()["status"] == "loading" and time.monotonic() < deadline:
                time.sleep(0.05)
    assert health.status_code == 503 and health.json()["status"] == "failed"
    assert "<provider URL>" in health.json()["error"] and "127.0.0.1:9" not in health.text and "hidden" not in health.text


def test_query_string_booleans_are_true_or_false(alice, seeded):
    assert alice.get("/v1/memories", params={"include_deleted": "true"}).status_code == 200
    for value in ("yes", "1", "on", "True"):
        answer = alice.get("/v1/memories", params={"include_deleted": value})
        assert answer.status_code == 422 and error_code(answer) == "invalid_request", value
    assert alice.delete(f"/v1/memories/{seeded['alice']}", params={"hard": "yse"}).status_code == 422
    assert alice.get(f"/v1/memories/{seeded['alice']}").json()["deleted_at"] is None  # nothing was deleted
