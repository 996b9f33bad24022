"""The API's description is true: a client generated from `/openapi.json` works against a real `clawrecall
serve`, every error is described with the body it has, `/docs` loads nothing from another host, hooks
refuse fields they do not know, and readiness waits for the model while liveness does not.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import time

import httpx
import pytest
from fastapi.testclient import TestClient

from clawrecall import Memory
from clawrecall.auth import TokenStore
from clawrecall.server import create_app
from clawrecall.server.spawn import spawn_server


@pytest.fixture
def app_and_token(tmp_path):
    """An in-process server over a store that has a token, so every route but the public ones wants it."""
    with Memory.open(tmp_path / "m.db", check_embedding=False) as mem:
        tokens = TokenStore.for_memory(mem)
        token = tokens.create(user_id="alice", agent_id="main")[1]
        yield create_app(mem, tokens=tokens), token


def test_a_generated_client_round_trips_a_memory(tmp_path):
    """openapi-python-client turns the live server's description into a package; that package adds, reads,
    searches and erases a memory, and reads an error as the error body the description promises."""
    store = TokenStore(tmp_path / "memory.db")
    token = store.create(user_id="alice", agent_id="main")[1]
    store.close()
    with spawn_server(tmp_path / "memory.db", env={"CLAWRECALL_HOME": str(tmp_path / "home")}) as server:
        spec = tmp_path / "openapi.json"
        spec.write_text(httpx.get(f"{server.url}/openapi.json").text)
        (tmp_path / "generator.yaml").write_text("post_hooks: []\n")  # no formatter run: not needed to import it
        generated = subprocess.run(
            [sys.executable, "-m", "openapi_python_client", "generate", "--path", str(spec), "--meta", "none",
             "--output-path", str(tmp_path / "clawrecall_client"), "--config", str(tmp_path / "generator.yaml")],
            capture_output=True, text=True, timeout=120,
        )
        assert generated.returncode == 0, generated.stdout + generated.stderr
        assert "Unable to parse" not in generated.stdout and "Unsupported" not in generated.stdout, generated.stdout
        sys.path.insert(0, str(tmp_path))
        try:
            _round_trip(server.url, token)
        finally:
            sys.path.remove(str(tmp_path))
            for name in [n for n in sys.modules if n.split(".")[0] == "clawrecall_client"]:
                del sys.modules[name]


def _round_trip(url: str, token: str) -> None:
    client_module = importlib.import_module("clawrecall_client")
    memories = importlib.import_module("clawrecall_client.api.memories")
    search = importlib.import_module("clawrecall_client.api.search.search_memories")
    models = importlib.import_module("clawrecall_client.models")
    for name in ("add_memory", "get_memory", "delete_memory"):
        importlib.import_module(f"clawrecall_client.api.memories.{name}")

    client = client_module.AuthenticatedClient(base_url=url, token=token, raise_on_unexpected_status=True)
    added = memories.add_memory.sync(
        client=client, body=models.MemoryIn(content="Alice prefers dark mode in every code editor", tags=["editor"])
    )
    assert isinstance(added, models.AddResult) and str(added.action) == "created", added
    assert added.memory.scope == "user:alice" and added.memory.tags == ["editor"]

    got = memories.get_memory.sync(client=client, memory_id=added.id[:8])
    assert isinstance(got, models.MemoryRecord) and got.content == "Alice prefers dark mode in every code editor"
    assert got.created_at.tzinfo is not None

    found = search.sync(client=client, body=models.SearchIn(query="dark mode code editor", limit=3))
    assert isinstance(found, models.SearchResults) and found.results[0].memory.id == added.id
    assert 0 <= found.results[0].score <= 1

    erased = memories.delete_memory.sync(client=client, memory_id=added.id, hard=True)
    assert isinstance(erased, models.Forgotten) and erased.forgotten == added.id

    gone = memories.get_memory.sync_detailed(client=client, memory_id=added.id)
    assert gone.status_code == 404 and isinstance(gone.parsed, models.ErrorBody)
    assert gone.parsed.error.code == "not_found"

    anonymous = client_module.Client(base_url=url, raise_on_unexpected_status=True)
    refused = memories.get_memory.sync_detailed(client=anonymous, memory_id=added.id)
    assert refused.status_code == 401 and refused.parsed.error.code == "unauthenticated"


def test_every_error_is_described_with_the_body_it_has(app_and_token):
    app, _ = app_and_token
    schema = TestClient(app).get("/openapi.json").json()
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    assert schema["components"]["schemas"]["ErrorBody"]["required"] == ["error"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            name = f"{method.upper()} {path}"
            assert re.fullmatch(r"[a-z][a-z_]*", operation["operationId"]), name
            responses = operation["responses"]
            for status, response in responses.items():
                body = json.dumps(response.get("content", {}))
                if status.startswith(("4", "5")):  # JSON, also where the route itself answers otherwise (export)
                    assert response["content"] == {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}, (
                        name, status)
                elif status != "204" and (name, status) != ("GET /v1/conversations/{session_id}/export", "200"):  # JSONL
                    assert "$ref" in body, (name, status)  # a success is typed, never a free object
            if path in ("/health", "/ready"):
                assert operation["security"] == [], name
            else:
                assert {"401", "403", "503"} <= responses.keys(), name
                assert "security" not in operation, name  # the document's: the bearer token
            if "requestBody" in operation and path not in ("/health", "/ready"):
                assert "413" in responses, name
    add = schema["paths"]["/v1/memories"]["post"]["responses"]
    assert {"200", "201", "400", "401", "403", "413", "422", "503"} <= add.keys()
    assert {"404", "409"} <= schema["paths"]["/v1/memories/{memory_id}"]["get"]["responses"].keys()
    assert "`scope_denied`" in add["403"]["description"] and "`forbidden`" in add["403"]["description"]
    assert "415" in schema["paths"]["/v1/tools/memory_recall"]["post"]["responses"]
    cancel = schema["paths"]["/v1/jobs/{job_id}/cancel"]["post"]["responses"]
    assert "`job_state`" in cancel["409"]["description"] and "`not_found`" in cancel["404"]["description"]
    assert cancel["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Job"}
    statuses = schema["components"]["schemas"]["Job"]["properties"]["status"]
    assert statuses["enum"] == ["queued", "running", "done", "dead", "cancelled"]


def test_docs_load_nothing_from_another_host(app_and_token):
    app, _ = app_and_token
    client = TestClient(app)
    for page in ("/docs", "/redoc"):
        html = client.get(page)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html"), page
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", html.text, re.IGNORECASE), html.text
        assets = re.findall(r"""(?:src|href)=["']?(/[^"' >]+)""", html.text)
        assert assets, page
        for asset in assets:  # served here, without a token
            served = client.get(asset)
            assert served.status_code == 200 and len(served.content) > 1000, asset
    assert "validatorUrl" in client.get("/docs").text  # Swagger UI does not send the schema to its validator
    assert client.get("/docs/assets/swagger-ui-bundle.js").headers["content-type"].startswith(("text/javascript",
                                                                                               "application/javascript"))


def test_readiness_waits_for_the_model_while_liveness_answers(app_and_token):
    app, token = app_and_token
    before = TestClient(app)  # the lifespan (which starts loading the model) has not run
    assert before.get("/health").status_code == 200 and before.get("/health").json()["status"] == "idle"
    not_ready = before.get("/ready")
    assert not_ready.status_code == 503 and not_ready.json()["error"]["code"] == "not_ready"
    with TestClient(app) as running:  # no token: both answer anyone
        deadline = time.monotonic() + 30
        while running.get("/ready").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running.get("/ready").json() == {"ready": True, "model": "hashed-word-trigrams"}
        assert running.get("/health").json()["status"] == "ok"
        assert running.get("/v1/stats").status_code == 401


def test_hooks_refuse_fields_they_do_not_know_and_accept_openclaws_events(app_and_token):
    app, token = app_and_token
    client = TestClient(app, headers={"Authorization": f"Bearer {token}", "X-Clawrecall-Session": "s1"})
    for route, body in [
        ("before_prompt_build", {"promt": "which editor theme do I like?"}),
        ("startup", {"modle": "sonnet"}),
        ("agent_end", {"messages": [], "sucess": True}),
        ("agent_end", {"messages": [{"content": "no role"}]}),
        ("agent_end", {"messages": [{"role": "user", "content": "x"}], "success": "yes"}),
    ]:
        refused = client.post(f"/v1/hooks/{route}", json=body)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_request", (route, body)
    # OpenClaw's own events, whole: fields the hook does not read, and messages with more than role and content
    message = {"role": "user", "content": [{"type": "text", "text": "Remember that I always deploy on Tuesdays"}],
               "timestamp": 1760000000000}
    recall = client.post("/v1/hooks/before_prompt_build", json={
        "prompt": "when do I deploy?", "messages": [message], "currentUserMessage": "when do I deploy?",
        "currentUserMessageId": "m1",
    })
    assert recall.status_code == 200 and set(recall.json()) == {"prependContext", "ephemeral", "memories", "skipped"}
    captured = client.post("/v1/hooks/agent_end", json={
        "runId": "r1", "messages": [message], "success": True, "error": None, "durationMs": 1234,
    })
    assert captured.status_code == 200 and captured.json()["queued"] == 1
    assert client.post("/v1/hooks/startup").status_code == 200  # no body at all: nothing to refuse
