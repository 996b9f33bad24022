"""The MCP door, driven by the official SDK's own client: streamable HTTP against a real `clawrecall serve`,
and stdio against a real `clawrecall mcp` process, both on one store, compared call for call with REST.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import uuid
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any, AsyncIterator, Iterator

import httpx
import httpx2
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from embedding_stub_server import StubEmbeddingServer
from live_server import db, home, server  # noqa: F401 (fixtures)

from clawrecall import Memory
from clawrecall._time import utcnow
from clawrecall.auth import TokenStore

ALICE_PREF = "Alice prefers dark mode in every code editor"
BOB_SECRET = "Bob keeps his bank PIN 4921 in a note titled zebra-lantern"
WRITE_TOOLS = {"memory_store", "memory_forget", "memory_write", "memory_update", "memory_supersede", "memory_delete", "memory_undelete"}


class RestDoor:
    def __init__(self, http: httpx.Client):
        self.http = http

    def list(self) -> list[dict[str, Any]]:
        return self.http.get("/v1/tools").json()["tools"]

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        body = self.http.post(f"/v1/tools/{name}", json=arguments).json()
        return {"text": body["content"][0]["text"], "details": body["details"], "isError": body["isError"]}


class McpDoor:
    """An SDK `Client` living in a background event loop, called synchronously from the tests."""

    def __init__(self, portal: BlockingPortal, client: Client):
        self.portal = portal
        self.client = client

    def list(self) -> list[dict[str, Any]]:
        """The tools as the wire has them: MCP's names (`inputSchema`, `readOnlyHint`) and nothing left out."""
        tools = self.portal.call(self.client.list_tools).tools
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.portal.call(self.client.call_tool, name, arguments)
        return {"text": result.content[0].text, "details": result.structured_content, "isError": result.is_error}


@asynccontextmanager
async def http_client(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as connected:
            yield connected


def stdio_client(db, home, *args: str, env: dict[str, str] | None = None) -> Client:
    return Client(StdioServerParameters(
        command=sys.executable, args=["-m", "clawrecall.cli", "--db", str(db), "mcp", *args],
        env={**os.environ, "CLAWRECALL_HOME": str(home), **(env or {})},
    ))


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal() as running:
        yield running


@pytest.fixture(scope="module")
def tokens(db) -> dict[str, str]:
    store = TokenStore(db)
    made = {"alice": store.create(user_id="alice", agent_id="main")[1], "bob": store.create(user_id="bob")[1]}
    store.close()
    return made


@pytest.fixture(scope="module")
def rest(server, tokens) -> Iterator[RestDoor]:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tokens['alice']}"}, timeout=60) as http:
        yield RestDoor(http)


@pytest.fixture(scope="module")
def seeded(server, tokens) -> dict[str, str]:
    """Memories three and a half days old (so every door shows the same age), and their ids."""
    when = (utcnow() - timedelta(days=3, hours=12)).isoformat()
    rows = [
        ("alice", ALICE_PREF, "preference"), ("alice", "Alice likes green tea in the afternoon", "preference"),
        ("alice", "Alice drinks oolong tea when she codes late", "preference"),
        ("alice", "Alice's team ships the mobile app every second Thursday", "decision"),
        ("bob", BOB_SECRET, "fact"),
    ]
    ids = {}
    for who, content, category in rows:
        response = httpx.post(
            f"{server.url}/v1/memories", json={"content": content, "category": category, "created_at": when},
            headers={"Authorization": f"Bearer {tokens[who]}"},
        )
        ids[content] = response.json()["id"]
    return ids


@pytest.fixture(scope="module")
def mcp_http(portal, server, tokens, seeded) -> Iterator[McpDoor]:
    with portal.wrap_async_context_manager(http_client(server.url, tokens["alice"])) as connected:
        yield McpDoor(portal, connected)


@pytest.fixture(scope="module")
def mcp_stdio(portal, db, home, seeded) -> Iterator[McpDoor]:
    """A `clawrecall mcp` process for alice's main agent."""
    with portal.wrap_async_context_manager(stdio_client(db, home, "--user", "alice", "--agent", "main")) as connected:
        yield McpDoor(portal, connected)


def test_both_transports_list_the_tools_rest_lists(rest, mcp_http, mcp_stdio):
    listed = rest.list()
    assert [t["name"] for t in listed][:4] == ["memory_recall", "memory_store", "memory_forget", "search_context"]
    assert mcp_http.list() == listed
    assert mcp_stdio.list() == listed


def test_tools_say_truthfully_what_they_do_and_what_they_return(mcp_http):
    """The four annotations, as docs/server.md tabulates them, and an object output schema for every tool (the
    SDK's client checks each structured result against it: the calls of the other tests pass that check)."""
    tools = {t["name"]: t for t in mcp_http.list()}
    hints = {
        name: tuple(t["annotations"][h] for h in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"))
        for name, t in tools.items()
    }
    reads = {"memory_recall", "search_context", "memory_search", "memory_get", "memory_list", "memory_stats", "memory_why"}
    assert all(hints[name] == (True, False, True, False) for name in reads)
    assert hints["memory_store"] == (False, False, True, False)  # only adds; dedup makes a repeat a duplicate
    assert hints["memory_write"] == (False, False, False, False)
    assert hints["memory_update"] == (False, True, True, False)
    assert hints["memory_delete"] == (False, True, True, False)
    assert hints["memory_undelete"] == (False, False, True, False)
    assert hints["memory_supersede"] == (False, False, True, False)  # the old one stays; a repeat changes nothing
    assert hints["memory_forget"] == (False, True, False, False)
    assert set(hints) == reads | WRITE_TOOLS
    for name, t in tools.items():
        assert t["outputSchema"]["type"] == "object", name
    assert {"existing_id", "similarity"} <= set(tools["memory_store"]["outputSchema"]["$defs"]["Duplicate"]["properties"])
    assert "created_at" in tools["memory_recall"]["outputSchema"]["$defs"]["RecalledEntry"]["properties"]


def test_every_tool_gives_the_same_details_through_every_door(rest, mcp_http, mcp_stdio, seeded):
    pref = seeded[ALICE_PREF]
    reads = [
        ("memory_recall", {"query": "which theme for the code editor?"}),
        ("memory_recall", {"query": "tea", "limit": 2, "type": "preference"}),
        ("search_context", {"query": "when does the mobile app ship?"}),
        ("memory_search", {"query": "dark mode", "maxResults": 3}),
        ("memory_get", {"id": pref[:8]}),
        ("memory_list", {"limit": 3}),
        ("memory_stats", {}),
        ("memory_get", {"id": str(uuid.uuid4())}),  # an error result, the same everywhere too
    ]
    writes = [  # each repeatable: the second and third door see what the first one left
        ("memory_store", {"content": ALICE_PREF}),  # a duplicate
        ("memory_forget", {"query": "tea"}),  # candidates: nothing erased
        ("memory_forget", {"memoryId": str(uuid.uuid4())}),
        ("memory_update", {"id": pref, "importance": 0.95}),
        ("memory_delete", {"id": pref}),
        ("memory_undelete", {"id": pref}),
    ]
    for name, arguments in reads + writes:
        results = [door.call(name, arguments) for door in (rest, mcp_http, mcp_stdio)]
        assert results[0]["details"] == results[1]["details"] == results[2]["details"], name
        texts = [re.sub(r"\b[0-9a-f]{16}\b", "CODE", r["text"]) for r in results]  # each block draws its own code
        assert texts[0] == texts[1] == texts[2], name
        assert results[0]["isError"] == results[1]["isError"] == results[2]["isError"], name
    assert rest.call("memory_forget", {"query": "tea"})["details"]["action"] == "candidates"

    written = [door.call("memory_write", {"content": f"Alice's note via door {n}", "category": "fact"})
               for n, door in enumerate((rest, mcp_http, mcp_stdio))]
    assert len({w["details"]["id"] for w in written}) == 3
    for w in written:  # the same but for the new memory's id
        new_id = w["details"]["id"]
        assert w["details"] == {"action": "created", "id": new_id, "path": f"clawrecall/fact/{new_id}"}


def test_every_door_checks_arguments_and_never_coerces_them(rest, mcp_http, mcp_stdio, seeded):
    pref = seeded[ALICE_PREF]
    refused = [
        ("memory_store", {"content": "Alice bought a kettle", "importance": True}),
        ("memory_write", {"content": "Alice bought a kettle", "importance": True}),
        ("memory_update", {"id": pref, "importance": "0.5"}),
        ("memory_recall", {"query": "tea", "limit": "2"}),
        ("memory_list", {"includeDeleted": "yes"}),
    ]
    for name, arguments in refused:
        results = [door.call(name, arguments) for door in (rest, mcp_http, mcp_stdio)]
        assert all(r["isError"] and r["details"]["error"]["code"] == "invalid_input" for r in results), (name, results)
        assert results[0]["details"] == results[1]["details"] == results[2]["details"], name
    for door in (rest, mcp_http, mcp_stdio):  # a JSON integer is a number
        assert door.call("memory_update", {"id": pref, "importance": 1})["isError"] is False
    assert rest.call("memory_get", {"id": pref})["details"]["memory"]["importance"] == 1.0


@pytest.mark.parametrize("transport", ["mcp_http", "mcp_stdio"])
def test_alice_never_sees_bobs_memories_whatever_the_arguments_say(request, transport, seeded):
    door: McpDoor = request.getfixturevalue(transport)
    secret = seeded[BOB_SECRET]
    shown = [
        door.call("memory_recall", {"query": "Bob's bank PIN zebra-lantern", "limit": 50}),
        door.call("search_context", {"query": "Bob's bank PIN zebra-lantern", "limit": 50}),
        door.call("memory_search", {"query": "Bob's bank PIN zebra-lantern", "maxResults": 50}),
        door.call("memory_list", {"limit": 100, "includeDeleted": True}),
        door.call("memory_stats", {}),
        door.call("memory_get", {"id": secret}),
        door.call("memory_recall", {"query": "bank PIN", "user_id": "bob"}),
        door.call("memory_recall", {"query": "bank PIN", "userId": "bob", "agent_id": "helper"}),
        door.call("memory_list", {"scope": "user:bob"}),
        door.call("memory_delete", {"id": secret}),
        door.call("memory_forget", {"memoryId": secret}),
    ]
    for n, result in enumerate(shown):
        seen = json.dumps(result["details"]) + result["text"]
        assert "zebra" not in seen and (secret not in seen or n in (5, 9, 10)), n  # 5, 9, 10 echo the id asked for
    codes = [r["details"].get("error", {}).get("code") for r in shown[5:]]
    assert codes == ["not_found", "invalid_input", "invalid_input", "scope_denied", "not_found", None]
    assert shown[-1]["details"]["action"] == "not_found"


def test_bobs_token_sees_his_own(portal, server, tokens, seeded):
    with portal.wrap_async_context_manager(http_client(server.url, tokens["bob"])) as connected:
        hits = McpDoor(portal, connected).call("memory_recall", {"query": "bank PIN"})["details"]["memories"]
    assert [h["id"] for h in hits] == [seeded[BOB_SECRET]]


def test_http_endpoint_refuses_a_missing_or_revoked_token(portal, server, db):
    with pytest.raises(ExceptionGroup) as refused:
        with portal.wrap_async_context_manager(http_client(server.url, None)):
            pass
    assert refused.group_contains(MCPError)
    store = TokenStore(db)
    info, token = store.create(user_id="carol")
    with portal.wrap_async_context_manager(http_client(server.url, token)) as connected:
        door = McpDoor(portal, connected)
        assert door.call("memory_stats", {})["isError"] is False
        store.revoke(info.id)
        with pytest.raises(MCPError):
            door.call("memory_stats", {})
    store.close()


def test_stdio_without_writes_offers_read_tools_only(portal, db, home, seeded):
    """A tool not offered is unknown: a protocol error (-32602, invalid params), as MCP specifies, where bad
    arguments to a tool that exists are a result with isError (above)."""
    env = {"CLAWRECALL_WRITES__ENABLED": "false", "CLAWRECALL_USER": "alice"}
    with portal.wrap_async_context_manager(stdio_client(db, home, env=env)) as connected:
        door = McpDoor(portal, connected)
        names = {t["name"] for t in door.list()}
        with pytest.raises(MCPError) as refused:
            door.call("memory_store", {"content": "anything"})
        listed = door.call("memory_list", {"scope": "user:alice"})
    assert names and not names & WRITE_TOOLS
    assert refused.value.code == -32602 and "no tool named 'memory_store'" in refused.value.message
    assert listed["details"]["total"] >= 4  # CLAWRECALL_USER made it alice, not a config key


def test_stdio_handshake_does_not_wait_for_the_model(portal, tmp_path):
    """The model loads in the background: the handshake completes while the model has not answered (here
    an embedding server that answers when told to), and the first search waits for it instead. A store
    of its own: the module's holds vectors of the `hash` provider."""
    stub = StubEmbeddingServer().start()
    stub.hold = threading.Event()
    env = {"CLAWRECALL_EMBEDDING__PROVIDER": "openai-compatible", "CLAWRECALL_EMBEDDING__BASE_URL": f"{stub.url}/v1",
           "CLAWRECALL_EMBEDDING__MODEL": "stub-embed", "CLAWRECALL_EMBEDDING__API_KEY": "k",
           "CLAWRECALL_EMBEDDING__TIMEOUT_S": "120"}
    client = stdio_client(tmp_path / "model.db", tmp_path / "home", "--user", "alice", env=env)
    try:
        with portal.wrap_async_context_manager(client) as connected:
            door = McpDoor(portal, connected)
            assert stub.answered == 0  # a handshake that waited for the model would have waited 60 s for this answer
            stub.hold.set()
            door.call("memory_store", {"content": "Alice prefers dark mode in every code editor"})
            found = door.call("memory_recall", {"query": "dark mode editor"})
    finally:
        stub.hold.set()
        stub.stop()
    assert "dark mode" in json.dumps(found) and stub.answered >= 2


def test_stdio_answers_a_line_that_is_not_a_message_and_goes_on(db, home):
    """JSON-RPC 2.0: unparsable input gets -32700 and a malformed request -32600, both with id null."""
    import subprocess

    lines = [
        "not json",
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": 5}),
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "clawrecall.cli", "--db", str(db), "mcp", "--user", "alice"],
        input="".join(line + "\n" for line in lines), capture_output=True, text=True, timeout=120,
        env={**os.environ, "CLAWRECALL_HOME": str(home)},
    )
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert replies[0] == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    assert replies[1] == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}
    assert replies[2]["id"] == 1 and replies[2]["result"]["serverInfo"]["name"] == "clawrecall"
    assert done.returncode == 0


def test_stdio_answers_every_request_sent_before_stdin_ends(db, home):
    """`printf … | clawrecall mcp`: the input ends at once, and every request still gets its answer."""
    import subprocess

    def call(n: int, text: str) -> dict:
        return {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "memory_store", "arguments": {"content": text}}}

    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        call(3, "The kayak club meets on Thursdays"), call(4, "Grace tunes her violin before every lesson"),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "clawrecall.cli", "--db", str(db), "mcp", "--user", "piper"],
        input="".join(json.dumps(line) + "\n" for line in lines), capture_output=True, text=True, timeout=120,
        env={**os.environ, "CLAWRECALL_HOME": str(home)},
    )
    replies = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert sorted(replies) == [1, 2, 3, 4] and not replies[3]["result"]["isError"] and not replies[4]["result"]["isError"]
    with Memory.open(db) as mem:
        assert mem.count(user_id="piper") == 2
    for given in (["--user", ""], []):  # an empty id (an unset variable) is refused, never the administrator
        refused = subprocess.run(
            [sys.executable, "-m", "clawrecall.cli", "--db", str(db), "mcp", *given], input="", capture_output=True,
            text=True, timeout=60, env={**os.environ, "CLAWRECALL_HOME": str(home), "CLAWRECALL_USER": ""},
        )
        assert refused.returncode == 2 and "is empty" in refused.stderr, refused.stderr


def test_stdio_refuses_bytes_that_are_not_utf8_and_says_who_it_serves_as(db, home):
    """REST and the CLI refuse text that is not UTF-8; so does stdio (it used to store U+FFFD in its place).
    Without --user/--agent it serves as the administrator, and says so on stderr."""
    import subprocess

    store = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "memory_store", "arguments": {"content": "Remember the caf\u00e9 on Main Street"}}}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode(),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
        json.dumps(store).encode().replace(b"\\u00e9", b"\xe9"),  # Latin-1, not UTF-8
    ]
    done = subprocess.run(
        [sys.executable, "-m", "clawrecall.cli", "--db", str(db), "mcp"],
        input=b"".join(line + b"\n" for line in lines), capture_output=True, timeout=120,
        env={**os.environ, "CLAWRECALL_HOME": str(home)},
    )
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert replies[1] == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    assert "serving as the administrator" in done.stderr.decode()
    with Memory.open(db) as mem:
        assert not [m for m in mem.list() if "Main Street" in m.content]
